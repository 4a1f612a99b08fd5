"""The leader's side of a round: global statistics in, an :class:`Update` out.

Pure with respect to records: it sees only summed count vectors and the shared state.  What
is allowed is the privacy model's call, what is best the utility score's (the ports of
:mod:`fedanon.tds.ports`); the spec selects both by name.

:meth:`Decider.decide` may return several specializations for one round, in order, where the
one-per-round algorithm provably takes exactly these next (the rule: README, "Several
specializations in one round"; :mod:`fedanon.tds.chain`).  All but the last are *chained*:
after applying one, every party counts the statistics of that state, and the next COUNTS
vector is those segments followed by the statistics of the current state.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import InternalError, ProtocolError
from fedanon.model.spec import RunSpec
from fedanon.model.tree import NO_SPLIT, AttrTree
from fedanon.tds.blocks import BlockStore
from fedanon.tds.chain import Key, chain_after, check_chain, rank_key
from fedanon.tds.counts import CountsView
from fedanon.tds.ports import (
    GroupSummary,
    PrivacyModel,
    ScoreBook,
    UtilityScore,
    chain_proven,
    make_model,
    make_score,
)
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
    def __init__(
        self, spec: RunSpec, trees: list[AttrTree], n_class: int, batch: bool = True
    ) -> None:
        self.spec = spec
        self.model: PrivacyModel = make_model(spec)
        self.scorer: UtilityScore = make_score(spec.score)
        self.state = SharedState(trees, n_class, self.model.width - 1, self.scorer)
        m = self.state.m
        self.book = ScoreBook(m)
        self.blocks = BlockStore(m)  # count blocks (and score payloads) of alive partitions
        self.history: list[Specialization] = []
        self._groups: GroupSummary | None = None
        # several specializations per round: only where the rule is proven (LKC, InfoGain)
        self.batch = batch and chain_proven(self.model) and chain_proven(self.scorer)
        self.class_counts: dict[tuple[int, int], IntArray] = {}  # children x classes of T[v]
        self.sums = 0  # COUNTS sums decided so far
        self._segments: list[_Segment] = []
        self._chain: list[tuple[int, int]] = []  # the last round's specializations, in order

    # phase SPLIT ---------------------------------------------------------------------------
    def on_split(self, vec: IntArray) -> Update:
        st = self.state
        layout = st.split_layout()
        self._check_size(vec, layout.size)
        splits = []
        for e in layout.entries:
            n_parts = len(e.parts)
            width = self.scorer.split_width(e.n_bins, n_parts, st.n_class)
            chunk = vec[e.offset : e.offset + width]
            at = self.scorer.best_split(chunk, e.n_bins, n_parts, st.n_class)
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
        return self._decide(vec, chain=False)[0]

    def decide(self, vec: IntArray) -> list[Update]:
        """This round's specializations in order (several where the rule allows)."""
        if not self.batch:
            return [self.on_counts(vec)]
        return self._decide(vec, chain=True)

    def _decide(self, vec: IntArray, chain: bool) -> list[Update]:
        st = self.state
        size, _ = self.count_key()
        self._check_size(vec, size)
        found: list[set[tuple[int, int]]] = []
        pos = 0
        for g in self._segments:  # read as the rounds of one specialization each would
            found.append(self._absorb(g.state, g.layout, vec[pos : pos + g.layout.size]))
            pos += g.layout.size
        found.append(self._absorb(st, st.count_layout(), vec[pos:]))
        if len(self._chain) > 1:
            check_chain(self._chain, found, st, self._key)
        self._segments = []
        invalid = sorted(set().union(*found))
        best = self._best(set(invalid))
        self.sums += 1
        if best is None:
            self._chain = []
            return [Update(round=st.round, invalid=tuple(invalid), end=True)]
        picked = [best]
        if chain:
            picked = chain_after(
                best, self._ranking(set(invalid)), st, self.class_counts, self._key
            )
        self._chain = picked
        out = []
        for j, (b, x) in enumerate(picked):
            tree = st.trees[b]
            self.history.append(
                Specialization(
                    tree.name,
                    tree.labels[x],
                    tuple(tree.labels[c] for c in tree.children[x]),
                    self.book.get(b, x),
                    self.sums - 1,
                )
            )
            out.append(
                Update(
                    round=st.round + j,
                    invalid=tuple(invalid) if j == 0 else (),
                    best=(b, x),
                    children_mask=self._children_mask(b, x),
                )
            )
        return out

    def _absorb(self, st: SharedState, layout: CountLayout, vec: IntArray) -> set[tuple[int, int]]:
        """Store the blocks of the new partitions of ``st``, score its new values; the
        candidates found invalid."""
        new = st.new_parts
        part_end = layout.classes[0].offset if layout.classes else layout.size
        blen = np.diff(np.append(layout.base, part_end))
        self.blocks.add(new, vec, layout.base, blen, layout.off)
        view = CountsView(st, layout, vec)
        totals = view.totals()
        if st.round == 0:
            self.model.check_root(totals[0])
        newv = view.new_vals
        invalid: list[tuple[int, int]] = []
        # values that hold no record at all can never be specialized usefully
        for a, x in st.new_values:
            if st.is_candidate(a, x) and totals[newv[:, a] == x].sum() == 0:
                invalid.append((a, x))
        self.scorer.on_counts(view, self.book, self.blocks)
        if self.batch:  # the children x classes counts of T[v]: the rule's bounds
            for ce in layout.classes:
                self.class_counts[(ce.attr, ce.node)] = view.class_counts(ce).copy()
        invalid += self.model.invalid(view)
        return set(invalid)

    def _children_mask(self, b: int, x: int) -> bytes:
        """Per partition on Link_x (ascending id) and child slot: 1 if that child partition
        is non-empty in the union of all tables."""
        st = self.state
        w = st.width
        ids = st.alive_ids()
        link = ids[st.pvals[ids, b] == x]
        nk = int(st.trees[b].nchild[x])
        counts = self.blocks.block(link, b, nk * w)
        child_tot = counts.reshape(link.size, nk, w).sum(axis=2)
        mask: bytes = (child_tot > 0).astype(np.uint8).tobytes()
        return mask

    def keep_segment(self) -> None:
        """The update just applied was chained: the next COUNTS vector begins with the
        statistics of this state, read later against a copy of it."""
        st = self.state
        layout = st.count_layout()
        snap = copy.copy(st)  # arrays it reads are replaced, not changed, by later updates
        snap.active = set(st.active)
        self._segments.append(_Segment(snap, layout))

    def apply(self, update: Update) -> None:
        st = self.state
        applied = st.apply(update)
        for v in update.invalid:
            self.class_counts.pop(v, None)
        if applied is not None:
            self.scorer.on_specialized(st, applied, self.book, self.blocks)
            self.blocks.drop(applied.link)
            if update.best is not None:
                self.class_counts.pop(update.best, None)

    # helpers -------------------------------------------------------------------------------
    def _check_size(self, vec: IntArray, size: int) -> None:
        if vec.shape != (size,):
            raise ProtocolError(f"statistics vector has {vec.size} elements, layout needs {size}")

    def _key(self, a: int, x: int, score: float | None = None) -> Key:
        """Sort key of candidate (a, x): highest score first; ties: attribute order in the
        spec, then value order (``score``: instead of the book's)."""
        s = self.book.get(a, x) if score is None else score
        return rank_key(s, a, self.state.trees[a].order_key(x), x)

    def _ranking(self, excluded: set[tuple[int, int]]) -> list[tuple[int, int]]:
        """Every candidate not in ``excluded``, best first."""
        st = self.state
        cands = [
            (a, int(x))
            for a in range(st.m)
            for x in np.flatnonzero(st.candidate_mask(a))
            if (a, int(x)) not in excluded
        ]
        return sorted(cands, key=lambda v: self._key(*v))

    def _best(self, excluded: set[tuple[int, int]]) -> tuple[int, int] | None:
        """Highest score; ties: attribute order in the spec, then value order."""
        st = self.state
        best: tuple[float, int, int, int] | None = None
        for a in range(st.m):
            for x in np.flatnonzero(st.candidate_mask(a)):
                if (a, int(x)) in excluded:
                    continue
                key = self._key(a, int(x))
                if best is None or key < best:
                    best = key
        return None if best is None else (best[1], best[3])

    # results -------------------------------------------------------------------------------
    def final_totals(self) -> tuple[IntArray, IntArray]:
        """Values and (n, W) totals of every final partition (equivalence group)."""
        st = self.state
        ids = st.alive_ids()
        return st.pvals[ids], self.blocks.totals(ids, st.width)

    def groups(self) -> GroupSummary:
        """The final groups judged by the privacy model, computed once per run."""
        if self._groups is None:
            vals, totals = self.final_totals()
            self._groups = self.model.final_groups(vals, totals, self.state.active)
        return self._groups

    def verify(self) -> None:
        """Recount the final partitions under the privacy model (LKC: every L'-subset
        group); refuse to publish on any violation (it would be a bug in the incremental
        checks)."""
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
            **self.model.summary(self.groups()),
            "DR": float((n.astype(np.float64) ** 2).sum() / float(total) ** 2),
        }
