"""Local statistics: integer count vectors whose layout is fixed by the shared state.

Only rows of the partitions created by the last specialization are read, so the cost of a
round follows the rows touched.  Per attribute a row is reduced to one small key -- its
partition and its leaf (and sensitive or class slot) -- and counted with one bincount; where
that key lands in the vector is looked up once per (partition, leaf), not once per row.
Nothing here uses floating point for counts that could exceed 2^53.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from fedanon.arrays import Codes, IntArray
from fedanon.model.tree import AttrTree
from fedanon.tds import threads
from fedanon.tds.blocks import gather
from fedanon.tds.state import CountLayout, SharedState, SplitLayout
from fedanon.tds.tips import Derivation, Tips

MIN_DERIVED_ROWS = 1 << 16  # derive counts only when that skips at least this many rows
HISTOGRAM_SLACK = 4  # histogram over (partition, leaf, slot) when not much larger than rows


def split_stats(state: SharedState, tips: Tips, cls: Codes, layout: SplitLayout) -> IntArray:
    """Per pending numeric node: the cells its utility score lays out over (partition on
    its link, bin) -- and class, when the score splits them by class (InfoGain: a class
    histogram over the bins; discernibility: per partition a histogram over the bins).  One
    pass over the rows per attribute, whatever the number of pending nodes."""
    if not layout.entries:
        return np.zeros(layout.size, dtype=np.int64)
    scorer = state.scorer
    by_class = scorer.split_classes
    n_extra = state.n_class if by_class else 1
    out = np.zeros(layout.size + n_extra, dtype=np.int64)  # + a sink
    new = state.new_parts
    n_rows = int(tips.sizes(new).sum())
    if tips.chunk is not None:  # out of core: tables bounded by a chunk, not by the table
        n_rows = min(n_rows, tips.chunk)
    targets: dict[int, IntArray | None] = {}
    for a in sorted({e.attr for e in layout.entries}):
        tree = state.trees[a]
        if new.size * tree.n_leaves > HISTOGRAM_SLACK * n_rows + (1 << 20):
            targets[a] = None  # entry by entry
            continue
        target = np.full((new.size, tree.n_leaves), layout.size, dtype=np.int64)
        for e in (e for e in layout.entries if e.attr == a):
            lo = tree.leaf_lo[e.node]
            # e.parts: positions in new_parts of the partitions holding the node
            cells = scorer.split_cells(e.n_bins, e.parts.size, state.n_class)
            target[e.parts, lo : lo + e.n_bins] = e.offset + cells
        targets[a] = target
    for rows, which in tips.pieces(new, small=True):  # one piece unless out of core
        c_rows = np.take(cls, rows) if by_class else None
        for a, tgt in targets.items():
            if tgt is None:
                _split_per_entry(out, state, tips, cls, layout, a, rows, which)
            else:
                scatter(out, tgt, which, np.take(tips.leaves[a], rows), c_rows, n_extra)
    return out[: layout.size]


def _split_per_entry(
    out: IntArray,
    state: SharedState,
    tips: Tips,
    cls: Codes,
    layout: SplitLayout,
    a: int,
    rows: Codes,
    which: Codes,
) -> None:
    """split_stats for one attribute, entry by entry (when a (partition, leaf) table would be
    larger than the rows)."""
    newv = state.pvals[state.new_parts]
    scorer = state.scorer
    for e in (e for e in layout.entries if e.attr == a):
        sel = newv[which, a] == e.node
        r = rows[sel]
        if r.size == 0:
            continue
        bins = tips.leaves[a, r].astype(np.int64) - state.trees[a].leaf_lo[e.node]
        cells = scorer.split_cells(e.n_bins, e.parts.size, state.n_class)
        pos = np.searchsorted(e.parts, which[sel]) if cells.shape[0] > 1 else 0
        idx = e.offset + cells[pos, bins]
        if scorer.split_classes:
            idx += cls[r]
        out += np.bincount(idx, minlength=out.size)


def child_table(tree: AttrTree, nodes: IntArray) -> IntArray:
    """(len(nodes), n_leaves): slot of the child of ``nodes[i]`` covering each leaf (leaves
    outside the node: any value; rows never hold them)."""
    leaves = np.arange(tree.n_leaves, dtype=np.int64)
    table = np.zeros((nodes.size, tree.n_leaves), dtype=np.int64)
    for node in np.unique(nodes).tolist():  # few distinct values per attribute
        lo, hi = tree.leaf_lo[node], tree.leaf_hi[node]
        if tree.nchild[node] == 0:
            continue
        child = tree.child_of(np.full(hi - lo, node, dtype=np.int64), leaves[lo:hi])
        table[nodes == node, lo:hi] = tree.slot[child]
    return table


def attr_counts(
    out: IntArray,
    tree: AttrTree,
    nodes: IntArray,
    base: IntArray,
    which: IntArray,
    leaves: Codes,
    extra: Codes | None,
    n_extra: int,
) -> None:
    """For every row: ``out[base[p] + slot(child of nodes[p] covering its leaf) * n_extra +
    extra] += 1`` where p is the row's partition (``which``); partitions with ``base < 0``
    are skipped.  ``out`` ends with a sink of at least ``n_extra`` slots."""
    sink = out.size - n_extra
    n_parts, n_leaves = nodes.size, tree.n_leaves
    use_extra = extra is not None and n_extra > 1
    if n_parts * n_leaves > HISTOGRAM_SLACK * which.size + (1 << 16):  # per row
        keep = base[which] >= 0
        w_, lv = which[keep], leaves[keep]
        child = tree.child_of(nodes[w_], lv.astype(np.int64))
        idx = base[w_] + tree.slot[child] * n_extra
        if use_extra and extra is not None:
            idx += extra[keep]
        out += np.bincount(idx, minlength=out.size)
        return
    target = np.where(base[:, None] >= 0, base[:, None] + child_table(tree, nodes) * n_extra, sink)
    scatter(out, target, which, leaves, extra, n_extra)


def scatter(
    out: IntArray,
    target: IntArray,
    which: Codes,
    leaves: Codes,
    extra: Codes | None,
    n_extra: int,
) -> None:
    """``out[target[p, leaf] + extra] += 1`` for every row (partition p = ``which``).
    Targets equal to the sink (``out.size - n_extra``) take no extra offset."""
    n_parts, n_leaves = target.shape
    use_extra = extra is not None and n_extra > 1
    key = which * n_leaves
    key += leaves
    cells = n_parts * n_leaves * n_extra
    if cells <= HISTOGRAM_SLACK * which.size + (1 << 16):  # a histogram, then place its cells
        if use_extra and extra is not None:
            key *= n_extra
            key += extra
            dest = (target.reshape(-1, 1) + np.arange(n_extra, dtype=np.int64)).reshape(-1)
        else:
            dest = target.reshape(-1)
        hist = np.bincount(key, minlength=dest.size)
        nz = np.flatnonzero(hist)
        np.add.at(out, dest[nz], hist[nz])
        return
    idx = target.reshape(-1)[key]
    if use_extra and extra is not None:
        idx += extra
    out += np.bincount(idx, minlength=out.size)


def count_stats(
    state: SharedState, tips: Tips, cls: Codes, sens: Codes, layout: CountLayout
) -> IntArray:
    """Per new partition: totals by sensitive slot and, for every candidate attribute, counts
    by child and sensitive slot; then class counts by child for every new candidate value.

    Right after a specialization the locally largest child of each parent is not read: for
    every attribute but the specialized one its counts are the parent's (kept from the
    previous round) minus its siblings'."""
    w = layout.width
    new = state.new_parts
    newv = state.pvals[new]
    out = np.zeros(layout.size + max(w, state.n_class, 1), dtype=np.int64)  # + a sink
    plan = _usable(tips, new, layout)
    derived = plan.derived if plan is not None else np.zeros(new.size, dtype=bool)
    spec_attr = plan.attr if plan is not None else -1
    if w == 1:
        np.add.at(out, layout.base, tips.sizes(new))  # bases may repeat (DP layout)
    keep = np.flatnonzero(~derived) if derived.any() else None  # partitions read
    kept: dict[bool, list[tuple[Codes, Codes]]] = {}

    def read(every: bool) -> Iterable[tuple[Codes, Codes]]:
        """(rows, partition position in ``new``) of every new partition or of those not
        derived: in memory once (and kept for the next pass), out of core chunk by chunk."""
        every = every or keep is None
        if tips.chunk is None and every in kept:
            return kept[every]
        got: Iterable[tuple[Codes, Codes]]
        if every:
            got = tips.pieces(new, small=True)
        else:
            assert keep is not None
            got = ((r, keep.astype(wh.dtype)[wh]) for r, wh in tips.pieces(new[keep], True))
        if tips.chunk is None:
            got = kept[every] = list(got)
        return got

    if w > 1:
        per = np.zeros(new.size * w, dtype=np.int64)
        for rows, which in read(False):
            per += np.bincount(which * w + np.take(sens, rows), minlength=new.size * w)
        per2 = per.reshape(-1, w)
        per2[derived] = 0
        np.add.at(out, layout.base[:, None] + np.arange(w), per2)
        if plan is not None:
            lens = np.full(new.size, w, dtype=np.int64)
            _derive(out, tips, plan, layout.base, lens, None)
    attrs = [a for a in range(state.m) if (layout.off[:, a] >= 0).any()]
    rest = [a for a in attrs if a != spec_attr]
    groups = [(False, rest), (True, [spec_attr] if spec_attr in attrs else [])]
    if keep is None:
        groups = [(True, attrs)]
    for every, group in groups:
        if not group:
            continue
        for rows, which in read(every):
            s = np.take(sens, rows) if w > 1 else None
            _attrs_counts(out, state, layout, newv, group, rows, which, tips, s)
    for a in attrs:
        if plan is not None and a != spec_attr:
            lens = state.trees[a].nchild[newv[:, a]] * w
            _derive(out, tips, plan, layout.off[:, a], lens, a)
    if layout.classes:
        by_node = {(c.attr, c.node): c.offset for c in layout.classes}
        class_attrs = sorted({c.attr for c in layout.classes})
        bases = {
            a: np.array([by_node.get((a, int(x)), -1) for x in newv[:, a]], dtype=np.int64)
            for a in class_attrs
        }
        for rows, which in read(True):
            c_rows = np.take(cls, rows)
            for a in class_attrs:
                leaves = np.take(tips.leaves[a], rows)
                attr_counts(out, state.trees[a], newv[:, a], bases[a], which, leaves, c_rows,
                            state.n_class)  # fmt: skip
    vec = out[: layout.size]
    tips.retire()
    part_end = layout.classes[0].offset if layout.classes else layout.size
    if np.unique(layout.base).size == layout.base.size:  # one block per partition (LKC)
        blen = np.diff(np.append(layout.base, part_end))
        tips.blocks.add(new, vec, layout.base, blen, layout.off)
    return vec


def _attrs_counts(
    out: IntArray,
    state: SharedState,
    layout: CountLayout,
    newv: IntArray,
    attrs: list[int],
    rows: Codes,
    which: Codes,
    tips: Tips,
    sens: Codes | None,
) -> None:
    """:func:`attr_counts` of every attribute in ``attrs`` over the same rows; in parallel
    threads on many rows (numpy releases the GIL), each into its own vector."""
    w = layout.width

    def one(a: int, dest: IntArray) -> IntArray:
        attr_counts(dest, state.trees[a], newv[:, a], layout.off[:, a], which,
                    np.take(tips.leaves[a], rows), sens, w)  # fmt: skip
        return dest

    if len(attrs) > 1 and rows.size >= threads.PARALLEL_ROWS and threads.workers() > 1:
        size = out.size
        for vec_a in threads.pool().map(lambda a: one(a, np.zeros(size, dtype=np.int64)), attrs):
            out += vec_a
    else:
        for a in attrs:
            one(a, out)


def _usable(tips: Tips, new: IntArray, layout: CountLayout) -> Derivation | None:
    """The derivation plan of the last specialization, if it describes these partitions and
    the parents' counts of every attribute it needs were kept."""
    plan = tips.derivation
    if plan is None or not np.array_equal(plan.new_ids, new) or not plan.derived.any():
        return None
    if int(tips.sizes(new[plan.derived]).sum()) < MIN_DERIVED_ROWS:
        return None  # reading the few rows is cheaper than assembling the blocks
    parents = plan.link[plan.parent_pos[plan.derived]]
    need = layout.off[plan.derived] >= 0
    need[:, plan.attr] = False
    return plan if tips.blocks.has(parents, need) else None


def _derive(
    out: IntArray,
    tips: Tips,
    plan: Derivation,
    starts: IntArray,
    lens: IntArray,
    attr: int | None,
) -> None:
    """``out``'s block of every derived partition = its parent's stored block minus the
    blocks of its siblings.  ``starts``/``lens``: each new partition's block in ``out``
    (-1: none); ``attr``: which stored block of the parents (None: the totals)."""
    has = starts >= 0
    d = np.flatnonzero(plan.derived & has)
    if d.size == 0:
        return
    ppos = plan.parent_pos
    n_link = plan.link.size
    plen = np.zeros(n_link, dtype=np.int64)
    plen[ppos[d]] = lens[d]
    pstart = np.cumsum(plen) - plen
    acc = np.zeros(int(plen.sum()), dtype=np.int64)
    sib = np.flatnonzero(~plan.derived & has & (plen[ppos] > 0))
    if sib.size:
        pos, which = gather(starts[sib], starts[sib] + lens[sib])
        j = pos - starts[sib][which]
        np.add.at(acc, pstart[ppos[sib]][which] + j, out[pos])
    parents = plan.link[ppos[d]]
    vals = tips.blocks.ragged(parents, attr, lens[d])
    dpos, dwhich = gather(starts[d], starts[d] + lens[d])
    jd = dpos - starts[d][dwhich]
    out[dpos] = vals - acc[pstart[ppos[d]][dwhich] + jd]
