"""ArtUC Steps 2-17: suppress small groups, form k-record clusters by NCP, attach the
leftovers, generalize (Definition 2), merge clusters with equal generalized demographics.

The seed grows each cluster from a random record by repeatedly adding the record of the
group that least increases the cluster's NCP: quadratic in the group size.  Here the records
of a group are sorted along a Z-order curve of their demographics and cut into windows of
``window`` consecutive records (at least 4k, rounded down to a multiple of k); inside every
window the seed's greedy runs as written (seed = first free record of the window, then k-1
times the free record of the window with the least NCP of the grown cluster).  All windows
advance in lockstep, so each greedy step is one vectorized operation over the whole dataset.
The at most k-1 records of a group left over (Steps 11-14) each join the cluster of their
group whose NCP (summed over its records) grows least.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedanon.arrays import IntArray
from fedanon.kkm.demo import Demographics


@dataclass(frozen=True)
class Clusters:
    """A partition of the kept records into clusters (cluster ids 0..n-1)."""

    label: IntArray  # per record: its cluster, -1 = suppressed with its group (Step 2)
    group: IntArray  # per cluster: its group (utility constraint)
    lo: tuple[IntArray, ...]  # per attribute, per cluster: generalized value as key pair
    hi: tuple[IntArray, ...]
    order: IntArray  # per cluster: position along the Z-order curve (for neighbour search)

    @property
    def n(self) -> int:
        return int(self.group.size)

    def sizes(self) -> IntArray:
        kept = self.label[self.label >= 0]
        return np.bincount(kept, minlength=self.n).astype(np.int64)


def form_clusters(demo: Demographics, group: IntArray, k: int, window: int) -> Clusters:
    n = group.size
    label = np.full(n, -1, dtype=np.int64)
    gsize = np.bincount(group[group >= 0]) if (group >= 0).any() else np.zeros(0, np.int64)
    keep = (group >= 0) & (gsize[np.maximum(group, 0)] >= k) if gsize.size else group >= 0
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        empty = tuple(np.zeros(0, dtype=np.int64) for _ in demo.attrs)
        return Clusters(label, np.zeros(0, np.int64), empty, empty, np.zeros(0, np.int64))
    z = demo.morton(rows)
    rows = rows[np.lexsort((z, group[rows]))]
    width = max(window, 4 * k) // k * k  # at least 4 clusters to choose among per window
    blocks = _blocks(group[rows], width)  # (n_blocks, width) positions into rows, -1 = pad
    idx = np.where(blocks >= 0, rows[np.maximum(blocks, 0)], -1)
    blab = _greedy(demo, idx, k)  # (n_blocks, width) cluster number, -1 = leftover
    flat_idx, flat_lab = idx.ravel(), blab.ravel()
    label[flat_idx[flat_lab >= 0]] = flat_lab[flat_lab >= 0]
    n_cl = int(flat_lab.max()) + 1 if (flat_lab >= 0).any() else 0
    cgroup = np.zeros(n_cl, dtype=np.int64)
    cgroup[label[rows][label[rows] >= 0]] = group[rows][label[rows] >= 0]
    left = flat_idx[(flat_lab < 0) & (flat_idx >= 0)]
    _attach(demo, label, cgroup, left, group)
    lo, hi = _bounds(demo, label, n_cl)
    pos = np.full(n_cl, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(pos, label[rows], np.arange(rows.size, dtype=np.int64))
    return _merge_equal(Clusters(label, cgroup, lo, hi, pos), demo)


def _blocks(gsorted: IntArray, width: int) -> IntArray:
    """Cut each group's run of positions into windows of ``width``; pad with -1."""
    n = gsorted.size
    starts = np.flatnonzero(np.r_[True, gsorted[1:] != gsorted[:-1]])
    run_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    within = np.arange(n) - run_start
    blocks_per = -(-np.diff(np.r_[starts, n]) // width)
    offset = np.repeat(np.r_[0, np.cumsum(blocks_per)[:-1]], np.diff(np.r_[starts, n]))
    block = offset + within // width
    out = np.full((int(blocks_per.sum()), width), -1, dtype=np.int64)
    out[block, within % width] = np.arange(n)
    return out


def _greedy(demo: Demographics, idx: IntArray, k: int) -> IntArray:
    """The seed's Steps 4-10 inside every window, all windows at once."""
    nb, width = idx.shape
    free = idx >= 0
    lab = np.full((nb, width), -1, dtype=np.int64)
    keys = [np.where(idx >= 0, a.keys[np.maximum(idx, 0)], 0) for a in demo.attrs]
    rows = np.arange(nb)
    for j in range(width // k):
        active = free.sum(axis=1) >= k
        if not active.any():
            break
        act = rows[active]
        seed = np.argmax(free[act], axis=1)
        cid = act * (width // k) + j
        lab[act, seed] = cid
        free[act, seed] = False
        lo = [kk[act, seed] for kk in keys]
        hi = [kk[act, seed] for kk in keys]
        for _ in range(k - 1):
            cost = np.zeros((act.size, width), dtype=np.float64)
            new_lo = [np.minimum(lo_a[:, None], kk[act]) for lo_a, kk in zip(lo, keys, strict=True)]
            new_hi = [np.maximum(hi_a[:, None], kk[act]) for hi_a, kk in zip(hi, keys, strict=True)]
            for a, nl, nh in zip(demo.attrs, new_lo, new_hi, strict=True):
                cost += a.weight * a.ncp(nl, nh)
            cost[~free[act]] = np.inf
            pick = np.argmin(cost, axis=1)
            lab[act, pick] = cid
            free[act, pick] = False
            lo = [nl[np.arange(act.size), pick] for nl in new_lo]
            hi = [nh[np.arange(act.size), pick] for nh in new_hi]
    # renumber cluster ids densely, in window order
    used = np.unique(lab[lab >= 0])
    remap = np.full(int(lab.max()) + 2 if lab.size else 1, -1, dtype=np.int64)
    remap[used] = np.arange(used.size)
    return np.where(lab >= 0, remap[np.maximum(lab, 0)], -1)


def _bounds(
    demo: Demographics, label: IntArray, n_cl: int
) -> tuple[tuple[IntArray, ...], tuple[IntArray, ...]]:
    rows = np.flatnonzero(label >= 0)
    lo, hi = [], []
    for a in demo.attrs:
        big = np.iinfo(np.int64).max
        lo_a = np.full(n_cl, big, dtype=np.int64)
        hi_a = np.full(n_cl, -1, dtype=np.int64)
        np.minimum.at(lo_a, label[rows], a.keys[rows])
        np.maximum.at(hi_a, label[rows], a.keys[rows])
        lo.append(lo_a)
        hi.append(hi_a)
    return tuple(lo), tuple(hi)


def _attach(
    demo: Demographics, label: IntArray, cgroup: IntArray, left: IntArray, group: IntArray
) -> None:
    """Steps 11-14: each leftover record joins the cluster of its group whose total NCP
    grows least (sizes and bounds updated after every record)."""
    if left.size == 0:
        return
    n_cl = cgroup.size
    lo, hi = _bounds(demo, label, n_cl)
    size = np.bincount(label[label >= 0], minlength=n_cl).astype(np.float64)
    for r in left.tolist():
        cand = np.flatnonzero(cgroup == group[r])
        before = size[cand] * demo.record_ncp([x[cand] for x in lo], [x[cand] for x in hi])
        nl = [np.minimum(x[cand], a.keys[r]) for x, a in zip(lo, demo.attrs, strict=True)]
        nh = [np.maximum(x[cand], a.keys[r]) for x, a in zip(hi, demo.attrs, strict=True)]
        after = (size[cand] + 1) * demo.record_ncp(nl, nh)
        best = int(np.argmin(after - before))
        c = int(cand[best])
        label[r] = c
        size[c] += 1
        for x, v in zip(lo, nl, strict=True):
            x[c] = v[best]
        for x, v in zip(hi, nh, strict=True):
            x[c] = v[best]


def _merge_equal(cl: Clusters, demo: Demographics) -> Clusters:
    """Step 17: clusters of one group with the same generalized demographics become one."""
    if cl.n == 0:
        return cl
    sig = [cl.group]
    for attr, c_lo, c_hi in zip(demo.attrs, cl.lo, cl.hi, strict=True):
        if attr.numeric:
            sig += [c_lo, c_hi]
        else:
            assert attr.tree is not None
            sig.append(attr.tree.lca(c_lo, c_hi))  # the generalized value is the node
    _, first, inv = np.unique(np.stack(sig, axis=1), axis=0, return_index=True, return_inverse=True)
    inv = inv.ravel()
    # keep the Z-order of the first cluster of each class
    rank = np.argsort(np.argsort(cl.order[first], kind="stable"), kind="stable")
    new_of_old = rank[inv]
    m = first.size
    label = np.where(cl.label >= 0, new_of_old[np.maximum(cl.label, 0)], -1)
    lo = tuple(np.full(m, np.iinfo(np.int64).max, dtype=np.int64) for _ in cl.lo)
    hi = tuple(np.full(m, -1, dtype=np.int64) for _ in cl.hi)
    for i in range(len(cl.lo)):
        np.minimum.at(lo[i], new_of_old, cl.lo[i])
        np.maximum.at(hi[i], new_of_old, cl.hi[i])
    group = np.zeros(m, dtype=np.int64)
    group[new_of_old] = cl.group
    order = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(order, new_of_old, cl.order)
    return Clusters(label, group, lo, hi, order)
