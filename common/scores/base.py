"""The interface of a utility score, and the registry that selects one by name.

A score is consulted on both sides of the round loop, in the spirit of Flower's ``Strategy``:

* every party counts the statistics the score lays out (:attr:`UtilityScore.split_classes`,
  :meth:`UtilityScore.split_cells`, :attr:`UtilityScore.child_classes`) with the engine's
  vectorised counting (``fedanon.tds.stats``), so a score never touches a record;
* the leader turns the summed vectors into split points (:meth:`UtilityScore.best_split`) and
  into the score of every candidate (:meth:`UtilityScore.on_counts`,
  :meth:`UtilityScore.on_specialized`), kept in a :class:`ScoreBook`.

Adding a score: one module with a class implementing :class:`UtilityScore`, plus one line --
an entry in :data:`BUILTIN` (``"name": "module:Class"``), ``register_score("name", Class)``
from the caller's own code (a test, a notebook), or an entry point in group ``fedanon.scores``
of an installed package (:mod:`fedanon.plugins`; what daemons use).  The spec selects it with
``[utility] score = "name"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from fedanon import plugins
from fedanon.arrays import IntArray

if TYPE_CHECKING:
    from fedanon.tds.blocks import BlockStore
    from fedanon.tds.counts import CountsView
    from fedanon.tds.state import Applied, SharedState


class ScoreBook:
    """The current score of every candidate value, per attribute (0 when never set)."""

    def __init__(self, m: int) -> None:
        self.by_attr: list[dict[int, float]] = [{} for _ in range(m)]

    def set(self, a: int, x: int, value: float) -> None:
        self.by_attr[a][x] = value

    def get(self, a: int, x: int) -> float:
        return float(self.by_attr[a].get(x, 0.0))

    def add(self, a: int, nodes: IntArray, amounts: IntArray) -> None:
        """scores[a][x] += the sum of ``amounts`` over the entries with node x (exact
        integer sums)."""
        if nodes.size == 0:
            return
        sums = np.zeros(int(nodes.max()) + 1, dtype=np.int64)  # node ids are small
        np.add.at(sums, nodes, amounts)
        hit = np.flatnonzero(sums)
        book = self.by_attr[a]
        for x, s in zip(hit.tolist(), sums[hit].tolist(), strict=True):
            book[x] = book.get(x, 0) + s


@runtime_checkable
class UtilityScore(Protocol):
    """What the round loop needs from a utility score.

    Statistics layout.  SPLIT phase, per pending numeric value with ``n_bins`` admissible
    bins and ``n_parts`` partitions on its link: :meth:`split_width` cells; a record of
    partition i in bin j counts into cell ``split_cells(...)[i, j]`` (plus its class code
    when :attr:`split_classes`).  COUNTS phase: the privacy model's per-partition child
    counts always; with :attr:`child_classes`, a children x classes block per new candidate
    value as well.
    """

    name: str
    needs_class: bool  # the spec must declare a class attribute
    split_classes: bool  # SPLIT cells are split further by class
    child_classes: bool  # COUNTS carries a children x classes block per new candidate

    def split_width(self, n_bins: int, n_parts: int, n_class: int) -> int:
        """Cells of one pending numeric value in the SPLIT vector."""
        ...

    def split_cells(self, n_bins: int, n_parts: int, n_class: int) -> IntArray:
        """(n_parts or 1, n_bins) cell of each (partition, bin), relative to the value's
        offset (broadcast over the partitions when it has one row)."""
        ...

    def best_split(self, cells: IntArray, n_bins: int, n_parts: int, n_class: int) -> int | None:
        """From the summed cells of one value: the first bin of the right child, or None
        when no admissible point separates the records."""
        ...

    def on_counts(self, view: CountsView, book: ScoreBook, store: BlockStore) -> None:
        """Score the candidates of the new partitions from the summed COUNTS vector
        (``store``: the leader's blocks of the alive partitions, with a per-partition,
        per-attribute payload a score may keep there)."""
        ...

    def on_specialized(
        self, state: SharedState, applied: Applied, book: ScoreBook, store: BlockStore
    ) -> None:
        """The partitions on ``applied.link`` were specialized away (called before their
        blocks are dropped from ``store``)."""
        ...


ScoreFactory = Callable[[], UtilityScore]

BUILTIN: dict[str, str] = {
    "infogain": "fedanon.scores.infogain:InfoGain",
    "discernibility": "fedanon.scores.discernibility:Discernibility",
    "max": "fedanon.scores.maxscore:Max",  # DiffGen's Max (also usable by an LKC run)
}
_REGISTRY: plugins.Registry[ScoreFactory] = plugins.Registry(
    plugins.SCORES, "utility score", BUILTIN
)
register_score = _REGISTRY.register  # [utility] score = name selects factory()
score_names = _REGISTRY.names
score_factory = _REGISTRY.factory
implementation = _REGISTRY.implementation  # what a run binds for a name not built in


def make_score(name: str) -> UtilityScore:
    return score_factory(name)()
