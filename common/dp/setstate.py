"""The shared state of DiffGen with a set-valued predictor (docs/dp-diagnosis-codes.md).

The leader and every party hold a replica; it changes only through :meth:`SetState.apply` of
the leader's :class:`~fedanon.tds.state.Update` (split points, the selected value, the mask of
kept combinations), so every statistics layout below is a function of the spec and of earlier
outputs of the mechanism -- the same at every hospital, never of one table.

A partition is a relational value per relational predictor (``prel``) and a set of cut nodes of
the set-valued predictor (``pset``).  Initially there are two: ``{root}`` and ``{}`` (records
without codes).  Attribute index ``m`` (= the number of relational predictors) denotes the
set-valued predictor in candidates and updates.

Layouts (each ends in ``n_class`` class cells):

* SPLIT: per numeric interval to split (attribute order, node id order): bins x classes;
* COUNTS: per candidate (attribute order; values in id order): relational -> children x
  classes over every record with that value; set-valued v -> (partitions on Link_v in id
  order) x (combinations of v) x classes;
* UNION: the alive partitions (id order) x classes -- the released counts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray
from fedanon.dp.settree import SetTree
from fedanon.errors import ProtocolError
from fedanon.model.tree import AttrTree
from fedanon.tds.state import Phase, Update

Mask = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class Block:
    attr: int  # m: the set-valued predictor
    node: int
    offset: int
    rows: int  # children / bins, or link partitions x combinations
    link: tuple[int, ...] = ()  # set-valued: the partitions on Link_node, ascending


@dataclass(frozen=True)
class Layout:
    phase: Phase
    blocks: tuple[Block, ...]
    size: int
    digest: bytes


class SetState:
    def __init__(self, trees: list[AttrTree], stree: SetTree, n_class: int) -> None:
        self.trees = trees
        self.stree = stree
        self.m = len(trees)
        self.n_class = n_class
        self.round = 0
        self.ended = False  # the leader's end instruction was applied: only the final counts
        self.in_cut = [np.zeros(len(t), dtype=bool) for t in trees]
        for c in self.in_cut:
            c[0] = True
        self.s_in_cut = np.zeros(len(stree), dtype=bool)
        self.s_in_cut[0] = True
        roots = [0] * self.m
        self.prel: list[list[int]] = [list(roots), list(roots)]
        self.pset: list[frozenset[int]] = [frozenset({0}), frozenset()]
        self.alive: list[bool] = [True, True]
        # after each apply: (old partition, child slot or combination) -> new partition (-1:
        # dropped), for the parties' records
        self.moved: dict[tuple[int, int], int] = {}

    # -- partitions --------------------------------------------------------------------------
    def alive_ids(self) -> IntArray:
        return np.flatnonzero(np.asarray(self.alive, dtype=bool))

    def prel_array(self) -> IntArray:
        """(partitions, m) relational values; rows of dropped partitions included."""
        return np.asarray(self.prel, dtype=np.int64).reshape(len(self.prel), self.m)

    def link(self, v: int) -> tuple[int, ...]:
        return tuple(p for p in self.alive_ids().tolist() if v in self.pset[p])

    def _new(self, rel: list[int], sset: frozenset[int]) -> int:
        self.prel.append(rel)
        self.pset.append(sset)
        self.alive.append(True)
        return len(self.prel) - 1

    # -- layouts -----------------------------------------------------------------------------
    def _layout(self, phase: Phase, blocks: list[Block]) -> Layout:
        size = sum(b.rows for b in blocks) * self.n_class
        h = hashlib.sha256(f"fedanon-dp-set-v1 {int(phase)} {self.round} {size}".encode())
        for b in blocks:
            h.update(f"{b.attr},{b.node},{b.rows};".encode())
        return Layout(phase, tuple(blocks), size, h.digest())

    def split_layout(self) -> Layout:
        blocks: list[Block] = []
        off = 0
        for a, tree in enumerate(self.trees):
            for x in np.flatnonzero(self.in_cut[a]).tolist():
                if tree.needs_split(x) and tree.n_bins(x) > 1:
                    blocks.append(Block(a, x, off, tree.n_bins(x)))
                    off += tree.n_bins(x) * self.n_class
        return self._layout(Phase.SPLIT, blocks)

    def candidates(self) -> list[tuple[int, int]]:
        """Every value of the cut that has children, relational then set-valued (a set-valued
        value only while some kept partition holds it)."""
        out: list[tuple[int, int]] = []
        for a, tree in enumerate(self.trees):
            for x in np.flatnonzero(self.in_cut[a]).tolist():
                if tree.children[x]:
                    out.append((a, x))
        held = set().union(*(self.pset[p] for p in self.alive_ids().tolist()))
        for v in np.flatnonzero(self.s_in_cut).tolist():
            if self.stree.children[v] and v in held:
                out.append((self.m, v))
        return out

    def counts_layout(self) -> Layout:
        blocks: list[Block] = []
        off = 0
        for a, x in self.candidates():
            link: tuple[int, ...] = ()
            if a < self.m:
                rows = len(self.trees[a].children[x])
            else:
                link = self.link(x)
                rows = len(link) * self.stree.n_combos(x)
            blocks.append(Block(a, x, off, rows, link))
            off += rows * self.n_class
        return self._layout(Phase.COUNTS, blocks)

    def final_layout(self) -> Layout:
        return self._layout(
            Phase.UNION, [Block(-1, int(p), 0, 1) for p in self.alive_ids().tolist()]
        )

    def layout(self, phase: Phase) -> Layout:
        if phase == Phase.SPLIT:
            return self.split_layout()
        if phase == Phase.COUNTS:
            return self.counts_layout()
        if phase == Phase.UNION:
            return self.final_layout()
        raise ProtocolError(f"phase {int(phase)} is not a phase of a DiffGen run with codes")

    # -- updates -----------------------------------------------------------------------------
    def groups_after(self, a: int, x: int) -> int:
        """Kept partitions after specializing (a, x) at most (all combinations kept)."""
        n = int(self.alive_ids().size)
        if a < self.m:
            k = int(np.count_nonzero(self.prel_array()[self.alive_ids(), a] == x))
            return n + k * (len(self.trees[a].children[x]) - 1)
        return n + len(self.link(x)) * (self.stree.n_combos(x) - 1)

    def apply(self, update: Update) -> None:
        if update.round != self.round:
            raise ProtocolError(f"update for round {update.round}, state is at {self.round}")
        if self.ended:
            raise ProtocolError("update after end")
        if update.union is not None:
            raise ProtocolError("a DP run has no record union (union sketch parameters refused)")
        if update.end and (update.splits or update.best is not None):
            raise ProtocolError("the end instruction carries no decision")
        for a, x, at in update.splits:
            if not (0 <= a < self.m) or not self.trees[a].needs_split(x) or not self.in_cut[a][x]:
                raise ProtocolError(f"split of ({a}, {x}) is not pending")
            self.trees[a].split(x, at)
            grown = np.zeros(len(self.trees[a]), dtype=bool)
            grown[: self.in_cut[a].size] = self.in_cut[a]
            self.in_cut[a] = grown
        self.moved = {}
        if update.end:
            self.ended = True
            return
        if update.best is None:
            return
        a, x = update.best
        if (a, x) not in self.candidates():
            raise ProtocolError(f"({a}, {x}) is not a candidate")
        mask = np.frombuffer(update.children_mask, dtype=np.uint8)
        if a < self.m:
            self._relational(a, x, mask)
        else:
            self._set(x, mask)
        self.round += 1

    def _relational(self, a: int, x: int, mask: Mask) -> None:
        kids = self.trees[a].children[x]
        link = [p for p in self.alive_ids().tolist() if self.prel[p][a] == x]
        if mask.size != len(link) * len(kids) or not bool(np.all(mask == 1)):
            raise ProtocolError("a relational specialization creates every child partition")
        for p in link:
            self.alive[p] = False
            for slot, c in enumerate(kids):
                rel = list(self.prel[p])
                rel[a] = c
                self.moved[(p, slot)] = self._new(rel, self.pset[p])
        self.in_cut[a][x] = False
        self.in_cut[a][kids] = True

    def _set(self, v: int, mask: Mask) -> None:
        st = self.stree
        link = self.link(v)
        k = st.n_combos(v)
        if mask.size != len(link) * k or not bool(np.all(mask <= 1)):
            raise ProtocolError(f"combination mask of {mask.size} entries, needs {len(link) * k}")
        for i, p in enumerate(link):
            self.alive[p] = False
            rest = self.pset[p] - {v}
            for c in range(k):
                if mask[i * k + c]:
                    kids = rest | set(st.combo_children(v, c))
                    self.moved[(p, c)] = self._new(list(self.prel[p]), kids)
                else:
                    self.moved[(p, c)] = -1
        self.s_in_cut[v] = False
        self.s_in_cut[st.children[v]] = True

    def cut(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for a, tree in enumerate(self.trees):
            nodes = sorted(np.flatnonzero(self.in_cut[a]).tolist(), key=tree.order_key)
            out[tree.name] = [tree.labels[x] for x in nodes]
        st = self.stree
        nodes = sorted(np.flatnonzero(self.s_in_cut).tolist(), key=st.order_key)
        out[st.name] = [st.labels[x] for x in nodes]
        return out
