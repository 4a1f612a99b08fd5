"""Taxonomy Indexed PartitionS (Sec. 4.2) over a party's own rows.

Rows are kept in one permutation array in which every partition owns a contiguous slice
``order[start[p]:end[p]]``; specializing a partition reorders its slice so that each child
partition owns a sub-slice.  Only the rows of the partitions on Link_best are touched.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from common.errors import ProtocolError
from common.state import Applied, SharedState

IntArray = npt.NDArray[np.int64]


def gather(starts: IntArray, ends: IntArray) -> tuple[IntArray, IntArray]:
    """Positions covered by the slices, and the index of the slice of each position."""
    lens = ends - starts
    total = int(lens.sum())
    which = np.repeat(np.arange(lens.size, dtype=np.int64), lens)
    first = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)
    pos = np.arange(total, dtype=np.int64) - first[which] + starts[which]
    return pos, which


class Tips:
    def __init__(self, leaves: IntArray, n_rows: int) -> None:
        self.leaves = leaves  # (n_qids, n_rows) leaf codes
        self.order = np.arange(n_rows, dtype=np.int64)
        self.start = np.zeros(16, dtype=np.int64)
        self.end = np.zeros(16, dtype=np.int64)
        self.end[0] = n_rows

    def rows_of(self, parts: IntArray) -> tuple[IntArray, IntArray]:
        """Row ids of the given partitions and, per row, the index into ``parts``."""
        pos, which = gather(self.start[parts], self.end[parts])
        return self.order[pos], which

    def apply(self, applied: Applied, state: SharedState) -> None:
        link = applied.link
        pos, which = gather(self.start[link], self.end[link])
        rows = self.order[pos]
        b = applied.attr
        tree = state.trees[b]
        nodes = state.pvals[link[which], b]
        child = tree.child_of(nodes, self.leaves[b, rows])
        slot = tree.slot[child]
        k = int(tree.nchild[state.pvals[link[0], b]])
        key = which * k + slot
        srt = np.argsort(key, kind="stable")
        self.order[pos] = rows[srt]
        counts = np.bincount(key, minlength=link.size * k)
        # every locally non-empty child must exist globally
        new_key = applied.new_parent_pos * k + applied.new_slot
        covered = np.zeros(link.size * k, dtype=bool)
        covered[new_key] = True
        if np.any((counts > 0) & ~covered):
            raise ProtocolError("local rows fall into a child partition that is empty globally")
        # child sub-slices: within each parent slice, children in slot order
        parent_start = self.start[link]
        within = np.cumsum(counts.reshape(link.size, k), axis=1) - counts.reshape(link.size, k)
        starts = (
            parent_start[applied.new_parent_pos] + within[applied.new_parent_pos, applied.new_slot]
        )
        n_total = int(applied.new_ids[-1]) + 1 if applied.new_ids.size else 0
        self._reserve(n_total)
        self.start[applied.new_ids] = starts
        self.end[applied.new_ids] = starts + counts[new_key]

    def _reserve(self, n: int) -> None:
        cap = self.start.size
        if n <= cap:
            return
        new_cap = max(n, cap * 2)
        for name in ("start", "end"):
            arr = np.zeros(new_cap, dtype=np.int64)
            arr[:cap] = getattr(self, name)
            setattr(self, name, arr)

    def partition_of_rows(self, state: SharedState) -> IntArray:
        """Partition id of every row (for writing the released table)."""
        ids = state.alive_ids()
        rows, which = self.rows_of(ids)
        out = np.empty(self.order.size, dtype=np.int64)
        out[rows] = ids[which]
        return out
