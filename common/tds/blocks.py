"""The leader's copy of the count blocks it still needs: those of the alive partitions.

Every COUNTS round sums one vector; a partition's block (totals by sensitive slot, then per
candidate attribute its child counts) is needed until the partition is specialized away --
for the children mask when it lies on Link_best, and for the final groups.  Vectors are kept
per round and dropped when none of their partitions is alive; a vector whose live part falls
under a quarter is compacted, so memory follows the alive partitions, not the history of the
run (keeping every vector is what made a long run hold gigabytes).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray, grown

COMPACT_BELOW = 4  # compact a round's vector when under 1/4 of its blocks are alive


def gather(
    starts: IntArray, ends: IntArray, small: bool = False
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Positions covered by the slices ``[starts[i], ends[i])``, and the slice of each; with
    ``small``, int32 arrays when they fit (half the memory traffic on hot paths)."""
    lens = (ends - starts).astype(np.int64)
    total = int(lens.sum())
    fits = small and total < 1 << 31 and (not ends.size or int(ends.max()) < 1 << 31)
    dtype = np.int32 if fits else np.int64
    which = np.repeat(np.arange(lens.size, dtype=dtype), lens)
    first = np.cumsum(lens) - lens
    pos: npt.NDArray[Any] = np.arange(total, dtype=dtype)
    pos += np.repeat((starts - first).astype(dtype), lens)
    return pos, which


class _Round:
    """One round's vector and, for the partitions it still holds (ascending ids), where
    their blocks are and a per-attribute payload (the discernibility reductions)."""

    def __init__(
        self, ids: IntArray, vec: IntArray, base: IntArray, blen: IntArray, off: IntArray
    ) -> None:
        order = np.argsort(ids, kind="stable")
        self.ids = ids[order]
        self.vec = vec
        self.base = base[order]
        self.blen = blen[order]
        self.off = off[order]
        self.payload = np.zeros(off.shape, dtype=np.int64)
        self.live = np.ones(ids.size, dtype=bool)
        self.n_live = int(ids.size)

    def at(self, ids: IntArray) -> IntArray:
        return np.searchsorted(self.ids, ids)

    def compact(self) -> None:
        keep = np.flatnonzero(self.live)
        pos, _ = gather(self.base[keep], self.base[keep] + self.blen[keep])
        self.vec = self.vec[pos]
        new_base = np.cumsum(self.blen[keep]) - self.blen[keep]
        shift = new_base - self.base[keep]
        off = self.off[keep]
        self.off = np.where(off >= 0, off + shift[:, None], -1)
        self.base = new_base
        self.ids, self.blen = self.ids[keep], self.blen[keep]
        self.payload = self.payload[keep]
        self.live = np.ones(keep.size, dtype=bool)


class BlockStore:
    """Count blocks of the alive partitions, by the round vector that holds them.  Per
    partition ever created only a 4-byte round key is kept; everything else lives with the
    round and shrinks as its partitions die."""

    def __init__(self, m: int) -> None:
        self.m = m
        self._rounds: dict[int, _Round] = {}
        self._next = 0
        self.key = np.full(16, -1, dtype=np.int32)  # round of each partition id, -1: none

    def add(
        self, ids: IntArray, vec: IntArray, base: IntArray, blen: IntArray, off: IntArray
    ) -> None:
        """The blocks of partitions ``ids`` in ``vec`` (block i at base[i], length blen[i];
        its attribute blocks at off[i, a], -1 when absent)."""
        if ids.size == 0:
            return
        self._reserve(int(ids.max()) + 1)
        self.drop(ids[self.key[ids] >= 0])  # stored again (a repeated round): replace
        k = self._next
        self._next += 1
        end = int((base + blen).max())
        self._rounds[k] = _Round(ids.astype(np.int64), np.array(vec[:end], dtype=np.int64),
                                 base.astype(np.int64), blen.astype(np.int64),
                                 off.astype(np.int64))  # fmt: skip
        self.key[ids] = k

    def _groups(self, ids: IntArray) -> list[tuple[_Round, IntArray, IntArray]]:
        """(round, positions in ids, positions in the round) for every round among ids."""
        if ids.size and int(ids.max()) >= self.key.size:
            raise KeyError("a partition without stored counts")
        keys = self.key[ids]
        if (keys < 0).any():
            raise KeyError("a partition without stored counts")
        out = []
        for k in np.unique(keys).tolist():
            sel = np.flatnonzero(keys == k)
            rnd = self._rounds[k]
            out.append((rnd, sel, rnd.at(ids[sel])))
        return out

    def starts(self, ids: IntArray, attr: int | None) -> IntArray:
        """Where each partition's totals (attr None) or attribute block starts in its
        round's vector (-1: no block)."""
        out = np.empty(ids.size, dtype=np.int64)
        for rnd, sel, at in self._groups(ids):
            out[sel] = rnd.base[at] if attr is None else rnd.off[at, attr]
        return out

    def rows(self, ids: IntArray, attr: int | None, length: int) -> IntArray:
        """(len(ids), length) counts of each partition's totals or attribute block."""
        out = np.zeros((ids.size, length), dtype=np.int64)
        span = np.arange(length, dtype=np.int64)
        for rnd, sel, at in self._groups(ids):
            st = rnd.base[at] if attr is None else rnd.off[at, attr]
            out[sel] = rnd.vec[st[:, None] + span]
        return out

    def ragged(self, ids: IntArray, attr: int | None, lens: IntArray) -> IntArray:
        """The totals or attribute blocks of ``ids`` (lengths ``lens``), concatenated in the
        order of ``ids``."""
        out = np.zeros(int(lens.sum()), dtype=np.int64)
        rstart = np.cumsum(lens) - lens
        for rnd, sel, at in self._groups(ids):
            st = rnd.base[at] if attr is None else rnd.off[at, attr]
            src, _ = gather(st, st + lens[sel])
            dst, _ = gather(rstart[sel], rstart[sel] + lens[sel])
            out[dst] = rnd.vec[src]
        return out

    def has(self, ids: IntArray, attrs: npt.NDArray[np.bool_] | None = None) -> bool:
        """Every partition is stored (and, with ``attrs`` (len(ids), m), has a block for
        every attribute marked)."""
        if ids.size and int(ids.max()) >= self.key.size:
            return False
        if not bool((self.key[ids] >= 0).all()):
            return False
        if attrs is None:
            return True
        return all(bool((r.off[at][attrs[sel]] >= 0).all()) for r, sel, at in self._groups(ids))

    def totals(self, ids: IntArray, width: int) -> IntArray:
        return self.rows(ids, None, width)

    def block(self, ids: IntArray, attr: int, length: int) -> IntArray:
        return self.rows(ids, attr, length)

    def put(self, ids: IntArray, attr: int, values: IntArray) -> None:
        """Store a per-partition number for attribute ``attr`` (the payload)."""
        for rnd, sel, at in self._groups(ids):
            rnd.payload[at, attr] = values[sel]

    def get(self, ids: IntArray) -> IntArray:
        """(len(ids), m) payload."""
        out = np.zeros((ids.size, self.m), dtype=np.int64)
        for rnd, sel, at in self._groups(ids):
            out[sel] = rnd.payload[at]
        return out

    def drop(self, ids: IntArray) -> None:
        """Partitions ``ids`` are no longer alive."""
        ids = ids[ids < self.key.size]
        ids = ids[self.key[ids] >= 0]
        if ids.size == 0:
            return
        for rnd, _, at in self._groups(ids):
            rnd.live[at] = False
            rnd.n_live = int(rnd.live.sum())
        keys = np.unique(self.key[ids]).tolist()
        self.key[ids] = -1
        for k in keys:
            rnd = self._rounds[k]
            if rnd.n_live == 0:
                del self._rounds[k]
            elif rnd.n_live * COMPACT_BELOW < rnd.ids.size:
                rnd.compact()

    def stored(self) -> int:
        """Number of counts held (for tests and memory accounting)."""
        return sum(int(r.vec.size) for r in self._rounds.values())

    def needed(self) -> int:
        """Number of counts in the blocks of the alive partitions (stored <= 4x this)."""
        return sum(int(r.blen[r.live].sum()) for r in self._rounds.values())

    def _reserve(self, n: int) -> None:
        self.key = grown(self.key, n, -1)
