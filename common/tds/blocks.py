"""The leader's copy of the count blocks it still needs: those of the alive partitions.

Every COUNTS round sums one vector; a partition's block (totals by sensitive slot, then per
candidate attribute its child counts) is needed until the partition is specialized away --
for the children mask when it lies on Link_best, and for the final groups.  Each round's
vector is appended to one store, with a table row per partition (where its block is, where
its attribute blocks are, a per-attribute payload); when under half of the stored counts
or rows belong to alive partitions, the store is compacted, so memory follows the alive
partitions, not the history of the run (keeping every vector is what made a long run hold
gigabytes).  Every lookup is one vectorized gather, whatever round a partition came from.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from fedanon.arrays import Codes, IntArray, grown

COMPACT_BELOW = 2  # compact the store when under 1/2 of its counts or rows are alive
GROWTH = 1.25  # the store grows by a quarter at a time (it is the bulk of the memory)


def gather(
    starts: IntArray, ends: IntArray, small: bool = False
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Positions covered by the slices ``[starts[i], ends[i])``, and the slice of each; with
    ``small``, int32 arrays when they fit (half the memory traffic on hot paths)."""
    lens = (ends - starts).astype(np.int64)
    pos = positions(starts, ends, small, lens)
    which = np.repeat(np.arange(lens.size, dtype=pos.dtype), lens)
    return pos, which


def positions(
    starts: IntArray, ends: IntArray, small: bool = False, lens: IntArray | None = None
) -> npt.NDArray[Any]:
    """The positions of :func:`gather` alone."""
    if lens is None:
        lens = (ends - starts).astype(np.int64)
    total = int(lens.sum())
    fits = small and total < 1 << 31 and (not ends.size or int(ends.max()) < 1 << 31)
    dtype = np.int32 if fits else np.int64
    first = np.cumsum(lens) - lens
    pos: npt.NDArray[Any] = np.arange(total, dtype=dtype)
    pos += np.repeat((starts - first).astype(dtype), lens)
    return pos


def _room(arr: npt.NDArray[Any], n: int, fill: Any) -> npt.NDArray[Any]:
    """``arr`` when it has ``n`` rows; else a copy with ``max(n, GROWTH * rows)`` rows, the
    new ones ``fill`` (None: uninitialized).  Amortized O(1) per row, with a quarter of
    doubling's slack."""
    cap = arr.shape[0]
    if n <= cap:
        return arr
    shape = (max(n, int(cap * GROWTH)), *arr.shape[1:])
    out = np.empty(shape, dtype=arr.dtype) if fill is None else np.full(shape, fill, arr.dtype)
    out[:cap] = arr
    return out


class BlockStore:
    """Count blocks of the alive partitions.  Per partition ever created only a 4-byte key
    (its row in the table, -1: none) is kept; table rows and counts of dead partitions are
    reclaimed by compaction."""

    def __init__(self, m: int) -> None:
        self.m = m
        self.key = np.full(16, -1, dtype=np.int32)  # table row of each partition id, -1: none
        self._ids = np.zeros(16, dtype=np.int64)
        self._base = np.zeros(16, dtype=np.int64)  # block start in _vec
        self._blen = np.zeros(16, dtype=np.int64)
        self._off = np.full((16, m), -1, dtype=np.int32)  # attribute block start - base, -1
        self._payload = np.zeros((16, m), dtype=np.int64)
        self._live = np.zeros(16, dtype=bool)
        self._rows = 0  # table rows in use (alive or awaiting compaction)
        self._n_live = 0
        self._vec = np.zeros(16, dtype=np.int64)
        self._used = 0  # counts in use in _vec
        self._live_counts = 0  # counts in the blocks of live rows

    def add(
        self, ids: IntArray, vec: IntArray, base: IntArray, blen: IntArray, off: IntArray
    ) -> None:
        """The blocks of partitions ``ids`` in ``vec`` (block i at base[i], length blen[i];
        its attribute blocks at off[i, a], -1 when absent)."""
        if ids.size == 0:
            return
        self._reserve(int(ids.max()) + 1)
        self.drop(ids[self.key[ids] >= 0])  # stored again (a repeated round): replace
        n, r0, shift = int(ids.size), self._rows, self._used
        end = int((base + blen).max())
        self._grow(r0 + n, shift + end)
        rows = slice(r0, r0 + n)
        self._ids[rows] = ids
        self._base[rows] = base + shift
        self._blen[rows] = blen
        self._off[rows] = np.where(off >= 0, off - base[:, None], -1)
        self._payload[rows] = 0
        self._live[rows] = True
        self._vec[shift : shift + end] = vec[:end]
        self.key[ids] = np.arange(r0, r0 + n, dtype=np.int32)
        self._rows, self._used = r0 + n, shift + end
        self._n_live += n
        self._live_counts += int(blen.sum())

    def _grow(self, rows: int, counts: int) -> None:
        self._ids, self._base = _room(self._ids, rows, 0), _room(self._base, rows, 0)
        self._blen, self._off = _room(self._blen, rows, 0), _room(self._off, rows, -1)
        self._payload = _room(self._payload, rows, 0)
        self._live = _room(self._live, rows, False)
        self._vec = _room(self._vec, counts, None)

    def _row(self, ids: IntArray) -> Codes:
        if ids.size and int(ids.max()) >= self.key.size:
            raise KeyError("a partition without stored counts")
        r = self.key[ids]
        if ids.size and int(r.min()) < 0:
            raise KeyError("a partition without stored counts")
        return r

    def _starts(self, r: Codes, attr: int | None) -> IntArray:
        if attr is None:
            return self._base[r]
        rel = self._off[r, attr]
        return np.where(rel >= 0, self._base[r] + rel, -1)

    def starts(self, ids: IntArray, attr: int | None) -> IntArray:
        """Where each partition's totals (attr None) or attribute block starts in the
        store (-1: no block)."""
        return self._starts(self._row(ids), attr)

    def rows(self, ids: IntArray, attr: int | None, length: int) -> IntArray:
        """(len(ids), length) counts of each partition's totals or attribute block."""
        st = self._starts(self._row(ids), attr)
        if ids.size == 0 or length == 0:
            return np.zeros((ids.size, length), dtype=np.int64)
        # a row gather of windows: one index per block, not one per count (3-9x faster)
        out: IntArray = sliding_window_view(self._vec[: self._used], length)[st]
        return out

    def ragged(self, ids: IntArray, attr: int | None, lens: IntArray) -> IntArray:
        """The totals or attribute blocks of ``ids`` (lengths ``lens``), concatenated in the
        order of ``ids``."""
        st = self._starts(self._row(ids), attr)
        out: IntArray = self._vec[positions(st, st + lens)]
        return out

    def has(self, ids: IntArray, attrs: npt.NDArray[np.bool_] | None = None) -> bool:
        """Every partition is stored (and, with ``attrs`` (len(ids), m), has a block for
        every attribute marked)."""
        if ids.size and int(ids.max()) >= self.key.size:
            return False
        r = self.key[ids]
        if not bool((r >= 0).all()):
            return False
        return attrs is None or bool((self._off[r][attrs] >= 0).all())

    def totals(self, ids: IntArray, width: int) -> IntArray:
        return self.rows(ids, None, width)

    def block(self, ids: IntArray, attr: int, length: int) -> IntArray:
        return self.rows(ids, attr, length)

    def put(self, ids: IntArray, attr: int, values: IntArray) -> None:
        """Store a per-partition number for attribute ``attr`` (the payload)."""
        self._payload[self._row(ids), attr] = values

    def get(self, ids: IntArray) -> IntArray:
        """(len(ids), m) payload."""
        out: IntArray = self._payload[self._row(ids)]
        return out

    def drop(self, ids: IntArray) -> None:
        """Partitions ``ids`` are no longer alive."""
        ids = ids[ids < self.key.size]
        r = self.key[ids]
        r = r[r >= 0]
        if r.size == 0:
            return
        if r.size > 1 and not bool((np.diff(r) > 0).all()):
            r = np.unique(r)  # each row once (rows of ascending ids are ascending)
        r = r[self._live[r]]
        self._live[r] = False
        self.key[self._ids[r]] = -1
        self._n_live -= int(r.size)
        self._live_counts -= int(self._blen[r].sum())
        if self._n_live == 0:
            self._rows = self._used = 0
        elif (
            self._live_counts * COMPACT_BELOW < self._used
            or self._n_live * COMPACT_BELOW < self._rows
        ):
            self._compact()

    def _compact(self) -> None:
        keep = np.flatnonzero(self._live[: self._rows])
        base, blen = self._base[keep], self._blen[keep]
        pos = positions(base, base + blen)
        self._vec[: pos.size] = self._vec[pos]  # in place: the capacity stays for the next rounds
        n = int(keep.size)
        self._ids[:n] = self._ids[keep]
        self._base[:n] = np.cumsum(blen) - blen
        self._blen[:n] = blen
        self._off[:n] = self._off[keep]
        self._payload[:n] = self._payload[keep]
        self._live[:n] = True
        self._live[n : self._rows] = False
        self.key[self._ids[:n]] = np.arange(n, dtype=np.int32)
        self._rows, self._used = n, int(pos.size)

    def stored(self) -> int:
        """Number of counts held (for tests and memory accounting)."""
        return self._used

    def needed(self) -> int:
        """Number of counts in the blocks of the alive partitions (stored <= 4x this)."""
        return self._live_counts

    def _reserve(self, n: int) -> None:
        self.key = grown(self.key, n, -1)
