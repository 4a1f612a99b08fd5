"""The hash chain over the ledger's rows: an edited, deleted or reordered row is found.

Every row carries ``hash = SHA-256(previous row's hash || canonical encoding of the row)``;
the first row chains to 32 zero bytes.  The canonical encoding is the row's columns, in the
fixed order of :data:`COLUMNS` (its sequence number included, so a row moved elsewhere no
longer matches), as compact JSON.  :func:`verify` recomputes the chain and names the first
row that does not match, and a gap in the sequence numbers (a deleted row).

What the chain cannot show by itself: the *last* rows deleted (the head is then an earlier,
intact row) or the whole file replaced.  Each row's hash is also written to the daemon's log
(:mod:`fedanon.ledger.daemon`), a second witness a privacy officer can compare the head with.

The chain has no key: anyone who can write the file can rewrite rows *and* recompute every
hash after them, and ``verify`` then passes.  It shows accidents and careless edits; against
an insider with write access only the hashes seen outside the file count -- the daemon's log
lines and the head ``ledger show`` prints, copied somewhere the insider cannot change.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# every column of the entries table but ``hash``, in the order they are hashed
COLUMNS = (
    "seq",
    "time",
    "event",
    "run_id",
    "identity",
    "cert_fp",
    "peer",
    "address",
    "ring",
    "spec_hash",
    "method",
    "params",
    "epsilon",
    "data_fp",
    "data",
    "release_key",
    "reason",
    "phase",
    "bytes",
    "until",
    "transcript",  # schema 2; a row without one is hashed as schema 1 hashed it
)
GENESIS = bytes(32)

Value = str | int | None


def encode(row: Sequence[Value]) -> bytes:
    """The canonical encoding of a row (values in :data:`COLUMNS` order)."""
    if len(row) != len(COLUMNS):
        raise ValueError(f"a ledger row has {len(COLUMNS)} columns, not {len(row)}")
    if row[-1] is None:  # no transcript: the encoding of schema 1 (old rows still verify)
        row = row[:-1]
    return json.dumps(list(row), separators=(",", ":"), ensure_ascii=True).encode("ascii")


def row_hash(prev: bytes, row: Sequence[Value]) -> bytes:
    return hashlib.sha256(prev + encode(row)).digest()


@dataclass(frozen=True)
class Broken:
    """The first row that does not belong where it is, and why."""

    seq: int
    why: str

    def __str__(self) -> str:
        return f"row {self.seq}: {self.why}"


def verify(rows: Iterable[tuple[Sequence[Value], str]]) -> tuple[int, Broken | None]:
    """Check ``(row values, stored hex hash)`` pairs in sequence order.

    Returns (rows checked, the first broken row or None)."""
    prev = GENESIS
    expected_seq = 1
    n = 0
    for values, stored in rows:
        seq = values[0]
        if not isinstance(seq, int):
            return n, Broken(expected_seq, "no sequence number")
        if seq != expected_seq:
            what = "deleted" if seq > expected_seq else "duplicated or reordered"
            gap = (
                f"row {expected_seq} is missing ({what})"
                if seq > expected_seq
                else f"sequence number {seq} where {expected_seq} was expected ({what})"
            )
            return n, Broken(seq, gap)
        want = row_hash(prev, values)
        if want.hex() != stored:
            return n, Broken(
                seq,
                "its hash does not match its content and the previous row's hash "
                "(edited, replaced, or a row before it was changed)",
            )
        prev = want
        expected_seq += 1
        n += 1
    return n, None
