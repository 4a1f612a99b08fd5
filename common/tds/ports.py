"""The ports of the engine: what the round loop consumes, as protocols it declares.

* :class:`PrivacyModel` -- which candidates are *allowed* (deterministic validity on the
  summed counts; LKC).  Optional: a run without one (DiffGen) refuses no candidate on its
  counts, its guarantee is its selector's and its releaser's;
* :class:`UtilityScore` -- the statistics layout the parties count, and the score of every
  candidate in a :class:`ScoreBook`;
* :class:`Selector` -- which allowed candidate is *taken* (and where a numeric interval
  splits): the argmax of the score by default (:class:`fedanon.tds.argmax.ArgmaxSelector`),
  the exponential mechanism in DiffGen (:class:`fedanon.dp.decider.ExponentialSelector`);
* :class:`CoalitionCheck` -- m-privacy: whether the candidate the selector takes survives
  every coalition of at most m providers (optional; only with ``[privacy] m > 0``);
* :class:`Releaser` -- what the run publishes, as far as the loop is concerned: which child
  partitions a specialization creates and which values can never be useful.  Records by
  default (:class:`fedanon.tds.records.RecordsReleaser`: only non-empty partitions), noisy
  counts in DiffGen (:class:`fedanon.dp.decider.NoisyCountReleaser`: every partition, empty
  or not).  A party's side of the release is :class:`fedanon.tds.party.PartyRelease`.

The engine builds a deterministic run's model and score by the names the spec gives
(:mod:`fedanon.model.registry`); it imports no concrete model, score, selector of a method,
or union.  Plug-ins implement them and register (:mod:`fedanon.privacy.base`,
:mod:`fedanon.scores.base`); a method composes its own parts
(:meth:`fedanon.tds.decide.Decider.composed`).

Several specializations per round (:mod:`fedanon.tds.chain`) are taken only where the rule is
proven: for a model class and a score class that both declare ``CHAIN_PROVEN = True`` in their
own class body (a subclass that changes the behaviour does not inherit it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import SpecError
from fedanon.model.registry import model_factory, score_factory
from fedanon.model.spec import RunSpec
from fedanon.tds.blocks import BlockStore
from fedanon.tds.counts import CountsView
from fedanon.tds.state import Applied, SharedState, SplitEntry, StatsLayout, Update

Candidate = tuple[int, int]  # (attribute, node): a value of the cut that may be specialized


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


@runtime_checkable
class Selector(Protocol):
    """Which candidate the leader takes, from what the statistics say about them.

    Per round the decider hands it the summed statistics (:meth:`split_point` per numeric
    interval that entered the cut; :meth:`observe` on the COUNTS vector), then the candidates
    the model allows, in attribute then value order (:meth:`select`).  It never sees a record.
    """

    chains: bool  # may take several specializations in one round (fedanon.tds.chain)

    def split_point(self, state: SharedState, entry: SplitEntry, cells: IntArray) -> int | None:
        """The first bin of the right child of ``entry``'s interval (from its summed SPLIT
        cells), or None: the interval is not split."""
        ...

    def observe(self, view: CountsView, store: BlockStore) -> None:
        """Read the scores of the new candidates from a COUNTS vector (``store``: the
        leader's blocks of the alive partitions; empty in a run without a privacy model)."""
        ...

    def select(
        self,
        state: SharedState,
        candidates: Sequence[Candidate],
        found: Sequence[set[Candidate]],
        several: bool = True,
    ) -> list[Candidate]:
        """This round's specializations in order (empty: the run ends; one unless
        ``several`` and :attr:`chains`).  ``found``: the candidates found invalid in each
        segment of the vector (chained rounds)."""
        ...

    def score(self, a: int, x: int) -> float:
        """The score of a taken candidate, as the run reports it."""
        ...

    def applied(
        self, state: SharedState, update: Update, applied: Applied | None, store: BlockStore
    ) -> None:
        """``update`` was applied to ``state`` (before the blocks of ``applied.link`` are
        dropped from ``store``)."""
        ...


@runtime_checkable
class Releaser(Protocol):
    """The leader's side of what a run publishes, as far as the round loop is concerned."""

    def useless(self, view: CountsView) -> list[Candidate]:
        """New candidate values that no specialization can make useful for this release
        (they are never specialized)."""
        ...

    def children_mask(self, state: SharedState, store: BlockStore, b: int, x: int) -> bytes:
        """Per partition on Link_x (ascending id) and child slot: 1 if that child partition
        is created by specializing (b, x)."""
        ...


@runtime_checkable
class CoalitionCheck(Protocol):
    """m-privacy (:mod:`fedanon.privacy.mprivacy`): whether the groups a candidate creates
    stay LKC-private once any coalition of at most m providers removes its own records.

    Asked only for the candidate the selector would take next (valid on the summed counts);
    a candidate that fails is excluded for good (m-privacy is monotone: a group that fails
    keeps a failing sub-group under every further specialization) and the selector is asked
    again.  Centralized: the provider column (:class:`fedanon.privacy.mprivacy.
    LocalCoalitionCheck`); federated: the hospitals' secret-shared counts, only pass/fail
    revealed."""

    def passes(self, candidate: Candidate) -> bool: ...

    def passes_root(self) -> bool:
        """Round 0: whether the fully generalized table (one group) is m-private; asked
        once, before any candidate, and not counted among the candidates checked."""
        ...


def make_model(spec: RunSpec) -> PrivacyModel:
    """The spec's privacy model, built from the registry; refused (exit 2) when the name
    registers no :class:`PrivacyModel` (a method that composes its own selector and
    releaser, such as DiffGen, is not run by the deterministic round loop)."""
    name = spec.privacy.model
    model = model_factory(name)(spec)
    if not isinstance(model, PrivacyModel):
        raise SpecError(
            f"model = {name!r} is not run by the LKC round loop: "
            f"{getattr(model, 'name', name)} decides nothing on exact counts (it composes its "
            "own selector and releaser with the engine: `fedanon anonymize`, fedanon.anonymize)",
            file=spec.source,
            value=name,
        )
    return model


def make_score(name: str) -> UtilityScore:
    score: UtilityScore = score_factory(name)()
    return score


def chain_proven(obj: object) -> bool:
    """Whether ``obj``'s own class declares the several-per-round rule proven for it."""
    return vars(type(obj)).get("CHAIN_PROVEN") is True
