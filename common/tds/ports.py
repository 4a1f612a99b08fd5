"""The ports of the engine: what the round loop consumes from a privacy model and a utility score.

The engine (:mod:`fedanon.tds`) declares these protocols and builds a run's model and score by
the names the spec gives (:mod:`fedanon.model.registry`); it imports no concrete model or score.
Plug-ins implement them and register (:mod:`fedanon.privacy.base`, :mod:`fedanon.scores.base`).

Several specializations per round (:mod:`fedanon.tds.chain`) are taken only where the rule is
proven: for a model class and a score class that both declare ``CHAIN_PROVEN = True`` in their
own class body (a subclass that changes the behaviour does not inherit it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from fedanon.arrays import IntArray
from fedanon.model.registry import model_factory, score_factory
from fedanon.model.spec import RunSpec
from fedanon.tds.blocks import BlockStore
from fedanon.tds.counts import CountsView
from fedanon.tds.state import Applied, SharedState, StatsLayout


@dataclass(frozen=True)
class GroupSummary:
    """The final partitions judged by the model (exact comparisons)."""

    min_group_size: int
    max_confidence: float  # the largest share of a sensitive value in a group (0: none)
    violating_groups: int


@runtime_checkable
class PrivacyModel(Protocol):
    """What the round loop needs from a privacy model."""

    name: str  # shown in messages ("LKC-privacy")
    width: int  # COUNTS cells per count: the records, then width - 1 sensitive values

    def check_root(self, totals: IntArray) -> None:
        """Round 0: ``totals`` (width,) of the whole table.  Raise PrivacyError when even the
        fully generalized table violates the model (or SpecError for an unusable spec)."""
        ...

    def invalid(self, view: CountsView) -> list[tuple[int, int]]:
        """The (attribute, value) candidates among the new partitions whose specialization
        would violate the model (they are never specialized)."""
        ...

    def final_groups(self, vals: IntArray, totals: IntArray, active: set[int]) -> GroupSummary:
        """Recount the final partitions (values ``vals`` (n, m), ``totals`` (n, width);
        ``active``: attributes no longer at their root): the final check before release."""
        ...

    def summary(self, groups: GroupSummary) -> dict[str, object]:
        """The model's part of the run report (inserted between ``groups`` and ``DR``)."""
        ...


ModelFactory = Callable[[RunSpec], PrivacyModel]


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
class UtilityScore(StatsLayout, Protocol):
    """What the round loop needs from a utility score: the layout of the statistics the
    parties count for it (:class:`~fedanon.tds.state.StatsLayout`), and on the leader:

    :meth:`best_split` turns the summed SPLIT cells of a numeric value into its split point;
    :meth:`on_counts` / :meth:`on_specialized` keep the score of every candidate in a
    :class:`ScoreBook`.
    """

    needs_class: bool  # the spec must declare a class attribute

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


def make_model(spec: RunSpec) -> PrivacyModel:
    model: PrivacyModel = model_factory(spec.privacy.model)(spec)
    return model


def make_score(name: str) -> UtilityScore:
    score: UtilityScore = score_factory(name)()
    return score


def chain_proven(obj: object) -> bool:
    """Whether ``obj``'s own class declares the several-per-round rule proven for it."""
    return vars(type(obj)).get("CHAIN_PROVEN") is True
