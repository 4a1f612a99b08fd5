"""The leader's side of a round: global statistics in, an :class:`Update` out.

Pure with respect to records: it sees only summed count vectors and the shared state.  It
composes the engine's ports (:mod:`fedanon.tds.ports`): what is allowed is the privacy
model's call (none in a run without one), what is taken the selector's, which child
partitions exist the releaser's.  :class:`Decider` built from a spec is the deterministic
run: the spec's model and score by name, the argmax selector, the records releaser;
:meth:`Decider.composed` takes other parts (DiffGen: :mod:`fedanon.dp.decider`).

:meth:`Decider.decide` may return several specializations for one round, in order, where the
selector provably takes exactly these next (the rule: README, "Several specializations in
one round"; :mod:`fedanon.tds.chain`).  All but the last are *chained*: after applying one,
every party counts the statistics of that state, and the next COUNTS vector is those
segments followed by the statistics of the current state.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import InternalError, PrivacyError, ProtocolError, SpecError
from fedanon.model.spec import RunSpec
from fedanon.model.tree import NO_SPLIT, AttrTree
from fedanon.tds.argmax import ArgmaxSelector
from fedanon.tds.blocks import BlockStore
from fedanon.tds.counts import CountsView
from fedanon.tds.ports import (
    Candidate,
    CoalitionCheck,
    GroupSummary,
    PrivacyModel,
    Releaser,
    Selector,
    chain_proven,
    make_model,
    make_score,
)
from fedanon.tds.records import RecordsReleaser
from fedanon.tds.state import CountLayout, SharedState, Update


@dataclass(frozen=True)
class Specialization:
    attribute: str
    value: str
    children: tuple[str, ...]
    score: float
    # the COUNTS sum (0, 1, ...) whose statistics decided it: how it was run, not what was
    # specialized (equal sequences compare equal whatever the rounds)
    decided_in: int = field(default=0, compare=False)


def combined_key(layouts: Sequence[CountLayout]) -> tuple[int, bytes]:
    """(size, digest) of a COUNTS vector made of the segments ``layouts`` in order (one
    segment: that layout's own)."""
    if len(layouts) == 1:
        return layouts[0].size, layouts[0].digest
    h = hashlib.sha256(b"chain%d" % len(layouts))
    for lay in layouts:
        h.update(lay.digest)
        h.update(lay.size.to_bytes(8, "little"))
    return sum(lay.size for lay in layouts), h.digest()


@dataclass(frozen=True)
class _Segment:
    """The state right after a chained specialization and its COUNTS layout."""

    state: SharedState
    layout: CountLayout


class Decider:
    """``Decider(spec, trees, n_class)``: the deterministic run of the spec's privacy model and
    utility score (several specializations per round where ``batch`` and the rule allow)."""

    coalition: CoalitionCheck | None  # m-privacy (None: m = 0)

    def __init__(
        self,
        spec: RunSpec,
        trees: list[AttrTree],
        n_class: int,
        batch: bool = True,
        coalition: CoalitionCheck | None = None,
    ) -> None:
        model = make_model(spec)
        scorer = make_score(spec.score)
        state = SharedState(trees, n_class, model.width - 1, scorer)
        if spec.m > 0 and coalition is None:
            raise SpecError(
                f"[privacy] m = {spec.m}: this run has no m-privacy check (it needs the "
                "provider column on one machine, or the hospitals' MPC in a federation)",
                file=spec.source,
                column="privacy.m",
            )
        # several specializations per round: only where the rule is proven (LKC, InfoGain;
        # not with m-privacy: each taken candidate is checked against the coalitions first)
        chains = batch and chain_proven(model) and chain_proven(scorer) and coalition is None
        selector = ArgmaxSelector(scorer, state.m, chains)
        self._compose(spec, state, selector, RecordsReleaser(), model)
        self.coalition = coalition

    @classmethod
    def composed(
        cls,
        spec: RunSpec,
        state: SharedState,
        selector: Selector,
        releaser: Releaser,
        model: PrivacyModel | None = None,
    ) -> Decider:
        """A decider of other parts: ``model`` None refuses no candidate on its counts (the
        selector and the releaser carry the run's guarantee); the parties count
        ``state``'s layouts."""
        if model is None and isinstance(releaser, RecordsReleaser):
            raise InternalError("a record release needs a privacy model (its count blocks)")
        self = cls.__new__(cls)
        self._compose(spec, state, selector, releaser, model)
        return self

    def _compose(
        self,
        spec: RunSpec,
        state: SharedState,
        selector: Selector,
        releaser: Releaser,
        model: PrivacyModel | None,
    ) -> None:
        self.spec = spec
        self.model = model
        self.state = state
        self.selector = selector
        self.releaser = releaser
        self.blocks = BlockStore(state.m)  # count blocks (and score payloads) of alive partitions
        self.history: list[Specialization] = []
        self._groups: GroupSummary | None = None
        self.sums = 0  # COUNTS sums decided so far
        self._segments: list[_Segment] = []
        self.coalition = None  # m-privacy: set by __init__

    @property
    def batch(self) -> bool:
        """Whether a round may take several specializations (the selector's rule)."""
        return self.selector.chains

    # phase SPLIT ---------------------------------------------------------------------------
    def on_split(self, vec: IntArray) -> Update:
        st = self.state
        layout = st.split_layout()
        self._check_size(vec, layout.size)
        splits = []
        for e in layout.entries:
            width = st.scorer.split_width(e.n_bins, len(e.parts), st.n_class)
            at = self.selector.split_point(st, e, vec[e.offset : e.offset + width])
            first = st.trees[e.attr].leaf_lo[e.node]
            splits.append((e.attr, e.node, NO_SPLIT if at is None else first + at))
        return Update(round=st.round, splits=tuple(splits))

    # phase COUNTS --------------------------------------------------------------------------
    def count_key(self) -> tuple[int, bytes]:
        """(size, digest) of the next COUNTS vector: the segments kept after chained
        specializations, then the current state's layout."""
        return combined_key([*(g.layout for g in self._segments), self.state.count_layout()])

    def on_counts(self, vec: IntArray) -> Update:
        """One specialization (or the end) from this round's COUNTS vector."""
        return self._decide(vec, several=False)[0]

    def decide(self, vec: IntArray) -> list[Update]:
        """This round's specializations in order (several where the selector's rule allows;
        the end when it takes none)."""
        return self._decide(vec, several=True)

    def _decide(self, vec: IntArray, several: bool) -> list[Update]:
        st = self.state
        size, _ = self.count_key()
        self._check_size(vec, size)
        found: list[set[Candidate]] = []
        pos = 0
        for g in self._segments:  # read as the rounds of one specialization each would
            found.append(self._absorb(g.state, g.layout, vec[pos : pos + g.layout.size]))
            pos += g.layout.size
        found.append(self._absorb(st, st.count_layout(), vec[pos:]))
        self._segments = []
        invalid = sorted(set().union(*found))
        excluded = set(invalid)
        cands = [
            (a, int(x))
            for a in range(st.m)
            for x in np.flatnonzero(st.candidate_mask(a))
            if (a, int(x)) not in excluded
        ]
        picked = self.selector.select(st, cands, found, several)
        if self.coalition is not None:  # m-privacy: the taken candidate, else the next one
            rejected = []
            while picked and not self.coalition.passes(picked[0]):
                rejected.append(picked[0])
                cands.remove(picked[0])
                picked = self.selector.select(st, cands, found, several)
            invalid = sorted(set(invalid) | set(rejected))
        self.sums += 1
        if not picked:
            return [Update(round=st.round, invalid=tuple(invalid), end=True)]
        out = []
        for j, (b, x) in enumerate(picked):
            tree = st.trees[b]
            self.history.append(
                Specialization(
                    tree.name,
                    tree.labels[x],
                    tuple(tree.labels[c] for c in tree.children[x]),
                    self.selector.score(b, x),
                    self.sums - 1,
                )
            )
            out.append(
                Update(
                    round=st.round + j,
                    invalid=tuple(invalid) if j == 0 else (),
                    best=(b, x),
                    children_mask=self.releaser.children_mask(st, self.blocks, b, x),
                )
            )
        return out

    def _absorb(self, st: SharedState, layout: CountLayout, vec: IntArray) -> set[Candidate]:
        """Store the blocks of the new partitions of ``st`` (those a privacy model reads),
        score its new values; the candidates found invalid."""
        if self.model is not None:
            part_end = layout.classes[0].offset if layout.classes else layout.size
            blen = np.diff(np.append(layout.base, part_end))
            self.blocks.add(st.new_parts, vec, layout.base, blen, layout.off)
        view = CountsView(st, layout, vec)
        if self.model is not None and st.round == 0:
            self.model.check_root(view.totals()[0])
            if self.coalition is not None and not self.coalition.passes_root():
                raise PrivacyError(
                    "even the fully generalized table is not m-private: some coalition of at "
                    "most m hospitals, removing its own records, leaves fewer than K records "
                    "or a sensitive value above C ([privacy] m, K, C); nothing can be released"
                )
        invalid = self.releaser.useless(view)
        self.selector.observe(view, self.blocks)
        if self.model is not None:
            invalid += self.model.invalid(view)
        return set(invalid)

    def keep_segment(self) -> None:
        """The update just applied was chained: the next COUNTS vector begins with the
        statistics of this state, read later against a copy of it."""
        st = self.state
        layout = st.count_layout()
        snap = copy.copy(st)  # arrays it reads are replaced, not changed, by later updates
        snap.active = set(st.active)
        self._segments.append(_Segment(snap, layout))

    def apply(self, update: Update) -> None:
        applied = self.state.apply(update)
        self.selector.applied(self.state, update, applied, self.blocks)
        if applied is not None and self.model is not None:
            self.blocks.drop(applied.link)

    # helpers -------------------------------------------------------------------------------
    def _check_size(self, vec: IntArray, size: int) -> None:
        if vec.shape != (size,):
            raise ProtocolError(f"statistics vector has {vec.size} elements, layout needs {size}")

    # results of a run with a privacy model (its final groups) ------------------------------
    def _judge(self) -> PrivacyModel:
        if self.model is None:
            raise InternalError("this run has no privacy model: it has no groups to judge")
        return self.model

    def final_totals(self) -> tuple[IntArray, IntArray]:
        """Values and (n, W) totals of every final partition (equivalence group)."""
        self._judge()  # the blocks are kept for a privacy model
        st = self.state
        ids = st.alive_ids()
        return st.pvals[ids], self.blocks.totals(ids, st.width)

    def groups(self) -> GroupSummary:
        """The final groups judged by the privacy model, computed once per run."""
        if self._groups is None:
            vals, totals = self.final_totals()
            self._groups = self._judge().final_groups(vals, totals, self.state.active)
        return self._groups

    def verify(self) -> None:
        """Recount the final partitions under the privacy model (LKC: every L'-subset
        group); refuse to publish on any violation (it would be a bug in the incremental
        checks).  A run without a privacy model has no groups to recount: its guarantee is
        its selector's and releaser's (DiffGen: the ledger of its budget)."""
        if self.model is None:
            return
        bad = self.groups().violating_groups
        if bad:
            raise InternalError(
                f"safety check: {bad} group(s) of the result violate {self.model.name}; "
                "nothing was published (please report this bug)"
            )

    def summary(self) -> dict[str, object]:
        _, totals = self.final_totals()
        n = totals.sum(axis=1)
        total = int(n.sum())
        return {
            "records": total,
            "groups": int(n.size),
            **self._judge().summary(self.groups()),
            "DR": float((n.astype(np.float64) ** 2).sum() / float(total) ** 2),
        }
