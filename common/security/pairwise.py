"""Pairwise-masked secure sum (Bonawitz et al., CCS 2017, without dropout recovery).

Party ``i`` of ``n`` sends, for sum number ``t``::

    y_i = x_i + sum_{j > i} PRG(s_ij, t) - sum_{j < i} PRG(s_ij, t)   (mod 2^64)

straight to the leader, chunk by chunk (each chunk's mask from its offset in the stream,
:mod:`fedanon.security.prg`).  Every pair's mask is added by one of its parties and
subtracted by the other, so ``sum_i y_i = sum_i x_i``: the leader learns the total only,
and one party's ``y_i`` is uniformly random to anyone missing even one of its seeds -- to
learn ``x_i`` the leader needs every other party.

:class:`Accumulator` is the leader's side of one sum: it adds each chunk into the total as
it arrives (never holding n vectors), accepts each (party, chunk) once, in order, for this
sum only, and refuses a chunk whose bytes it has already seen in this run (a masked chunk
is uniformly random, so a repeat is a replay, whatever its header says).

A Contribute cut by a transient network failure is asked again (:meth:`Accumulator.restart`):
the party answers a repeat of its last order with the *same* bytes (its statistics and
masks for sum ``t`` are fixed once computed), so a retry tells the leader nothing new --
two different vectors under one mask would reveal their difference, and the party never
sends them.  The chunks the leader already added must come again byte for byte (they are
skipped, not added twice); a retried chunk that differs stops the run.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, MutableSet, Sequence
from dataclasses import dataclass

import numpy as np

from fedanon.arrays import IntArray, U64Array
from fedanon.errors import ProtocolError
from fedanon.security.keyagree import PairSeeds
from fedanon.security.prg import keystream_into, scratch
from fedanon.tds.state import Phase

__all__ = ["Accumulator", "SumOrder", "mask", "masked_chunks"]


def mask(
    seeds: PairSeeds, sum_no: int, offset: int, count: int, buf: bytearray | None = None
) -> U64Array:
    """Party ``seeds.position``'s mask for words ``offset ..`` of sum ``sum_no`` (``buf``: a
    reused :func:`~fedanon.security.prg.scratch` buffer of at least ``count`` words)."""
    out = np.zeros(count, dtype=np.uint64)
    buf = scratch(count) if buf is None else buf
    for j, seed in enumerate(seeds.seeds):
        if seed is None:
            continue
        words = keystream_into(seed, sum_no, offset, count, buf)
        if j > seeds.position:
            np.add(out, words, out=out)
        else:
            np.subtract(out, words, out=out)
    return out


def masked_chunks(
    stats: IntArray, seeds: PairSeeds, sum_no: int, chunk_words: int
) -> Iterator[tuple[int, bytes]]:
    """(seq, little-endian bytes) of ``stats`` masked for sum ``sum_no``, chunk by chunk
    (an empty vector: one empty chunk)."""
    if chunk_words <= 0 or chunk_words % 2:
        raise ValueError("chunks are a positive, even number of words")
    words = stats.view(np.uint64) if stats.dtype == np.int64 else stats.astype(np.uint64)
    buf = scratch(min(chunk_words, words.size))
    for seq, start in enumerate(range(0, max(words.size, 1), chunk_words)):
        part = words[start : start + chunk_words]
        out = mask(seeds, sum_no, start, part.size, buf)
        np.add(out, part, out=out)
        yield seq, out.astype("<u8", copy=False).tobytes()


def _fingerprint(party: int, data: bytes) -> bytes:
    """Enough of a chunk to recognise it again (uniformly random bytes: its ends suffice)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(len(data).to_bytes(8, "little"))
    h.update(data[:64])
    h.update(data[-64:])
    return bytes([party & 0xFF]) + h.digest()


class Accumulator:
    """The leader's running total of one pairwise sum; :meth:`add` is thread-safe."""

    def __init__(
        self,
        size: int,
        parties: Sequence[str],
        sum_no: int,
        chunk_words: int,
        seen: MutableSet[bytes],
    ) -> None:
        self.size = size
        self.parties = tuple(parties)
        self.sum_no = sum_no
        self.chunk_words = chunk_words
        self.n_chunks = max(1, -(-size // chunk_words))
        self.total: U64Array = np.zeros(size, dtype=np.uint64)
        self.next_seq = [0] * len(self.parties)
        self._got: list[list[bytes]] = [[] for _ in self.parties]  # fingerprints, by seq
        self._again = [0] * len(self.parties)  # chunks a restarted stream sends again first
        self._seen = seen
        self._lock = threading.Lock()

    def add(self, party: int, sum_no: int, seq: int, data: bytes) -> None:
        """Add chunk ``seq`` of party number ``party``; :class:`ProtocolError` for a chunk of
        another sum, out of order, of the wrong size, or seen before in this run."""
        who = self.parties[party]
        if sum_no != self.sum_no:
            raise ProtocolError(f"{who}: a chunk of sum {sum_no} in sum {self.sum_no} (replay)")
        start = seq * self.chunk_words
        want = min(self.chunk_words, self.size - start) if start < self.size else 0
        if seq >= self.n_chunks or len(data) != 8 * want:
            raise ProtocolError(f"{who}: chunk {seq} of {len(data)} bytes does not fit the sum")
        fp = _fingerprint(party, data)
        with self._lock:
            if self._again[party]:  # a retried stream: what was added comes again first
                if seq != len(self._got[party]) - self._again[party] or (
                    fp != self._got[party][seq]
                ):
                    raise ProtocolError(f"{who}: retried chunk {seq} differs from the first")
                self._again[party] -= 1
                return
            if seq != self.next_seq[party]:
                raise ProtocolError(f"{who}: chunk {seq}, expected {self.next_seq[party]}")
            if want and fp in self._seen:
                raise ProtocolError(f"{who}: a masked chunk repeated from an earlier sum (replay)")
            self._seen.add(fp)
            self._got[party].append(fp)
            self.next_seq[party] += 1
            if want:
                view = self.total[start : start + want]
                np.add(view, np.frombuffer(data, dtype="<u8"), out=view)

    def restart(self, party: int) -> None:
        """Party number ``party``'s stream is asked again from its first chunk."""
        with self._lock:
            self._again[party] = len(self._got[party])

    def result(self) -> IntArray:
        """The total as signed integers, once every party delivered every chunk."""
        late = [p for p, s in zip(self.parties, self.next_seq, strict=True) if s != self.n_chunks]
        if late:
            raise ProtocolError(f"{late[0]} delivered an incomplete vector")
        return self.total.view(np.int64)


@dataclass(frozen=True)
class SumOrder:
    """The leader's order to contribute to pairwise sum ``sum_no`` (a ContributeRequest)."""

    sum_no: int
    round: int
    phase: Phase
    layout_hash: bytes
    size: int
    instructions: int

    def __post_init__(self) -> None:
        if min(self.sum_no, self.round, self.size, self.instructions) < 0:
            raise ProtocolError("a sum order with a negative number")

    @property
    def label(self) -> str:
        return f"sum {self.sum_no} (round {self.round} {self.phase.name.lower()})"
