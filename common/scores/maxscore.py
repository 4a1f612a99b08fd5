"""Max (DiffGen's utility, Mohammed et al. 2011; the "max frequency" score): the sum over the
children c of v of the largest class count of T[c] -- the records that a majority-class guess
per child gets right.  Its sensitivity is 1, which is why DiffGen samples with it.

In a deterministic (LKC) run it is a utility score like InfoGain: T[v] is fixed while v is in
the cut, so each candidate is scored once from its children x classes counts, and numeric
split points maximize it over a bins x classes histogram.  Unlike InfoGain it is an absolute
count, not a gain: a value covering more records scores higher (Max(v) >= the majority count
of T[v]), which is the paper's choice for DiffGen and makes an LKC run favour the general
values first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fedanon.arrays import IntArray
from fedanon.scores.base import ScoreBook
from fedanon.scores.measures import best_split_max, max_of_children

if TYPE_CHECKING:
    from fedanon.tds.blocks import BlockStore
    from fedanon.tds.counts import CountsView
    from fedanon.tds.state import Applied, SharedState


class Max:
    name = "max"
    needs_class = True
    split_classes = True  # per bin a class histogram, summed over the partitions
    child_classes = True

    def split_width(self, n_bins: int, n_parts: int, n_class: int) -> int:
        return n_bins * n_class

    def split_cells(self, n_bins: int, n_parts: int, n_class: int) -> IntArray:
        return (np.arange(n_bins, dtype=np.int64) * n_class)[None, :]

    def best_split(self, cells: IntArray, n_bins: int, n_parts: int, n_class: int) -> int | None:
        return best_split_max(cells.reshape(n_bins, n_class))

    def on_counts(self, view: CountsView, book: ScoreBook, store: BlockStore) -> None:
        for ce in view.layout.classes:  # T[v] is fixed while v is in the cut: scored once
            book.set(ce.attr, ce.node, float(max_of_children(view.class_counts(ce))))

    def on_specialized(
        self, state: SharedState, applied: Applied, book: ScoreBook, store: BlockStore
    ) -> None:
        return None
