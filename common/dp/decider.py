"""The leader's side of DiffGen (Algorithm 1 of the seed): a selector and a releaser for the
engine's round loop (:class:`fedanon.tds.decide.Decider` composed with them; no privacy
model: no candidate is ever refused on its counts).

Per round the engine sums the parties' statistics and hands them to the parts:

* SPLIT (:meth:`ExponentialSelector.split_point`): for every numeric interval that entered the
  cut, the exponential mechanism picks its split point among *all* admissible points inside
  it (``lo + k * step``, fixed by the spec, not by the data), scored by the utility of the two
  halves;
* COUNTS (:meth:`ExponentialSelector.observe` / :meth:`~ExponentialSelector.select`): the
  utility of every value that entered the cut is computed from its children x classes
  counts; then the exponential mechanism picks the specialization among *all* values of the
  cut that have children, until h specializations are done;
* every child partition is created, empty or not (:class:`NoisyCountReleaser`), and after
  the loop :meth:`NoisyCountReleaser.release` sums the count of every final group x class
  value and adds discrete Laplace noise to each.

The randomness is the leader's alone; with the same seed and the same summed statistics, a
federated run and a centralized run make identical draws.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from fedanon.arrays import IntArray
from fedanon.dp.bounds import CENTRALIZED, MAX_TABLE_ROWS, BoundAdvice, check_selection
from fedanon.dp.budget import Budget, Ledger
from fedanon.dp.mechanisms import discrete_laplace, exponential_mechanism
from fedanon.dp.party import DPState, final_layout
from fedanon.dp.randomness import RandomSource
from fedanon.dp.spec import DPSpec
from fedanon.dp.utility import Utility
from fedanon.errors import ProtocolError
from fedanon.model.tree import AttrTree
from fedanon.tds.blocks import BlockStore
from fedanon.tds.counts import CountsView
from fedanon.tds.decide import Decider
from fedanon.tds.engine import Federation
from fedanon.tds.ports import Candidate
from fedanon.tds.state import Applied, Phase, SharedState, SplitEntry, Update

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Selection:
    round: int
    attribute: str
    value: str
    children: tuple[str, ...]
    score: float
    candidates: int


@dataclass(frozen=True)
class SplitChoice:
    round: int
    attr: int
    node: int  # the interval; its two children are the halves
    score: float
    candidates: int


@dataclass(frozen=True)
class NoisyCounts:
    """The release: group values (node ids per predictor) and noisy counts per class."""

    nodes: IntArray  # (groups, predictors)
    counts: IntArray  # (groups, classes), negative noisy counts set to 0
    negatives_clamped: int  # how many noisy counts were negative (a DP output itself)


class ExponentialSelector:
    """The :class:`~fedanon.tds.ports.Selector` of DiffGen: every choice is an exponential
    mechanism of budget epsilon' on the integer utility of the candidates (``h``
    selections at most), each spend written to ``ledger``."""

    chains = False  # one mechanism call per selection

    def __init__(
        self,
        utility: Utility,
        ledger: Ledger,
        rng: RandomSource,
        m: int,
        max_table_rows: int = MAX_TABLE_ROWS,
        bound: BoundAdvice = CENTRALIZED,
    ) -> None:
        self.utility = utility
        self.bound = bound  # who holds max_table_rows, how to raise it, the spec file
        self.ledger = ledger
        self.budget = ledger.budget
        self.rng = rng
        self.max_table_rows = max_table_rows  # fedanon.dp.bounds: checked per selection
        self.values: list[dict[int, tuple[int, float]]] = [{} for _ in range(m)]
        self.selections: list[Selection] = []
        self.splits: list[SplitChoice] = []
        self._split_spent: set[tuple[int, int]] = set()  # (round, attribute) paid for

    @property
    def done(self) -> bool:
        return len(self.selections) >= self.budget.specializations

    def split_point(self, state: SharedState, entry: SplitEntry, cells: IntArray) -> int | None:
        if self.done:  # values of the last specialization: their split is never used
            return None
        if entry.n_bins < 2:  # no admissible point inside (a domain of one step): no draw
            return None
        eps = self.budget.epsilon_prime
        hist = cells.reshape(entry.n_bins, state.n_class)
        util, score = self.utility.of_splits(hist)
        i = exponential_mechanism(self.rng, util, eps, self.utility.sensitivity)
        self.splits.append(
            SplitChoice(state.round, entry.attr, entry.node, float(score[i]), int(util.size))
        )
        # intervals of one attribute hold disjoint records: one epsilon' per attribute
        if (state.round, entry.attr) not in self._split_spent:
            self._split_spent.add((state.round, entry.attr))
            self.ledger.spend("split", state.round, eps, state.trees[entry.attr].name)
        return 1 + i

    def observe(self, view: CountsView, store: BlockStore) -> None:
        for ce in view.layout.classes:
            self.values[ce.attr][ce.node] = self.utility.of_children(view.class_counts(ce))

    def select(
        self,
        state: SharedState,
        candidates: Sequence[Candidate],
        found: Sequence[set[Candidate]],
        several: bool = True,
    ) -> list[Candidate]:
        if self.done:
            return []
        if not candidates:
            log.info("no value left to specialize after %d selections", len(self.selections))
            return []
        missing = [(a, x) for a, x in candidates if x not in self.values[a]]
        if missing:
            raise ProtocolError(f"no statistics for candidate {missing[0]}")
        util = np.array([self.values[a][x][0] for a, x in candidates], dtype=np.int64)
        eps = self.budget.epsilon_prime
        i = exponential_mechanism(self.rng, util, eps, self.utility.sensitivity)
        b, x = candidates[i]
        bound = self.bound  # before anyone allocates it
        check_selection(state, b, x, self.max_table_rows, bound.who, bound.flag, bound.source)
        tree = state.trees[b]
        self.ledger.spend("selection", state.round, eps, f"{tree.name}: {tree.labels[x]}")
        children = tuple(tree.labels[c] for c in tree.children[x])
        self.selections.append(
            Selection(
                state.round, tree.name, tree.labels[x], children, self.score(b, x), len(candidates)
            )
        )
        return [(b, x)]

    def score(self, a: int, x: int) -> float:
        return self.values[a][x][1]

    def applied(
        self, state: SharedState, update: Update, applied: Applied | None, store: BlockStore
    ) -> None:
        return None


class NoisyCountReleaser:
    """The :class:`~fedanon.tds.ports.Releaser` of DiffGen: the count of every final group x
    class value plus discrete Laplace noise.  Every group of the cross product of the cut is
    released, empty or not, so a specialization creates every child partition (the layout
    of the release does not depend on the data) and no value is dropped for holding no
    record (that would tell which are empty)."""

    def __init__(self, ledger: Ledger, rng: RandomSource) -> None:
        self.ledger = ledger
        self.budget = ledger.budget
        self.rng = rng
        self.released: NoisyCounts | None = None
        self.noise_scale: Fraction | None = None  # the Laplace scale the release used

    def useless(self, view: CountsView) -> list[Candidate]:
        return []

    def children_mask(self, state: SharedState, store: BlockStore, b: int, x: int) -> bytes:
        ids = state.alive_ids()
        n_link = int(np.count_nonzero(state.pvals[ids, b] == x))
        return np.ones(n_link * len(state.trees[b].children[x]), dtype=np.uint8).tobytes()

    def release(self, state: SharedState, fed: Federation) -> NoisyCounts:
        """After the loop: one more sum (Phase.UNION with the DP layout of
        :func:`fedanon.dp.party.final_layout`), then the noise."""
        size, digest = final_layout(state)
        return self.noisy(state, fed.sum(Phase.UNION, state.round, size, digest))

    def noisy(self, state: SharedState, vec: IntArray) -> NoisyCounts:
        """Discrete Laplace(1 / epsilon_noise) noise on every final group x class count,
        including the groups no record falls into; negative noisy counts become 0
        (post-processing).  epsilon_noise = epsilon / 2 (scale 2 / epsilon), or with
        noise_budget = "rest" epsilon minus what the specializations spent."""
        if self.released is not None:
            raise ProtocolError("the noisy counts were already drawn")
        size, _ = final_layout(state)
        if vec.shape != (size,):
            raise ProtocolError(f"statistics vector has {vec.size} elements, layout needs {size}")
        ids = state.alive_ids()
        eps = self.budget.noise_epsilon_after(self.ledger.total())
        self.noise_scale = 1 / eps
        noise = discrete_laplace(self.rng, self.noise_scale, size)
        self.ledger.spend("noise", state.round, eps, f"{size} counts")
        noisy = vec + noise
        neg = int(np.count_nonzero(noisy < 0))
        counts = np.maximum(noisy, 0).reshape(ids.size, state.n_class)
        self.released = NoisyCounts(state.pvals[ids].copy(), counts, neg)
        return self.released


class DPDecider:
    """The leader's side of one DiffGen run: the engine's :class:`~fedanon.tds.decide.Decider`
    (:attr:`engine`, what the round loop drives) composed of the DP state's statistics
    layout, an :class:`ExponentialSelector` and a :class:`NoisyCountReleaser` that share one
    budget, one ledger and one source of randomness."""

    def __init__(
        self,
        spec: DPSpec,
        trees: list[AttrTree],
        n_class: int,
        rng: RandomSource,
        max_table_rows: int = MAX_TABLE_ROWS,
        bound: BoundAdvice = CENTRALIZED,
    ) -> None:
        self.dp = spec
        self.state = DPState(trees, n_class, 0, "infogain")
        self.rng = rng
        self.max_table_rows = max_table_rows
        self.utility = Utility(spec.params.score, n_class)
        self.budget = Budget(
            spec.params.epsilon,
            spec.params.specializations,
            len(spec.numeric),
            spec.params.noise_budget,
        )
        self.ledger = Ledger(self.budget)
        self.selector = ExponentialSelector(
            self.utility, self.ledger, rng, self.state.m, max_table_rows, bound
        )
        self.releaser = NoisyCountReleaser(self.ledger, rng)
        self.engine = Decider.composed(spec.run, self.state, self.selector, self.releaser)

    @property
    def selections(self) -> list[Selection]:
        return self.selector.selections

    @property
    def splits(self) -> list[SplitChoice]:
        return self.selector.splits

    @property
    def noise_scale(self) -> Fraction | None:
        return self.releaser.noise_scale

    @property
    def released(self) -> NoisyCounts | None:
        return self.releaser.released

    def release(self, vec: IntArray) -> NoisyCounts:
        """The noisy counts from the summed final counts ``vec`` (:func:`final_layout`)."""
        return self.releaser.noisy(self.state, vec)

    def cut(self) -> dict[str, list[str]]:
        """The final cut of every predictor, values in taxonomy / interval order."""
        st = self.state
        out: dict[str, list[str]] = {}
        for a, tree in enumerate(st.trees):
            nodes = sorted((int(x) for x in np.flatnonzero(st.in_cut[a])), key=tree.order_key)
            out[tree.name] = [tree.labels[x] for x in nodes]
        return out
