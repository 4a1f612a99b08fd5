"""InfoGain (Sec. 3.2, Eq. 2-3): the information about the class gained by specializing v,
from the children x classes counts of T[v]; numeric split points maximize it over a
bins x classes histogram."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fedanon.arrays import IntArray
from fedanon.scores.base import ScoreBook
from fedanon.scores.measures import best_split_infogain, info_gain

if TYPE_CHECKING:
    from fedanon.tds.blocks import BlockStore
    from fedanon.tds.counts import CountsView
    from fedanon.tds.state import Applied, SharedState


class InfoGain:
    name = "infogain"
    needs_class = True
    split_classes = True  # per bin a class histogram, summed over the partitions
    child_classes = True

    def split_width(self, n_bins: int, n_parts: int, n_class: int) -> int:
        return n_bins * n_class

    def split_cells(self, n_bins: int, n_parts: int, n_class: int) -> IntArray:
        return (np.arange(n_bins, dtype=np.int64) * n_class)[None, :]

    def best_split(self, cells: IntArray, n_bins: int, n_parts: int, n_class: int) -> int | None:
        return best_split_infogain(cells.reshape(n_bins, n_class))

    def on_counts(self, view: CountsView, book: ScoreBook, store: BlockStore) -> None:
        for ce in view.layout.classes:  # T[v] is fixed while v is in the cut: scored once
            book.set(ce.attr, ce.node, info_gain(view.class_counts(ce)))

    def on_specialized(
        self, state: SharedState, applied: Applied, book: ScoreBook, store: BlockStore
    ) -> None:
        return None
