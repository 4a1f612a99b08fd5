"""The leader's copy of the count blocks it still needs: those of the alive partitions.

Every COUNTS round sums one vector; a partition's block (totals by sensitive slot, then per
candidate attribute its child counts) is needed until the partition is specialized away --
for the children mask when it lies on Link_best, and for the final groups.  Vectors are kept
per round and dropped when none of their partitions is alive; a vector whose live part falls
under a quarter is compacted, so memory follows the alive partitions, not the history of the
run (keeping every vector is what made a long run hold gigabytes).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
COMPACT_BELOW = 4  # compact a round's vector when under 1/4 of its blocks are alive


def gather(starts: IntArray, ends: IntArray) -> tuple[IntArray, IntArray]:
    """Positions covered by the slices ``[starts[i], ends[i])``, and the slice of each."""
    lens = (ends - starts).astype(np.int64)
    total = int(lens.sum())
    which = np.repeat(np.arange(lens.size, dtype=np.int64), lens)
    first = np.cumsum(lens) - lens
    pos = np.arange(total, dtype=np.int64)
    pos += np.repeat(starts - first, lens)
    return pos, which


class BlockStore:
    def __init__(self, m: int) -> None:
        self._vecs: dict[int, IntArray] = {}
        self._live: dict[int, int] = {}
        self._held: dict[int, int] = {}  # partitions whose blocks the vector holds
        self._next = 0
        self.key = np.full(16, -1, dtype=np.int64)  # round vector of each partition id
        self.base = np.zeros(16, dtype=np.int64)
        self.blen = np.zeros(16, dtype=np.int64)
        self.off = np.full((16, m), -1, dtype=np.int64)

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
        self._reserve(int(ids.max()) + 1)
        end = int((base + blen).max())
        self._vecs[k] = np.array(vec[:end], dtype=np.int64)
        self._live[k] = self._held[k] = int(ids.size)
        self.key[ids] = k
        self.base[ids] = base
        self.blen[ids] = blen
        self.off[ids] = off

    def rows(self, ids: IntArray, starts: IntArray, length: int) -> IntArray:
        """(len(ids), length) counts starting at ``starts[i]`` in the vector of ``ids[i]``."""
        out = np.zeros((ids.size, length), dtype=np.int64)
        keys = self.key[ids]
        if (keys < 0).any():
            raise KeyError("a partition without stored counts")
        span = np.arange(length, dtype=np.int64)
        for k in np.unique(keys).tolist():
            sel = keys == k
            out[sel] = self._vecs[k][starts[sel][:, None] + span]
        return out

    def ragged(self, ids: IntArray, starts: IntArray, lens: IntArray) -> IntArray:
        """The counts ``[starts[i], starts[i] + lens[i])`` of each ``ids[i]``'s vector,
        concatenated in the order of ``ids``."""
        keys = self.key[ids]
        if (keys < 0).any():
            raise KeyError("a partition without stored counts")
        out = np.zeros(int(lens.sum()), dtype=np.int64)
        rstart = np.cumsum(lens) - lens
        for k in np.unique(keys).tolist():
            sel = keys == k
            src, _ = gather(starts[sel], starts[sel] + lens[sel])
            dst, _ = gather(rstart[sel], rstart[sel] + lens[sel])
            out[dst] = self._vecs[k][src]
        return out

    def has(self, ids: IntArray) -> bool:
        if ids.size and int(ids.max()) >= self.key.size:
            return False
        return bool((self.key[ids] >= 0).all())

    def totals(self, ids: IntArray, width: int) -> IntArray:
        return self.rows(ids, self.base[ids], width)

    def block(self, ids: IntArray, attr: int, length: int) -> IntArray:
        return self.rows(ids, self.off[ids, attr], length)

    def drop(self, ids: IntArray) -> None:
        """Partitions ``ids`` are no longer alive."""
        ids = ids[ids < self.key.size]
        keys = self.key[ids]
        keys = keys[keys >= 0]
        self.key[ids] = -1
        uniq, counts = np.unique(keys, return_counts=True)
        for k, c in zip(uniq.tolist(), counts.tolist(), strict=True):
            self._live[k] -= c
            if self._live[k] == 0:
                del self._vecs[k], self._live[k], self._held[k]
            elif self._live[k] * COMPACT_BELOW < self._held[k]:
                self._compact(k)

    def _compact(self, k: int) -> None:
        ids = np.flatnonzero(self.key == k).astype(np.int64)
        pos, _ = gather(self.base[ids], self.base[ids] + self.blen[ids])
        self._vecs[k] = self._vecs[k][pos]
        new_base = np.cumsum(self.blen[ids]) - self.blen[ids]
        shift = new_base - self.base[ids]
        off = self.off[ids]
        self.off[ids] = np.where(off >= 0, off + shift[:, None], -1)
        self.base[ids] = new_base
        self._held[k] = int(ids.size)

    def stored(self) -> int:
        """Number of counts held (for tests and memory accounting)."""
        return sum(int(v.size) for v in self._vecs.values())

    def _reserve(self, n: int) -> None:
        cap = self.key.size
        if n <= cap:
            return
        new_cap = max(n, cap * 2)
        for name, fill in (("key", -1), ("base", 0), ("blen", 0)):
            arr = np.full(new_cap, fill, dtype=np.int64)
            arr[:cap] = getattr(self, name)
            setattr(self, name, arr)
        off = np.full((new_cap, self.off.shape[1]), -1, dtype=np.int64)
        off[:cap] = self.off
        self.off = off
