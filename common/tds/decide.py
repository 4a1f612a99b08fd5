"""The leader's side of a round: global statistics in, an :class:`Update` out.

Pure with respect to records: it sees only summed count vectors and the shared state.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import InternalError, PrivacyError, ProtocolError, SpecError
from fedanon.model.spec import RunSpec
from fedanon.model.tree import NO_SPLIT, AttrTree
from fedanon.privacy.lkc import (
    GroupSummary,
    child_blocks,
    invalid_candidates,
    summarize_groups,
    violations,
)
from fedanon.scores.measures import (
    best_split_discernibility,
    best_split_infogain,
    info_gain,
)
from fedanon.tds.blocks import BlockStore
from fedanon.tds.state import SharedState, Update

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Specialization:
    attribute: str
    value: str
    children: tuple[str, ...]
    score: float


class Decider:
    def __init__(self, spec: RunSpec, trees: list[AttrTree], n_class: int) -> None:
        self.spec = spec
        self.state = SharedState(trees, n_class, len(spec.privacy.sensitive_values), spec.score)
        m = self.state.m
        self.scores: list[dict[int, float]] = [{} for _ in range(m)]
        self.blocks = BlockStore(m)  # count blocks (and reductions) of the alive partitions
        self.history: list[Specialization] = []
        self.l_eff = spec.effective_l
        self._groups: GroupSummary | None = None

    # phase SPLIT ---------------------------------------------------------------------------
    def on_split(self, vec: IntArray) -> Update:
        st = self.state
        layout = st.split_layout()
        self._check_size(vec, layout.size)
        splits = []
        for e in layout.entries:
            if st.score == "infogain":
                chunk = vec[e.offset : e.offset + e.n_bins * st.n_class]
                at = best_split_infogain(chunk.reshape(e.n_bins, st.n_class))
            else:
                chunk = vec[e.offset : e.offset + e.n_bins * len(e.parts)]
                at = best_split_discernibility(chunk.reshape(len(e.parts), e.n_bins))
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
        totals = vec[layout.base[:, None] + np.arange(w)]
        if st.round == 0:
            self._check_root(totals[0])
        newv = st.pvals[new]
        invalid: list[tuple[int, int]] = []
        # values that hold no record at all can never be specialized usefully
        for a, x in st.new_values:
            if st.is_candidate(a, x) and totals[newv[:, a] == x].sum() == 0:
                invalid.append((a, x))
        for ce in layout.classes:
            mat = vec[ce.offset : ce.offset + ce.n_child * st.n_class]
            self.scores[ce.attr][ce.node] = info_gain(mat.reshape(ce.n_child, st.n_class))
        if st.score == "discernibility":
            self._add_contrib(new, layout.off, vec, w)
        invalid += invalid_candidates(
            st.trees,
            newv,
            layout.off,
            vec,
            w,
            st.active,
            st.last_attr,
            self.l_eff,
            self.spec.privacy.K,
            self.spec.privacy.C,
        )
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
                self._score(b, x),
            )
        )
        return Update(round=st.round, invalid=tuple(invalid), best=best, children_mask=mask)

    def apply(self, update: Update) -> None:
        st = self.state
        applied = st.apply(update)
        if applied is not None and st.score == "discernibility":
            contrib = self.blocks.get(applied.link)
            for a in range(st.m):
                self._add_scores(a, st.pvals[applied.link, a], -contrib[:, a])
        if applied is not None:
            self.blocks.drop(applied.link)

    # helpers -------------------------------------------------------------------------------
    def _check_size(self, vec: IntArray, size: int) -> None:
        if vec.shape != (size,):
            raise ProtocolError(f"statistics vector has {vec.size} elements, layout needs {size}")

    def _check_root(self, totals: IntArray) -> None:
        p = self.spec.privacy
        n = int(totals.sum())
        if n < p.K:
            raise PrivacyError(
                f"the table has {n} records, fewer than K = {p.K}: even the fully generalized "
                "table violates LKC-privacy"
            )
        for j, s in enumerate(p.sensitive_values, 1):
            conf = int(totals[j]) / n
            if violations(np.array([n]), totals[None, j : j + 1], 1, p.C)[0]:
                raise PrivacyError(
                    f"sensitive value {s!r} is in {conf:.1%} of all records, above C = {p.C}: "
                    "even the fully generalized table violates LKC-privacy"
                )
            if totals[j] == 0 and not p.allow_absent_sensitive:
                raise SpecError(
                    f"sensitive value {s!r} never occurs in the data (a typo protects nothing); "
                    "fix sensitive_values, or set [privacy] allow_absent_sensitive = true",
                    file=self.spec.source,
                )
            if totals[j] == 0:
                log.warning("sensitive value %r never occurs in the data", s)

    def _add_contrib(self, new: IntArray, off: IntArray, vec: IntArray, w: int) -> None:
        st = self.state
        for a in range(st.m):
            sel = np.flatnonzero(off[:, a] >= 0)
            if sel.size == 0:
                continue
            nodes = st.pvals[new[sel], a]
            block, _, counts = child_blocks(st.trees[a], nodes, off[sel, a], vec, w)
            child = counts.sum(axis=1)
            first = np.flatnonzero(np.r_[True, block[1:] != block[:-1]])  # blocks are runs
            sizes = np.add.reduceat(child, first)
            red = sizes * sizes - np.add.reduceat(child * child, first)  # |p|^2 - sum |p_c|^2
            self.blocks.put(new[sel], a, red)
            self._add_scores(a, nodes, red)

    def _add_scores(self, a: int, nodes: IntArray, amounts: IntArray) -> None:
        """scores[a][x] += the sum of ``amounts`` over the entries with node x."""
        uniq, inv = np.unique(nodes, return_inverse=True)
        sums = np.zeros(uniq.size, dtype=np.int64)
        np.add.at(sums, inv, amounts)  # exact integer sums
        for x, s in zip(uniq.tolist(), sums.tolist(), strict=True):
            if s:
                self.scores[a][x] = self.scores[a].get(x, 0) + s

    def _score(self, a: int, x: int) -> float:
        return float(self.scores[a].get(x, 0.0))

    def _best(self, excluded: set[tuple[int, int]]) -> tuple[int, int] | None:
        """Highest score; ties: attribute order in the spec, then value order."""
        st = self.state
        best: tuple[float, int, int, int] | None = None
        for a in range(st.m):
            for x in np.flatnonzero(st.candidate_mask(a)):
                if (a, int(x)) in excluded:
                    continue
                key = (-self._score(a, int(x)), a, st.trees[a].order_key(int(x)), int(x))
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
        """The final groups judged on every L'-subset, computed once per run."""
        if self._groups is None:
            vals, totals = self.final_totals()
            p = self.spec.privacy
            self._groups = summarize_groups(vals, totals, self.state.active, self.l_eff, p.K, p.C)
        return self._groups

    def verify(self) -> None:
        """Recount every L'-subset group of the final partitions; refuse to publish on any
        violation (it would be a bug in the incremental checks)."""
        bad = self.groups().violating_groups
        if bad:
            raise InternalError(
                f"safety check: {bad} group(s) of the result violate LKC-privacy; "
                "nothing was published (please report this bug)"
            )

    def summary(self) -> dict[str, object]:
        _, totals = self.final_totals()
        n = totals.sum(axis=1)
        total = int(n.sum())
        g = self.groups()
        return {
            "records": total,
            "groups": int(n.size),
            "min_group_size": g.min_group_size,
            "max_confidence": g.max_confidence,
            "DR": float((n.astype(np.float64) ** 2).sum() / float(total) ** 2),
        }
