"""Discernibility (Sec. 3.2, Eq. 4) read as the *reduction* of the discernibility cost
sum |T[qid]|^2 that specializing v achieves over the partitions on Link_v:
sum_p |p|^2 - sum_p sum_c |p_c|^2 (see :mod:`fedanon.tds.measures`).

The score of v is a sum over the alive partitions holding v, so the leader keeps every
partition's contribution (in the block store's payload) and subtracts it when the partition
is specialized away.  It needs no class attribute and no extra COUNTS cells: the child sizes
come from the privacy model's per-partition child counts.  Numeric split points minimize
sum_p |left_p|^2 + |right_p|^2 over a partitions x bins histogram.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fedanon.arrays import IntArray
from fedanon.scores.base import ScoreBook
from fedanon.tds.measures import best_split_discernibility

if TYPE_CHECKING:
    from fedanon.tds.blocks import BlockStore
    from fedanon.tds.counts import CountsView
    from fedanon.tds.state import Applied, SharedState


def reductions(child: IntArray, first: IntArray) -> IntArray:
    """|p|^2 - sum_c |p_c|^2 for every partition p whose children's sizes are the run
    ``child[first[i]:first[i + 1]]``."""
    sizes = np.add.reduceat(child, first)
    return np.asarray(sizes * sizes - np.add.reduceat(child * child, first), dtype=np.int64)


class Discernibility:
    name = "discernibility"
    needs_class = False
    split_classes = False  # per partition on the link a histogram over the bins
    child_classes = False

    def split_width(self, n_bins: int, n_parts: int, n_class: int) -> int:
        return n_bins * n_parts

    def split_cells(self, n_bins: int, n_parts: int, n_class: int) -> IntArray:
        pos = np.arange(n_parts, dtype=np.int64)[:, None]
        return pos * n_bins + np.arange(n_bins, dtype=np.int64)

    def best_split(self, cells: IntArray, n_bins: int, n_parts: int, n_class: int) -> int | None:
        return best_split_discernibility(cells.reshape(n_parts, n_bins))

    def on_counts(self, view: CountsView, book: ScoreBook, store: BlockStore) -> None:
        new = view.state.new_parts
        for a in range(view.state.m):
            sel, block, _, counts = view.child_counts(a)
            if sel.size == 0:
                continue
            first = np.flatnonzero(np.r_[True, block[1:] != block[:-1]])  # blocks are runs
            red = reductions(counts.sum(axis=1), first)
            store.put(new[sel], a, red)
            book.add(a, view.new_vals[sel, a], red)

    def on_specialized(
        self, state: SharedState, applied: Applied, book: ScoreBook, store: BlockStore
    ) -> None:
        contrib = store.get(applied.link)
        for a in range(state.m):
            book.add(a, state.pvals[applied.link, a], -contrib[:, a])
