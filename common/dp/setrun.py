"""The leader's side of DiffGen with a set-valued predictor, and the centralized run
(docs/dp-diagnosis-codes.md).

Per round, over any :class:`fedanon.tds.engine.Federation` (a plain in-process sum, or the
secure sum over hospital daemons):

1. SPLIT (while selections remain): for every numeric interval of the cut not yet split, the
   exponential mechanism picks its split point among all grid points (epsilon' per attribute
   and round); the choices are broadcast;
2. COUNTS: the utility of every candidate (relational and set-valued, one exponential
   mechanism, epsilon'); for a set-valued selection v the emptiness test: discrete Laplace
   noise of scale 1 / epsilon' on every candidate cell (partition on Link_v x combination),
   kept iff noisy count >= that scale (epsilon' for the test); the selection and the mask of
   kept combinations are broadcast;
3. after h selections (or when no candidate is left): UNION, the kept partitions x classes,
   plus discrete Laplace noise with what is left of epsilon.

The randomness is the leader's alone: with the same seed and the same sums a federated run
and a centralized run draw the same values.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from fedanon.arrays import IntArray
from fedanon.dp.bounds import MAX_TABLE_ROWS, TABLE_FLAG
from fedanon.dp.budget import Budget, Ledger
from fedanon.dp.decider import Selection
from fedanon.dp.mechanisms import discrete_laplace, exponential_mechanism
from fedanon.dp.randomness import RandomSource
from fedanon.dp.setparty import SetParty, SetRecords
from fedanon.dp.setstate import Layout, SetState
from fedanon.dp.settree import SetTree
from fedanon.dp.spec import DPSpec
from fedanon.dp.utility import Utility
from fedanon.errors import InputError, ProtocolError
from fedanon.model.tree import AttrTree
from fedanon.tds.engine import Federation, LocalFederation
from fedanon.tds.state import Update


@dataclass(frozen=True)
class SetSelection(Selection):
    """A selection of the set-valued run, with its emptiness test."""

    tested: int = 0  # emptiness test: candidate cells
    kept: int = 0  # ... and those kept


@dataclass(frozen=True)
class SetRelease:
    """The kept partitions (ids, ascending) and their noisy counts per class."""

    partitions: IntArray
    counts: IntArray  # (partitions, classes), negative noisy counts set to 0
    negatives_clamped: int


@dataclass
class SetLeader:
    spec: DPSpec
    state: SetState
    rng: RandomSource
    max_table_rows: int = MAX_TABLE_ROWS
    budget: Budget = field(init=False)
    ledger: Ledger = field(init=False)
    utility: Utility = field(init=False)
    selections: list[SetSelection] = field(default_factory=list)
    splits: list[tuple[int, str, str, float, int]] = field(default_factory=list)
    released: SetRelease | None = None
    noise_scale: Fraction | None = None

    def __post_init__(self) -> None:
        p = self.spec.params
        h = p.specializations
        # the noise takes the rest, so that the ledger adds up to epsilon exactly
        self.budget = Budget(p.epsilon, h, len(self.spec.numeric), "rest", emptiness_tests=h)
        self.ledger = Ledger(self.budget)
        self.utility = Utility(p.score, self.state.n_class)

    @property
    def eps1(self) -> Fraction:
        return self.budget.epsilon_prime

    @property
    def done(self) -> bool:
        return len(self.selections) >= self.budget.specializations

    def run(self, fed: Federation) -> SetRelease:
        while not self.done:
            self._split_round(fed)
            if not self._select_round(fed):
                break
        end = Update(self.state.round, end=True)  # no decision follows, only the final sum
        fed.broadcast(end)
        self.state.apply(end)
        return self._release(fed)

    # -- rounds ----------------------------------------------------------------------------
    def _sum(self, fed: Federation, lay: Layout) -> IntArray:
        vec = fed.sum(lay.phase, self.state.round, lay.size, lay.digest)
        if vec.shape != (lay.size,):
            raise ProtocolError(f"statistics vector has {vec.size} elements, needs {lay.size}")
        return vec

    def _split_round(self, fed: Federation) -> None:
        st, c = self.state, self.state.n_class
        lay = st.split_layout()
        if not lay.blocks:
            return
        vec = self._sum(fed, lay)
        chosen = []
        paid: set[int] = set()
        for b in lay.blocks:
            hist = vec[b.offset : b.offset + b.rows * c].reshape(b.rows, c)
            util, score = self.utility.of_splits(hist)
            i = exponential_mechanism(self.rng, util, self.eps1, self.utility.sensitivity)
            tree = st.trees[b.attr]
            chosen.append((b.attr, b.node, tree.leaf_lo[b.node] + 1 + i))
            self.splits.append(
                (st.round, tree.name, tree.labels[b.node], float(score[i]), int(util.size))
            )
            if b.attr not in paid:  # intervals of one attribute: disjoint records
                paid.add(b.attr)
                self.ledger.spend("split", st.round, self.eps1, tree.name)
        fed.broadcast(Update(st.round, splits=tuple(chosen)))
        st.apply(Update(st.round, splits=tuple(chosen)))

    def _select_round(self, fed: Federation) -> bool:
        st, c = self.state, self.state.n_class
        lay = st.counts_layout()
        if not lay.blocks:
            return False
        vec = self._sum(fed, lay)
        utils, scores = [], []
        for b in lay.blocks:
            cells = vec[b.offset : b.offset + b.rows * c].reshape(b.rows, c)
            if b.attr == st.m:  # combinations over all partitions holding the value
                k = st.stree.n_combos(b.node)
                cells = cells.reshape(-1, k, c).sum(axis=0)
            u, s = self.utility.of_children(cells)
            utils.append(u)
            scores.append(s)
        util = np.asarray(utils, dtype=np.int64)
        i = exponential_mechanism(self.rng, util, self.eps1, self.utility.sensitivity)
        b = lay.blocks[i]
        self._check_size(b.attr, b.node)
        name, label, kids = self._describe(b.attr, b.node)
        self.ledger.spend("selection", st.round, self.eps1, f"{name}: {label}")
        tested = kept = 0
        if b.attr == st.m:
            cells = vec[b.offset : b.offset + b.rows * c].reshape(b.rows, c).sum(axis=1)
            mask = self._emptiness(cells)
            tested, kept = int(mask.size), int(mask.sum())
            self.ledger.spend(
                "emptiness", st.round, self.eps1, f"{name}: {label}: {kept} of {tested} kept"
            )
        else:
            mask = np.ones(self._relational_mask(b.attr, b.node), dtype=np.uint8)
        sel = SetSelection(st.round, name, label, kids, scores[i], len(lay.blocks), tested, kept)
        self.selections.append(sel)
        update = Update(st.round, best=(b.attr, b.node), children_mask=mask.tobytes())
        fed.broadcast(update)
        st.apply(update)
        return True

    def _relational_mask(self, a: int, x: int) -> int:
        """Relational: (partitions on Link_x) x children, the size of its all-ones mask
        (every child partition is created)."""
        st = self.state
        n = int(np.count_nonzero(st.prel_array()[st.alive_ids(), a] == x))
        return n * len(st.trees[a].children[x])

    def _emptiness(self, cells: IntArray) -> IntArray:
        """Noisy count of every candidate cell, kept iff >= the noise scale 1 / epsilon'."""
        scale = 1 / self.eps1
        noisy = cells + discrete_laplace(self.rng, scale, int(cells.size))
        keep = noisy * scale.denominator >= scale.numerator
        return np.asarray(keep, dtype=np.uint8)

    def _release(self, fed: Federation) -> SetRelease:
        st = self.state
        lay = st.final_layout()
        vec = self._sum(fed, lay)
        eps = self.budget.noise_epsilon_after(self.ledger.total())
        self.noise_scale = 1 / eps
        noisy = vec + discrete_laplace(self.rng, self.noise_scale, lay.size)
        self.ledger.spend("noise", st.round, eps, f"{lay.size} counts")
        neg = int(np.count_nonzero(noisy < 0))
        counts = np.maximum(noisy, 0).reshape(-1, st.n_class)
        self.released = SetRelease(st.alive_ids(), counts, neg)
        return self.released

    # -- helpers ---------------------------------------------------------------------------
    def _describe(self, a: int, x: int) -> tuple[str, str, tuple[str, ...]]:
        st = self.state
        if a == st.m:
            t = st.stree
            return t.name, t.labels[x], tuple(t.labels[k] for k in t.children[x])
        tree = st.trees[a]
        return tree.name, tree.labels[x], tuple(tree.labels[k] for k in tree.children[x])

    def _check_size(self, a: int, x: int) -> None:
        rows = self.state.groups_after(a, x) * self.state.n_class
        if rows > self.max_table_rows:
            name, label, _ = self._describe(a, x)
            raise InputError(
                f"specialization {self.state.round + 1} ({name}: {label}) could make "
                f"{rows:,} rows, more than the {self.max_table_rows:,} this run allows: "
                "refused before allocating them",
                column="privacy.specializations",
                expected=f"a smaller h (or {TABLE_FLAG} N)",
            )


@dataclass(frozen=True)
class SetRun:
    spec: DPSpec
    leader: SetLeader
    release: SetRelease
    seconds: float


def new_state(spec: DPSpec, trees: list[AttrTree], stree: SetTree) -> SetState:
    return SetState(trees, stree, len(spec.class_values))


def anonymize_records(
    spec: DPSpec,
    new_trees: Callable[[], list[AttrTree]],
    stree: SetTree,
    records: Sequence[SetRecords],
    rng: RandomSource,
    max_table_rows: int = MAX_TABLE_ROWS,
) -> SetRun:
    """Centralized (one table) or an in-process federation of several parties' tables; the
    leader and every party get their own replica of the (growing) relational trees; the
    decomposed item taxonomy never changes and is shared."""
    t0 = time.perf_counter()
    leader = SetLeader(spec, new_state(spec, new_trees(), stree), rng, max_table_rows)
    parties = [SetParty(new_state(spec, new_trees(), stree), rec) for rec in records]
    release = leader.run(LocalFederation(parties))
    return SetRun(spec, leader, release, time.perf_counter() - t0)
