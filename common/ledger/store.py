"""The ledger's storage: one SQLite file (stdlib ``sqlite3``), append-only, hash-chained.

* WAL journal and ``synchronous = FULL``: a committed row survives a power cut, and a reader
  (``fedanon party ledger show``) never blocks the daemon.
* Writes happen in ``BEGIN IMMEDIATE`` transactions (:meth:`Store.transaction`): the write
  lock is taken before anything is read, so two concurrent Prepares -- threads of one daemon
  or two processes on the same file -- never both see the same budget left.
* The schema is versioned (table ``schema_version``) and brought forward on open by the
  numbered scripts of :data:`MIGRATIONS`; a file written by a newer version is refused.
* Rows are only appended (:meth:`Store.append`), each chained to the previous one
  (:mod:`fedanon.ledger.chain`).

Every SQLite failure -- a corrupt file, a file locked by someone else for longer than
:data:`BUSY_TIMEOUT_MS`, a read-only file or directory, a full disk -- becomes a
:class:`fedanon.errors.LedgerError` naming the file and what SQLite said.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fedanon.errors import LedgerError
from fedanon.ledger.chain import COLUMNS, GENESIS, Value, row_hash

# how long a write waits for another connection's transaction: each commit fsyncs (about
# 70 ms on this machine), so fifty writers at once queue for 3-4 s, more under load
BUSY_TIMEOUT_MS = 30_000
Clock = Callable[[], dt.datetime]

MIGRATIONS: tuple[str, ...] = (
    # 1: the entries table, chained
    """
    CREATE TABLE entries (
        seq INTEGER PRIMARY KEY,
        time TEXT NOT NULL,
        event TEXT NOT NULL,
        run_id TEXT, identity TEXT, cert_fp TEXT, peer TEXT, address TEXT, ring TEXT,
        spec_hash TEXT, method TEXT, params TEXT, epsilon TEXT,
        data_fp TEXT, data TEXT, release_key TEXT,
        reason TEXT, phase TEXT, bytes INTEGER, until TEXT,
        hash TEXT NOT NULL
    );
    CREATE INDEX entries_data ON entries (data_fp, event);
    CREATE INDEX entries_who ON entries (identity, event, time);
    CREATE INDEX entries_address ON entries (address, event, time);
    CREATE INDEX entries_run ON entries (run_id);
    CREATE INDEX entries_time ON entries (time);
    """,
    # 2: the send keys of a non-DP run (fedanon.ledger.transcript), found by release key
    """
    ALTER TABLE entries ADD COLUMN transcript TEXT;
    CREATE INDEX entries_transcript ON entries (release_key) WHERE transcript IS NOT NULL;
    """,
)
VERSION = len(MIGRATIONS)
INSERT = (
    f"INSERT INTO entries ({', '.join(COLUMNS)}, hash) "  # noqa: S608 -- fixed column names
    f"VALUES ({', '.join('?' * (len(COLUMNS) + 1))})"
)


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def stamp(t: dt.datetime) -> str:
    """A time as stored: UTC, microseconds, sortable as text."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_stamp(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)


def _fail(path: Path, exc: sqlite3.Error, doing: str) -> LedgerError:
    msg = str(exc) or type(exc).__name__
    hint = ""
    low = msg.lower()
    if "not a database" in low or "malformed" in low:
        hint = ": the file is corrupt (restore it from a backup; never delete it)"
    elif "locked" in low or "busy" in low:
        hint = ": another process holds the ledger locked"
    elif "readonly" in low or "read-only" in low or "unable to open" in low:
        hint = ": the file or its directory cannot be written"
    elif "full" in low:
        hint = ": the disk is full"
    return LedgerError(f"privacy ledger {path}: cannot {doing}: {msg}{hint}")


class Store:
    """One connection to the ledger file, shared by the daemon's threads (a lock orders
    them; ``BEGIN IMMEDIATE`` orders processes)."""

    def __init__(self, path: Path, *, create: bool = True, clock: Clock = utc_now) -> None:
        self.path = path
        self.clock = clock
        self._lock = threading.RLock()
        self.cache: dict[str, Any] = {}  # derived from rows already read (fedanon.ledger.budgets)
        if not create and not path.exists():
            raise LedgerError(f"privacy ledger {path}: no such file (has the daemon run yet?)")
        try:
            self._db = sqlite3.connect(
                str(path),
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,  # transactions are begun explicitly
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise _fail(path, exc, "open it") from None
        try:
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise sqlite3.OperationalError(f"journal mode is {mode}, not wal")
            self._db.execute("PRAGMA synchronous = FULL")
            self._migrate()
        except sqlite3.Error as exc:
            self._db.close()
            raise _fail(path, exc, "open it") from None
        except LedgerError:
            self._db.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # schema -----------------------------------------------------------------------------
    def _migrate(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            have = self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
            ).fetchone()
            if have is None:
                self._db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
                self._db.execute("INSERT INTO schema_version VALUES (0)")
            version = int(self._db.execute("SELECT version FROM schema_version").fetchone()[0])
            if version > VERSION:
                raise LedgerError(
                    f"privacy ledger {self.path}: schema version {version} was written by a "
                    f"newer fedanon (this one knows up to {VERSION}); upgrade fedanon"
                )
            for v in range(version, VERSION):
                for stmt in MIGRATIONS[v].split(";"):
                    if stmt.strip():
                        self._db.execute(stmt)
            if version != VERSION:
                self._db.execute("UPDATE schema_version SET version = ?", (VERSION,))
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    @property
    def version(self) -> int:
        return int(self.read("SELECT version FROM schema_version")[0][0])

    def quick_check(self) -> None:
        """SQLite's own consistency check of the file (pages, indexes)."""
        rows = self.read("PRAGMA quick_check")
        if [r[0] for r in rows] != ["ok"]:
            raise LedgerError(
                f"privacy ledger {self.path}: the file is corrupt ({rows[0][0]}); restore it "
                "from a backup, never delete it"
            )

    # access ------------------------------------------------------------------------------
    @contextmanager
    def transaction(self, doing: str = "write to it") -> Iterator[Txn]:
        """A write transaction taken before anything is read (``BEGIN IMMEDIATE``)."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _fail(self.path, exc, doing) from None
            txn = Txn(self)
            try:
                yield txn
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise _fail(self.path, exc, doing) from None
            except BaseException:
                self._rollback()
                raise
            for fn in txn.after_commit:
                fn()

    def _rollback(self) -> None:
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the connection rolls back by itself when it cannot

    def read(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise _fail(self.path, exc, "read it") from None

    def iter_rows(self, sql: str, params: Sequence[Any] = ()) -> Iterator[Any]:
        """Rows of a query, fetched in batches (``ledger show`` over many runs)."""
        with self._lock:
            try:
                cur = self._db.execute(sql, params)
                while batch := cur.fetchmany(1000):
                    yield from batch
            except sqlite3.Error as exc:
                raise _fail(self.path, exc, "read it") from None


class Txn:
    """What may be done inside :meth:`Store.transaction`: read, and append chained rows."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.after_commit: list[Callable[[], None]] = []

    def read(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        return self.store._db.execute(sql, params).fetchall()

    def now(self) -> dt.datetime:
        return self.store.clock()

    def append(self, event: str, **fields: Value) -> tuple[int, str]:
        """Append one row; returns (its sequence number, its hash as hex)."""
        unknown = set(fields) - set(COLUMNS[3:])
        if unknown:
            raise ValueError(f"unknown ledger columns {sorted(unknown)}")
        db = self.store._db
        last = db.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        seq, prev = (1, GENESIS) if last is None else (last[0] + 1, bytes.fromhex(last[1]))
        when = fields.pop("time", None) or stamp(self.now())
        values: list[Value] = [seq, when, event, *(fields.get(c) for c in COLUMNS[3:])]
        digest = row_hash(prev, values).hex()
        db.execute(INSERT, (*values, digest))
        return seq, digest
