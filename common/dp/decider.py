"""The leader's side of DiffGen (Algorithm 1 of the seed), driven by the engine's round loop.

Per round the engine sums the parties' statistics and hands them here:

* SPLIT: for every numeric interval that entered the cut, the exponential mechanism picks its
  split point among *all* admissible points inside it (``lo + k * step``, fixed by the spec,
  not by the data), scored by the utility of the two halves;
* COUNTS: the utility of every value that entered the cut is computed from its children x
  classes counts; then the exponential mechanism picks the specialization among *all* values
  of the cut that have children (no validity check: DiffGen needs none), until h
  specializations are done.  Every child partition is created, empty or not.

After the loop, :meth:`DPDecider.release` adds discrete Laplace noise to the count of every
final group x class value.  The randomness is the leader's alone; with the same seed and the
same summed statistics, a federated run and a centralized run make identical draws.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from fedanon.arrays import IntArray
from fedanon.dp.bounds import MAX_TABLE_ROWS, check_selection
from fedanon.dp.budget import Budget, Ledger
from fedanon.dp.mechanisms import discrete_laplace, exponential_mechanism
from fedanon.dp.party import DPState, final_layout
from fedanon.dp.randomness import RandomSource
from fedanon.dp.spec import DPSpec
from fedanon.dp.utility import Utility
from fedanon.errors import ProtocolError
from fedanon.model.tree import NO_SPLIT, AttrTree
from fedanon.tds.decide import Decider, Specialization
from fedanon.tds.state import Update

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


class DPDecider(Decider):
    def __init__(
        self,
        spec: DPSpec,
        trees: list[AttrTree],
        n_class: int,
        rng: RandomSource,
        max_table_rows: int = MAX_TABLE_ROWS,
    ) -> None:
        super().__init__(spec.run, trees, n_class)
        self.dp = spec
        self.state: DPState = DPState(trees, n_class, 0, "infogain")
        self.rng = rng
        self.max_table_rows = max_table_rows  # fedanon.dp.bounds: checked per selection
        self.utility = Utility(spec.params.score, n_class)
        self.budget = Budget(
            spec.params.epsilon,
            spec.params.specializations,
            len(spec.numeric),
            spec.params.noise_budget,
        )
        self.ledger = Ledger(self.budget)
        self.values: list[dict[int, tuple[int, float]]] = [{} for _ in trees]
        self.selections: list[Selection] = []
        self.splits: list[SplitChoice] = []
        self.released: NoisyCounts | None = None
        self.noise_scale: Fraction | None = None  # the Laplace scale the release used

    @property
    def done(self) -> bool:
        return len(self.selections) >= self.dp.params.specializations

    # phase SPLIT ---------------------------------------------------------------------------
    def on_split(self, vec: IntArray) -> Update:
        st = self.state
        layout = st.split_layout()
        self._check_size(vec, layout.size)
        eps = self.budget.epsilon_prime
        out = []
        attrs: list[int] = []
        for e in layout.entries:
            if self.done:  # values of the last specialization: their split is never used
                out.append((e.attr, e.node, NO_SPLIT))
                continue
            hist = vec[e.offset : e.offset + e.n_bins * st.n_class].reshape(e.n_bins, st.n_class)
            util, score = self.utility.of_splits(hist)
            i = exponential_mechanism(self.rng, util, eps, self.utility.sensitivity)
            at = st.trees[e.attr].leaf_lo[e.node] + 1 + i
            out.append((e.attr, e.node, at))
            self.splits.append(
                SplitChoice(st.round, e.attr, e.node, float(score[i]), int(util.size))
            )
            if e.attr not in attrs:
                attrs.append(e.attr)
        # intervals of one attribute hold disjoint records: one epsilon' per attribute
        for a in attrs:
            self.ledger.spend("split", st.round, eps, st.trees[a].name)
        return Update(round=st.round, splits=tuple(out))

    # phase COUNTS --------------------------------------------------------------------------
    def on_counts(self, vec: IntArray) -> Update:
        st = self.state
        layout = st.count_layout()
        self._check_size(vec, layout.size)
        for ce in layout.classes:
            mat = vec[ce.offset : ce.offset + ce.n_child * st.n_class]
            self.values[ce.attr][ce.node] = self.utility.of_children(
                mat.reshape(ce.n_child, st.n_class)
            )
        if self.done:
            return Update(round=st.round, end=True)
        cands = [(a, int(x)) for a in range(st.m) for x in np.flatnonzero(st.candidate_mask(a))]
        if not cands:
            log.info("no value left to specialize after %d selections", len(self.selections))
            return Update(round=st.round, end=True)
        missing = [(a, x) for a, x in cands if x not in self.values[a]]
        if missing:
            raise ProtocolError(f"no statistics for candidate {missing[0]}")
        util = np.array([self.values[a][x][0] for a, x in cands], dtype=np.int64)
        eps = self.budget.epsilon_prime
        i = exponential_mechanism(self.rng, util, eps, self.utility.sensitivity)
        b, x = cands[i]
        check_selection(st, b, x, self.max_table_rows)  # before anyone allocates it
        tree = st.trees[b]
        self.ledger.spend("selection", st.round, eps, f"{tree.name}: {tree.labels[x]}")
        score = self.values[b][x][1]
        children = tuple(tree.labels[c] for c in tree.children[x])
        self.selections.append(
            Selection(st.round, tree.name, tree.labels[x], children, score, len(cands))
        )
        self.history.append(Specialization(tree.name, tree.labels[x], children, score))
        ids = st.alive_ids()
        n_link = int(np.count_nonzero(st.pvals[ids, b] == x))
        mask = np.ones(n_link * len(children), dtype=np.uint8).tobytes()
        return Update(round=st.round, best=(b, x), children_mask=mask)

    def apply(self, update: Update) -> None:
        self.state.apply(update)

    # the release ---------------------------------------------------------------------------
    def release(self, vec: IntArray) -> NoisyCounts:
        """Discrete Laplace(1 / epsilon_noise) noise on every final group x class count,
        including the groups no record falls into; negative noisy counts become 0
        (post-processing).  epsilon_noise = epsilon / 2 (scale 2 / epsilon), or with
        noise_budget = "rest" epsilon minus what the specializations spent."""
        if self.released is not None:
            raise ProtocolError("the noisy counts were already drawn")
        st = self.state
        size, _ = final_layout(st)
        self._check_size(vec, size)
        ids = st.alive_ids()
        eps = self.budget.noise_epsilon_after(self.ledger.total())
        self.noise_scale = 1 / eps
        noise = discrete_laplace(self.rng, self.noise_scale, size)
        self.ledger.spend("noise", st.round, eps, f"{size} counts")
        noisy = vec + noise
        neg = int(np.count_nonzero(noisy < 0))
        counts = np.maximum(noisy, 0).reshape(ids.size, st.n_class)
        self.released = NoisyCounts(st.pvals[ids].copy(), counts, neg)
        return self.released

    def cut(self) -> dict[str, list[str]]:
        """The final cut of every predictor, values in taxonomy / interval order."""
        st = self.state
        out: dict[str, list[str]] = {}
        for a, tree in enumerate(st.trees):
            nodes = sorted((int(x) for x in np.flatnonzero(st.in_cut[a])), key=tree.order_key)
            out[tree.name] = [tree.labels[x] for x in nodes]
        return out
