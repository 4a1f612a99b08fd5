"""Local statistics: integer count vectors whose layout is fixed by the shared state.

Only rows of the partitions created by the last specialization are read, so the cost of a
round follows the rows touched.  Nothing here uses floating point.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from common.state import CountLayout, SharedState, SplitLayout
from common.tips import Tips

IntArray = npt.NDArray[np.int64]


def split_stats(state: SharedState, tips: Tips, cls: IntArray, layout: SplitLayout) -> IntArray:
    """Per pending numeric node: class histogram over its bins (infogain), or per partition
    on its link a histogram over its bins (discernibility)."""
    out = np.zeros(layout.size, dtype=np.int64)
    if not layout.entries:
        return out
    rows, which = tips.rows_of(state.new_parts)
    newv = state.pvals[state.new_parts]
    for e in layout.entries:
        sel = newv[which, e.attr] == e.node
        r = rows[sel]
        bins = tips.leaves[e.attr, r] - state.trees[e.attr].leaf_lo[e.node]
        if state.score == "infogain":
            idx = e.offset + bins * state.n_class + cls[r]
        else:
            part_pos = np.searchsorted(e.parts, which[sel])
            idx = e.offset + part_pos * e.n_bins + bins
        out += np.bincount(idx, minlength=layout.size)
    return out


def count_stats(
    state: SharedState, tips: Tips, cls: IntArray, sens: IntArray, layout: CountLayout
) -> IntArray:
    """Per new partition: totals by sensitive slot and, for every candidate attribute, counts
    by child and sensitive slot; then class counts by child for every new candidate value."""
    w = layout.width
    rows, which = tips.rows_of(state.new_parts)
    newv = state.pvals[state.new_parts]
    s = sens[rows]
    out = np.bincount(layout.base[which] + s, minlength=layout.size)
    for a in range(state.m):
        cand = layout.off[:, a] >= 0
        if not cand.any():
            continue
        tree = state.trees[a]
        if cand.all():
            off, nodes, leaves, ss = layout.off[which, a], newv[which, a], tips.leaves[a, rows], s
        else:
            sel = cand[which]
            r, wsel = rows[sel], which[sel]
            off, nodes, leaves, ss = layout.off[wsel, a], newv[wsel, a], tips.leaves[a, r], s[sel]
        child = tree.child_of(nodes, leaves)
        out += np.bincount(off + tree.slot[child] * w + ss, minlength=layout.size)
    for c in layout.classes:
        sel = newv[which, c.attr] == c.node
        r = rows[sel]
        nodes = np.full(r.size, c.node, dtype=np.int64)
        child = state.trees[c.attr].child_of(nodes, tips.leaves[c.attr, r])
        idx = c.offset + state.trees[c.attr].slot[child] * state.n_class + cls[r]
        out += np.bincount(idx, minlength=layout.size)
    return out.astype(np.int64)
