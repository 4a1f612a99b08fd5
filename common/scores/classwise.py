"""Scores computed from class histograms: a candidate v is scored once, from the
children x classes counts of T[v] (T[v] is fixed while v is in the cut), and a numeric split
point is chosen from a bins x classes histogram summed over the partitions.  InfoGain and Max
are this shape with their own two functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from fedanon.arrays import IntArray
from fedanon.scores.base import ScoreBook

if TYPE_CHECKING:
    from fedanon.tds.blocks import BlockStore
    from fedanon.tds.counts import CountsView
    from fedanon.tds.state import Applied, SharedState


class ClassHistogramScore:
    """A :class:`fedanon.scores.base.UtilityScore` from two functions of class counts:
    ``child_score`` (children x classes -> score) and ``split_at`` (bins x classes -> the
    best split point, or None)."""

    name: str
    needs_class = True
    split_classes = True  # per bin a class histogram, summed over the partitions
    child_classes = True
    child_score: ClassVar[Callable[[IntArray], float]]
    split_at: ClassVar[Callable[[IntArray], int | None]]

    def split_width(self, n_bins: int, n_parts: int, n_class: int) -> int:
        return n_bins * n_class

    def split_cells(self, n_bins: int, n_parts: int, n_class: int) -> IntArray:
        return (np.arange(n_bins, dtype=np.int64) * n_class)[None, :]

    def best_split(self, cells: IntArray, n_bins: int, n_parts: int, n_class: int) -> int | None:
        return type(self).split_at(cells.reshape(n_bins, n_class))

    def on_counts(self, view: CountsView, book: ScoreBook, store: BlockStore) -> None:
        score = type(self).child_score
        for ce in view.layout.classes:  # T[v] is fixed while v is in the cut: scored once
            book.set(ce.attr, ce.node, float(score(view.class_counts(ce))))

    def on_specialized(
        self, state: SharedState, applied: Applied, book: ScoreBook, store: BlockStore
    ) -> None:
        return None
