"""A hospital's privacy ledger as the report reads it: read-only, while the daemon runs.

The file is opened through SQLite's URI ``file:...?mode=ro``: no write, no migration, no
journal-mode change, no lock a writer waits for (the ledger is in WAL mode, so the daemon's
appends go on while the page is built).  What is read: the rows of ONE run (matched by the
run id the leader's run report carries, ``federation.run_id``), what each table's budgets
have spent so far (epsilon of the DP runs reserved on it, the distinct releases of the
others), the chain's head and whether the chain recomputes (:func:`fedanon.ledger.chain.verify`).

What is shown of a row is a fixed set of columns the ledger writes itself (event, time, the
leader's certificate name, method and parameters, epsilon, bytes of statistics sent, short
fingerprints and release keys).  Never shown: the ``data`` column (the data file's path and
identity), the peer's address, and the free text of a failed Prepare or of a run aborted in
Prepare (an error's message, which may quote a value of the hospital's table) -- the page
says where to read it (``fedanon party ledger show``).  A missing, unreadable, corrupt or
newer-than-known file is a :class:`fedanon.errors.LedgerError` (exit 2) naming the file.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from urllib.parse import quote

from fedanon.errors import LedgerError
from fedanon.ledger.chain import COLUMNS, Broken, verify
from fedanon.ledger.keys import BUDGET_KEYS
from fedanon.ledger.records import DP
from fedanon.ledger.store import VERSION
from fedanon.ledger.transcript import KEY_HEX

WITHHELD = (
    "(withheld from the page: an error's text may quote the hospital's data; "
    "`fedanon party ledger show --config party.toml` has it)"
)
RUN_COLUMNS = (
    "seq", "time", "event", "identity", "method", "params", "epsilon", "data_fp",
    "release_key", "transcript", "reason", "phase", "bytes",
)  # fmt: skip
# the free texts the ledger writes itself (fedanon.ledger.budgets / .daemon), shown as written
OWN_TEXTS = (
    "a new release: the leader's instructions left the released runs' path",
    "the daemon stopped before the run ended (killed or crashed)",
    "unknown bytes of statistics may have left; the budget stays spent",
)


@dataclass(frozen=True)
class Entry:
    """One row of the run, as the page shows it (every field text the ledger wrote)."""

    seq: int
    time: str
    event: str
    identity: str
    method: str
    params: str
    epsilon: str
    bytes_sent: int | None
    data_fp: str
    release_key: str
    new_sends: int | None
    detail: str


@dataclass(frozen=True)
class Spent:
    """One table's spending so far (every run reserved on it, this one included)."""

    data_fp: str
    runs: int
    epsilon: Fraction
    releases: int


@dataclass(frozen=True)
class LedgerView:
    path: Path
    run_id: str
    entries: tuple[Entry, ...]
    spent: tuple[Spent, ...]
    rows: int
    head: tuple[int, str] | None  # (row, hash hex) of the last row
    broken: Broken | None  # the first row the chain does not recompute, None: intact

    @property
    def tables(self) -> tuple[str, ...]:
        """The data fingerprints this run was reserved on (normally one)."""
        return tuple(dict.fromkeys(e.data_fp for e in self.entries if e.data_fp))


def connect_read_only(path: Path) -> sqlite3.Connection:
    """The ledger opened read-only (``mode=ro``): it is never written through this."""
    if not path.exists():
        raise LedgerError(
            f"privacy ledger {path}: no such file (is it the path of party.toml's [ledger] "
            "path, and has the daemon run yet?)"
        )
    if not path.is_file():
        raise LedgerError(f"privacy ledger {path}: not a regular file")
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    try:
        return sqlite3.connect(uri, uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        raise _unreadable(path, exc) from None


def _unreadable(path: Path, exc: sqlite3.Error) -> LedgerError:
    msg = str(exc) or type(exc).__name__
    low = msg.lower()
    hint = ""
    if "not a database" in low or "malformed" in low or "no such table" in low:
        hint = ": the file is corrupt or not a ledger (restore it from a backup)"
    elif "unable to open" in low:
        hint = ": the file cannot be read"
    return LedgerError(f"privacy ledger {path}: cannot read it: {msg}{hint}")


def read_ledger(path: Path, run_id: str) -> LedgerView:
    """The run's rows, every table's spending, the chain's head and check (read-only)."""
    db = connect_read_only(path)
    try:
        return _read(db, path, run_id.lower())
    except sqlite3.Error as exc:
        raise _unreadable(path, exc) from None
    finally:
        db.close()


def _read(db: sqlite3.Connection, path: Path, run_id: str) -> LedgerView:
    ok = [r[0] for r in db.execute("PRAGMA quick_check").fetchall()]
    if ok != ["ok"]:
        raise LedgerError(f"privacy ledger {path}: the file is corrupt ({ok[0]})")
    version = int(db.execute("SELECT version FROM schema_version").fetchone()[0])
    if version > VERSION:
        raise LedgerError(
            f"privacy ledger {path}: schema version {version} was written by a newer "
            f"fedanon (this one reads up to {VERSION}); upgrade fedanon"
        )
    have = {r[1] for r in db.execute("PRAGMA table_info(entries)").fetchall()}
    cols = ", ".join(c if c in have else f"NULL AS {c}" for c in COLUMNS)
    rows = db.execute(f"SELECT {cols}, hash FROM entries ORDER BY seq")  # noqa: S608
    _, broken = verify((tuple(r[:-1]), r[-1]) for r in rows)
    total = int(db.execute("SELECT count(*) FROM entries").fetchone()[0])
    last = db.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
    picked = ", ".join(c if c in have else f"NULL AS {c}" for c in RUN_COLUMNS)
    mine = db.execute(
        f"SELECT {picked} FROM entries WHERE run_id = ? ORDER BY seq",  # noqa: S608
        (run_id,),
    ).fetchall()
    entries = tuple(_entry(dict(zip(RUN_COLUMNS, r, strict=True))) for r in mine)
    return LedgerView(
        path=path,
        run_id=run_id,
        entries=entries,
        spent=_spent(db),
        rows=total,
        head=None if last is None else (int(last[0]), str(last[1])),
        broken=broken,
    )


def _spent(db: sqlite3.Connection) -> tuple[Spent, ...]:
    """Per table, as :mod:`fedanon.ledger.budgets` counts it: a reserved (or diverged) row
    spends its epsilon (DP) or its release key (the others), aborted or not."""
    runs: dict[str, int] = {}
    eps: dict[str, Fraction] = {}
    keys: dict[str, set[str]] = {}
    for event, fp, method, epsilon, key in db.execute(
        "SELECT event, data_fp, method, epsilon, release_key FROM entries "
        "WHERE event IN ('reserved', 'diverged') AND data_fp IS NOT NULL ORDER BY seq"
    ):
        runs[fp] = runs.get(fp, 0) + (event == "reserved")
        eps.setdefault(fp, Fraction(0))
        keys.setdefault(fp, set())
        if method == DP and epsilon is not None:
            eps[fp] += Fraction(str(epsilon))
        elif key is not None:
            keys[fp].add(str(key))
    return tuple(Spent(fp, runs[fp], eps[fp], len(keys[fp])) for fp in runs)


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _detail(row: dict[str, object]) -> str:
    """What the row says in words, never an error's own text (see the module doc)."""
    event, reason, phase = row["event"], _text(row["reason"]), _text(row["phase"])
    parts = []
    if phase and event not in ("reserved", "refused", "failed"):
        own = phase in OWN_TEXTS or not phase.startswith("Prepare")
        parts.append(f"phase: {phase}" if own else f"phase: Prepare {WITHHELD}")
    if reason:
        rule = reason.split(":", 1)[0]
        if reason in OWN_TEXTS or (event == "refused" and rule in BUDGET_KEYS):
            parts.append(reason)
        elif event == "refused":
            parts.append(f"refused by the policy or the protocol {WITHHELD}")
        else:
            parts.append(WITHHELD)
    return "; ".join(parts)


def _entry(row: dict[str, object]) -> Entry:
    transcript = row["transcript"]
    b = row["bytes"]
    return Entry(
        seq=int(str(row["seq"])),
        time=_text(row["time"])[:19] + "Z",
        event=_text(row["event"]),
        identity=_text(row["identity"]),
        method=_text(row["method"]),
        params=_text(row["params"]),
        epsilon=_text(row["epsilon"]),
        bytes_sent=b if isinstance(b, int) else None,
        data_fp=_text(row["data_fp"]),
        release_key=_text(row["release_key"]),
        new_sends=None if transcript is None else len(str(transcript)) // KEY_HEX,
        detail=_detail(row),
    )
