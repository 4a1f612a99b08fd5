"""A party of DiffGen with a set-valued predictor: its records and their statistics.

:class:`SetParty` is what the round loop sums over (centralized: one party in a
:class:`fedanon.tds.engine.LocalFederation`; federated: one per hospital behind the secure
sum).  It keeps per record only integer arrays: the relational leaf codes, the class code,
the set's item codes (CSR), the record's partition (``pid``, -1 once its combination was
judged empty) and, per item leaf, the cut node that covers it (``gen``).  Every statistic is
one ``np.bincount`` over a layout of :class:`fedanon.dp.setstate.SetState`; no Python loop
runs over records.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from fedanon.arrays import IntArray
from fedanon.dp.setstate import Layout, SetState
from fedanon.errors import InternalError, ProtocolError
from fedanon.model.tree import AttrTree
from fedanon.tds.state import Phase, Update


@dataclass(frozen=True)
class SetRecords:
    leaves: IntArray  # (m, n) relational leaf codes
    cls: IntArray  # (n,) class codes
    indptr: IntArray  # (n + 1,) CSR offsets of the set's items
    items: IntArray  # item (leaf) codes of the set-valued predictor

    @property
    def n(self) -> int:
        return int(self.cls.size)

    def take(self, lo: int, hi: int) -> SetRecords:
        """Records ``lo`` .. ``hi`` - 1 (a hospital's share of a table, in tests and benches)."""
        a, b = int(self.indptr[lo]), int(self.indptr[hi])
        return SetRecords(
            self.leaves[:, lo:hi], self.cls[lo:hi], self.indptr[lo : hi + 1] - a, self.items[a:b]
        )


class SetParty:
    def __init__(self, state: SetState, rec: SetRecords) -> None:
        self.state = state
        self.rec = rec
        n = rec.n
        sizes = np.diff(rec.indptr)
        self.row_of_item = np.repeat(np.arange(n, dtype=np.int64), sizes)
        self.items = np.asarray(rec.items, dtype=np.int64)
        self.cls = np.asarray(rec.cls, dtype=np.int64)
        self.pid = np.where(sizes > 0, 0, 1).astype(np.int64)  # {root} or {}
        self.gen = np.zeros(state.stree.n_leaves, dtype=np.int64)

    # -- the round loop's party protocol ----------------------------------------------------
    def stats(self, phase: Phase, round_: int, size: int, digest: bytes) -> IntArray:
        st = self.state
        if round_ != st.round:
            raise ProtocolError(f"statistics for round {round_}, state is at {st.round}")
        lay = st.layout(phase)
        if lay.size != size or lay.digest != digest:
            raise ProtocolError("the statistics layout differs from this party's state")
        if phase == Phase.SPLIT:
            return self._split(lay)
        if phase == Phase.COUNTS:
            return self._counts(lay)
        return self._final(lay)

    def apply(self, update: Update) -> None:
        st = self.state
        best = update.best
        combos = None
        if best is not None and best[0] == st.m:
            combos = self._combos([best[1]])
        st.apply(update)
        if best is None:
            return
        a, x = best
        if a < st.m:
            self._move_relational(a, x)
        else:
            assert combos is not None
            self._move_set(x, combos)

    def keep_segment(self) -> None:
        return None

    # -- statistics ---------------------------------------------------------------------------
    def _alive(self) -> IntArray:
        return np.flatnonzero(self.pid >= 0)

    def _relational_blocks(
        self, lay: Layout
    ) -> Iterator[tuple[int, AttrTree, IntArray, IntArray, IntArray]]:
        """Per relational attribute with blocks in ``lay``: ``(a, tree, off, r, x)`` -- the
        block offset per cut node (-1 where none), the live records under a block's node and
        that node."""
        st = self.state
        rows = self._alive()
        prel = st.prel_array()[self.pid[rows]]
        for a, tree in enumerate(st.trees):
            blocks = [b for b in lay.blocks if b.attr == a]
            if not blocks:
                continue
            off = np.full(len(tree), -1, dtype=np.int64)
            for b in blocks:
                off[b.node] = b.offset
            nodes = prel[:, a]
            sel = off[nodes] >= 0
            yield a, tree, off, rows[sel], nodes[sel]

    def _split(self, lay: Layout) -> IntArray:
        c = self.state.n_class
        out = np.zeros(lay.size, dtype=np.int64)
        for a, tree, off, r, x in self._relational_blocks(lay):
            leaf = self.rec.leaves[a][r].astype(np.int64)
            bins = leaf - np.asarray(tree.leaf_lo, dtype=np.int64)[x]
            out += np.bincount(off[x] + bins * c + self.cls[r], minlength=lay.size)
        return out

    def _counts(self, lay: Layout) -> IntArray:
        st, c = self.state, self.state.n_class
        out = np.zeros(lay.size, dtype=np.int64)
        for a, tree, off, r, x in self._relational_blocks(lay):
            child = tree.child_of(x, self.rec.leaves[a][r].astype(np.int64))
            idx = off[x] + np.asarray(tree.slot, dtype=np.int64)[child] * c + self.cls[r]
            out += np.bincount(idx, minlength=lay.size)
        sblocks = [b for b in lay.blocks if b.attr == st.m]
        if sblocks:
            nodes = [b.node for b in sblocks]
            bi, row, combo = self._combos(nodes)
            n_part = len(st.prel)
            pos = np.full((len(sblocks), n_part), -1, dtype=np.int64)
            for i, b in enumerate(sblocks):
                pos[i, list(b.link)] = np.arange(len(b.link))
            p = pos[bi, self.pid[row]]
            if p.size and int(p.min()) < 0:
                raise InternalError("a record's codes disagree with its partition (a bug)")
            k = np.asarray([st.stree.n_combos(v) for v in nodes], dtype=np.int64)
            base = np.asarray([b.offset for b in sblocks], dtype=np.int64)
            idx = base[bi] + ((p * k[bi] + combo) * c) + self.cls[row]
            out += np.bincount(idx, minlength=lay.size)
        return out

    def _final(self, lay: Layout) -> IntArray:
        c = self.state.n_class
        pos = np.full(len(self.state.prel), -1, dtype=np.int64)
        alive = [b.node for b in lay.blocks]
        pos[alive] = np.arange(len(alive))
        rows = self._alive()
        return np.bincount(pos[self.pid[rows]] * c + self.cls[rows], minlength=lay.size)

    def _combos(self, nodes: list[int]) -> tuple[IntArray, IntArray, IntArray]:
        """For the set-valued values ``nodes`` of the cut: (index into ``nodes``, record,
        combination) of every kept record that holds the value; combination 0 {L}, 1 {R},
        2 {L, R} (0 for a value with one child)."""
        st = self.state.stree
        lookup = np.full(len(st), -1, dtype=np.int64)
        lookup[nodes] = np.arange(len(nodes))
        g = self.gen[self.items]
        bi = lookup[g]
        keep = (bi >= 0) & (self.pid[self.row_of_item] >= 0)
        bi, g, leaf, row = bi[keep], g[keep], self.items[keep], self.row_of_item[keep]
        child = st._anc[st.depth[g] + 1, leaf]
        first = np.asarray([st.children[v][0] for v in nodes], dtype=np.int64)
        bit = np.where(child == first[bi], 1, 2).astype(np.int64)
        key = bi * max(self.rec.n, 1) + row
        order = np.argsort(key, kind="stable")
        key, bit = key[order], bit[order]
        if key.size == 0:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        bits = np.bitwise_or.reduceat(bit, starts)
        ukey = key[starts]
        n = max(self.rec.n, 1)
        single = np.asarray([len(st.children[v]) == 1 for v in nodes], dtype=bool)
        u_bi = ukey // n
        combo = np.where(single[u_bi], 0, bits - 1)
        return u_bi, ukey % n, combo

    # -- moving records ----------------------------------------------------------------------
    def _moves(self, width: int) -> IntArray:
        st = self.state
        table = np.full((len(st.prel), width), -1, dtype=np.int64)
        for (p, slot), new in st.moved.items():
            table[p, slot] = new
        return table

    def _move_relational(self, a: int, x: int) -> None:
        st = self.state
        tree = st.trees[a]
        rows = self._alive()
        rows = rows[st.prel_array()[self.pid[rows], a] == x]
        child = tree.child_of(np.full(rows.size, x), self.rec.leaves[a][rows].astype(np.int64))
        slot = np.asarray(tree.slot, dtype=np.int64)[child]
        self.pid[rows] = self._moves(len(tree.children[x]))[self.pid[rows], slot]

    def _move_set(self, v: int, combos: tuple[IntArray, IntArray, IntArray]) -> None:
        st = self.state.stree
        _, row, combo = combos
        self.pid[row] = self._moves(3)[self.pid[row], combo]
        lo, hi = int(st.leaf_lo[v]), int(st.leaf_hi[v])
        self.gen[lo:hi] = st._anc[st.depth[v] + 1, np.arange(lo, hi)]
