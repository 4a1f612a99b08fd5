"""LKC-privacy validity checks over QID subsets (Sec. 4.3.2), on partition aggregates.

Only subsets of size exactly L' = min(L, |QID|) matter (a smaller subset's groups are unions
of a larger one's).  An attribute still at its root splits nothing, so a subset is reduced to
its *active* attributes.  After Best on attribute b, a candidate on a != b can change only
on subsets containing a and b, and only through the partitions Best created; the children of
Best need a full check -- also only over the new partitions, which are all of T[c].
"""

from __future__ import annotations

import logging
from fractions import Fraction
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray
from fedanon.errors import PrivacyError, SpecError
from fedanon.model.params import LKCParams
from fedanon.model.tree import AttrTree
from fedanon.privacy.base import GroupSummary
from fedanon.tds.counts import CountsView, child_blocks

if TYPE_CHECKING:
    from fedanon.model.spec import RunSpec

log = logging.getLogger(__name__)


def effective_subsets(a: int, b: int | None, active: set[int], l_eff: int) -> list[tuple[int, ...]]:
    """The other attributes of every QID subset that must be rechecked for attribute a."""
    if b is None or a == b:
        others = sorted(active - {a})
        size = min(l_eff - 1, len(others))
        return list(combinations(others, size))
    if l_eff < 2:
        return []
    others = sorted(active - {a, b})
    size = min(l_eff - 2, len(others))
    return [(b, *c) for c in combinations(others, size)]


def stack_keys(keys: list[IntArray]) -> IntArray:
    """Concatenate per-subset keys so that equal keys of different subsets stay apart: the
    subset index becomes the most significant digit over one common span."""
    span = max((int(k.max()) + 1 for k in keys if k.size), default=1)
    if span * len(keys) >= 1 << 62:
        keys = [np.unique(k, return_inverse=True)[1].astype(np.int64) for k in keys]
        span = max((int(k.max()) + 1 for k in keys if k.size), default=1)
    return np.concatenate([k + q * span for q, k in enumerate(keys)])


def group_sum(inv: IntArray, mat: IntArray, n_groups: int) -> IntArray:
    """Column sums of ``mat`` rows grouped by ``inv``."""
    out = np.empty((n_groups, mat.shape[1]), dtype=np.int64)
    for j in range(mat.shape[1]):
        out[:, j] = np.bincount(inv, weights=mat[:, j], minlength=n_groups)
    return out


def violations(n: IntArray, sens: IntArray, k: int, c: float) -> npt.NDArray[np.bool_]:
    """Groups (rows) with n < K or some sensitive count > C * n, compared exactly with C
    read as the decimal the user wrote (0.2 means 1/5, not the nearest binary double)."""
    bad = n < k
    if sens.shape[1]:
        frac = Fraction(repr(float(c))).limit_denominator(10**9)
        lhs = sens.astype(np.int64) * frac.denominator
        bad |= (lhs > frac.numerator * n[:, None].astype(np.int64)).any(axis=1)
    return bad


def composite_key(cols: list[IntArray], radix: list[int], n_rows: int | None = None) -> IntArray:
    """One int64 key per row for a tuple of small non-negative integer columns (all rows get
    key 0 when there are no columns: pass ``n_rows`` then)."""
    key = np.zeros(cols[0].shape[0] if cols else (n_rows or 0), dtype=np.int64)
    span = 1
    for col, r in zip(cols, radix, strict=True):
        if span * r >= 1 << 62:
            _, key = np.unique(key, return_inverse=True)
            key = key.astype(np.int64)
            span = int(key.max()) + 1 if key.size else 1
        key = key * r + col
        span *= r
    return key


def invalid_candidates(
    trees: list[AttrTree],
    new_vals: IntArray,
    off: IntArray,
    vec: IntArray,
    width: int,
    active: set[int],
    last_attr: int | None,
    l_eff: int,
    k: int,
    c: float,
) -> list[tuple[int, int]]:
    """Candidates among the new partitions whose specialization would violate LKC.

    new_vals: (n_new, m) values of the new partitions; off: their count-block offsets
    (-1 where the attribute is not a candidate); vec: the global count vector.
    """
    found: list[tuple[int, int]] = []
    for a in range(len(trees)):
        sel = np.flatnonzero(off[:, a] >= 0)
        if sel.size == 0:
            continue
        subsets = effective_subsets(a, last_attr, active, l_eff)
        if not subsets:
            continue
        tree = trees[a]
        block, kk, counts = child_blocks(tree, new_vals[sel, a], off[sel, a], vec, width)
        part = sel[block]
        keep = counts.sum(axis=1) > 0
        part, kk, counts = part[keep], kk[keep], counts[keep]
        child = tree.child_table[new_vals[part, a], kk]
        keys = [
            composite_key(
                [new_vals[part, o] for o in others] + [child],
                [len(trees[o]) for o in others] + [len(tree)],
            )
            for others in subsets
        ]
        allkeys = stack_keys(keys)
        uniq, inv = np.unique(allkeys, return_inverse=True)
        tiled = np.tile(counts, (len(subsets), 1))
        sums = group_sum(inv, tiled, uniq.size).astype(np.int64)
        n = sums.sum(axis=1)
        bad_groups = violations(n, sums[:, 1:], k, c)
        if not bad_groups.any():
            continue
        bad_rows = bad_groups[inv].reshape(len(subsets), part.size).any(axis=0)
        for node in np.unique(new_vals[part[bad_rows], a]):
            found.append((a, int(node)))
    return found


def summarize_groups(
    vals: IntArray, totals: IntArray, active: set[int], l_eff: int, k: int, c: float
) -> GroupSummary:
    """Minimum group size, maximum sensitive confidence and the number of groups violating
    LKC over every QID subset of size L' (reduced to active attributes), for final
    partitions with values ``vals`` and (n, W) ``totals``."""
    subset_size = min(l_eff, len(active))
    radix = [int(vals[:, a].max()) + 1 for a in range(vals.shape[1])]
    min_n, max_conf, bad = int(totals.sum()), 0.0, 0
    for q in combinations(sorted(active), subset_size):
        key = composite_key([vals[:, a] for a in q], [radix[a] for a in q], vals.shape[0])
        _, inv = np.unique(key, return_inverse=True)
        sums = group_sum(inv, totals, int(inv.max()) + 1)
        n = sums.sum(axis=1)
        min_n = min(min_n, int(n.min()))
        if totals.shape[1] > 1:
            max_conf = max(max_conf, float((sums[:, 1:].max(axis=1) / n).max()))
        bad += int(violations(n, sums[:, 1:], k, c).sum())
    return GroupSummary(min_n, max_conf, bad)


class LKCModel:
    """LKC-privacy (Definition 3.1): every group of every QID subset of size L' holds at
    least K records and no sensitive value in more than a share C of them."""

    name = "LKC-privacy"
    params = LKCParams  # [privacy] L, K, C, sensitive_values, allow_absent_sensitive
    CHAIN_PROVEN = True  # several specializations per round (with InfoGain; tds.ports)

    def __init__(self, spec: RunSpec) -> None:
        p = spec.privacy
        self.width = 1 + len(p.sensitive_values)
        self.l_eff = spec.effective_l
        self.k, self.c = p.K, p.C
        self.sensitive_values = p.sensitive_values
        self.allow_absent = p.allow_absent_sensitive
        self.source = spec.source

    def check_root(self, totals: IntArray) -> None:
        n = int(totals.sum())
        if n < self.k:
            raise PrivacyError(
                f"the table has {n} records, fewer than K = {self.k}: even the fully "
                "generalized table violates LKC-privacy"
            )
        for j, s in enumerate(self.sensitive_values, 1):
            conf = int(totals[j]) / n
            if violations(np.array([n]), totals[None, j : j + 1], 1, self.c)[0]:
                raise PrivacyError(
                    f"sensitive value {s!r} is in {conf:.1%} of all records, above "
                    f"C = {self.c}: even the fully generalized table violates LKC-privacy"
                )
            if totals[j] == 0 and not self.allow_absent:
                raise SpecError(
                    f"sensitive value {s!r} never occurs in the data (a typo protects "
                    "nothing); fix sensitive_values, or set [privacy] allow_absent_sensitive "
                    "= true",
                    file=self.source,
                )
            if totals[j] == 0:
                log.warning("sensitive value %r never occurs in the data", s)

    def invalid(self, view: CountsView) -> list[tuple[int, int]]:
        st = view.state
        return invalid_candidates(
            st.trees, view.new_vals, view.layout.off, view.vec, view.width, st.active,
            st.last_attr, self.l_eff, self.k, self.c,
        )  # fmt: skip

    def final_groups(self, vals: IntArray, totals: IntArray, active: set[int]) -> GroupSummary:
        return summarize_groups(vals, totals, active, self.l_eff, self.k, self.c)

    def summary(self, groups: GroupSummary) -> dict[str, object]:
        return {"min_group_size": groups.min_group_size, "max_confidence": groups.max_confidence}
