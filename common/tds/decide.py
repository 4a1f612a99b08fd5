"""The leader's side of a round: global statistics in, an :class:`Update` out.

Pure with respect to records: it sees only summed count vectors and the shared state.  What
is allowed is the privacy model's call (:mod:`fedanon.privacy.base`), what is best the
utility score's (:mod:`fedanon.scores.base`); the spec selects both by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import InternalError, ProtocolError
from fedanon.model.spec import RunSpec
from fedanon.model.tree import NO_SPLIT, AttrTree
from fedanon.privacy.base import GroupSummary, PrivacyModel, make_model
from fedanon.scores.base import ScoreBook
from fedanon.tds.blocks import BlockStore
from fedanon.tds.counts import CountsView
from fedanon.tds.state import SharedState, Update


@dataclass(frozen=True)
class Specialization:
    attribute: str
    value: str
    children: tuple[str, ...]
    score: float


class Decider:
    def __init__(self, spec: RunSpec, trees: list[AttrTree], n_class: int) -> None:
        self.spec = spec
        self.model: PrivacyModel = make_model(spec)
        self.state = SharedState(trees, n_class, self.model.width - 1, spec.score)
        self.scorer = self.state.scorer
        m = self.state.m
        self.book = ScoreBook(m)
        self.blocks = BlockStore(m)  # count blocks (and score payloads) of alive partitions
        self.history: list[Specialization] = []
        self._groups: GroupSummary | None = None

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
    def on_counts(self, vec: IntArray) -> Update:
        st = self.state
        layout = st.count_layout()
        self._check_size(vec, layout.size)
        w = layout.width
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
        invalid += self.model.invalid(view)
        invalid = sorted(set(invalid))
        best = self._best(set(invalid))
        if best is None:
            return Update(round=st.round, invalid=tuple(invalid), end=True)
        b, x = best
        ids = st.alive_ids()
        link = ids[st.pvals[ids, b] == x]
        nk = int(st.trees[b].nchild[x])
        counts = self.blocks.block(link, b, nk * w)
        child_tot = counts.reshape(link.size, nk, w).sum(axis=2)
        mask = (child_tot > 0).astype(np.uint8).tobytes()
        tree = st.trees[b]
        self.history.append(
            Specialization(
                tree.name,
                tree.labels[x],
                tuple(tree.labels[c] for c in tree.children[x]),
                self.book.get(b, x),
            )
        )
        return Update(round=st.round, invalid=tuple(invalid), best=best, children_mask=mask)

    def apply(self, update: Update) -> None:
        st = self.state
        applied = st.apply(update)
        if applied is not None:
            self.scorer.on_specialized(st, applied, self.book, self.blocks)
            self.blocks.drop(applied.link)

    # helpers -------------------------------------------------------------------------------
    def _check_size(self, vec: IntArray, size: int) -> None:
        if vec.shape != (size,):
            raise ProtocolError(f"statistics vector has {vec.size} elements, layout needs {size}")

    def _best(self, excluded: set[tuple[int, int]]) -> tuple[int, int] | None:
        """Highest score; ties: attribute order in the spec, then value order."""
        st = self.state
        best: tuple[float, int, int, int] | None = None
        for a in range(st.m):
            for x in np.flatnonzero(st.candidate_mask(a)):
                if (a, int(x)) in excluded:
                    continue
                key = (-self.book.get(a, int(x)), a, st.trees[a].order_key(int(x)), int(x))
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
