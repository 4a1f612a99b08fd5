"""What the privacy officer reads: ``ledger show`` (text, JSON, CSV) and ``ledger verify``."""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TextIO

from fedanon.errors import InputError
from fedanon.ledger.chain import COLUMNS, Broken, verify
from fedanon.ledger.records import DP
from fedanon.ledger.store import Store, stamp
from fedanon.ledger.transcript import KEY_HEX

# the table's columns as shown: the chain's columns (transcript beside the release it signs)
# and the hash
_AT = COLUMNS.index("release_key") + 1
SHOWN = (
    *COLUMNS[:_AT],
    "transcript",
    *(c for c in COLUMNS[_AT:] if c != "transcript"),
    "hash",
)


def parse_since(text: str) -> str:
    """``--since 2025-01-31`` or an ISO time -> the stored form (UTC)."""
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            "--since is not a date", value=text, expected="YYYY-MM-DD or YYYY-MM-DDTHH:MM"
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return stamp(t)


def rows(store: Store, since: str | None = None) -> Iterator[dict[str, Any]]:
    cols = ", ".join(SHOWN)
    sql = f"SELECT {cols} FROM entries"  # noqa: S608 -- fixed column names
    params: tuple[str, ...] = ()
    if since is not None:
        sql += " WHERE time >= ?"
        params = (since,)
    for r in store.iter_rows(sql + " ORDER BY seq", params):
        yield dict(zip(SHOWN, r, strict=True))


def write_json(out: TextIO, it: Iterator[dict[str, Any]]) -> int:
    n = 0
    out.write("[")
    for row in it:
        out.write(("\n" if n == 0 else ",\n") + json.dumps(row, ensure_ascii=False))
        n += 1
    out.write("\n]\n")
    return n


def write_csv(out: TextIO, it: Iterator[dict[str, Any]]) -> int:
    w = csv.DictWriter(out, fieldnames=SHOWN, lineterminator="\n")
    w.writeheader()
    n = 0
    for row in it:
        w.writerow(row)
        n += 1
    return n


def _line(r: dict[str, Any]) -> str:
    ev = r["event"]
    run = (r["run_id"] or "")[:8]
    who = r["identity"] or r.get("address") or ""
    parts = [f"{r['seq']:>6}", r["time"][:19] + "Z", f"{ev:<8}"]
    if run:
        parts.append(f"run {run}")
    if who and who != "-":
        parts.append(f"by {who}")
    if r["peer"] and r["peer"] != "-":
        parts.append(f"from {r['peer']}")
    if r["method"]:
        parts.append(f"{r['method']} {r['params'] or ''}".strip())
    if r["data_fp"]:
        parts.append(f"data {r['data_fp'][:12]}")
    if r["release_key"]:
        parts.append(f"release {r['release_key'][:12]}")
    if r["transcript"]:
        parts.append(f"{len(r['transcript']) // KEY_HEX} new sends")
    if ev in ("released", "aborted") or (r["bytes"] or 0) > 0:
        parts.append(f"{r['bytes'] or 0} bytes sent")
    if r["phase"] and ev not in ("reserved", "refused", "failed"):
        parts.append(f"phase: {r['phase']}")
    if r["until"]:
        parts.append(f"until {r['until'][:19]}Z")
    if r["reason"]:
        parts.append(f"-- {r['reason']}")
    return "  ".join(parts)


@dataclass
class _Spent:
    epsilon: Fraction
    releases: set[str]
    runs: int


def write_text(out: TextIO, it: Iterator[dict[str, Any]], store: Store) -> int:
    n = 0
    for row in it:
        out.write(_line(row) + "\n")
        n += 1
    spent: dict[str, _Spent] = {}
    for event, fp, method, eps, key in store.iter_rows(
        "SELECT event, data_fp, method, epsilon, release_key FROM entries "
        "WHERE event IN ('reserved', 'diverged')"
    ):
        s = spent.setdefault(fp, _Spent(Fraction(0), set(), 0))
        s.runs += event == "reserved"
        if method == DP:
            s.epsilon += Fraction(eps)
        else:
            s.releases.add(key)
    out.write(f"{n} rows\n")
    for fp, s in spent.items():
        out.write(
            f"table {fp[:12]}: {s.runs} runs reserved, epsilon spent {float(s.epsilon):g}, "
            f"{len(s.releases)} distinct releases\n"
        )
    out.write(head_line(store) + "\n")
    return n


def head_line(store: Store) -> str:
    """The chain's head: copy it somewhere the ledger's writers cannot change -- the chain has
    no key, so an insider who rewrites rows can recompute every hash after them."""
    last = store.read("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1")
    if not last:
        return "chain head: no rows"
    return f"chain head: row {last[0][0]} hash {last[0][1]}"


def check_chain(store: Store) -> tuple[int, Broken | None]:
    cols = ", ".join(COLUMNS)
    it = store.iter_rows(f"SELECT {cols}, hash FROM entries ORDER BY seq")  # noqa: S608
    return verify((tuple(r[:-1]), r[-1]) for r in it)
