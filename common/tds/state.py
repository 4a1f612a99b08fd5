"""Shared state of a run: the cut, the global partitions, and the layout of statistics.

Every party and the leader hold an identical replica.  It changes only through
:meth:`SharedState.apply`, fed with the same :class:`Update` messages in the same order, so
the layout of every statistics vector (a pure function of this state) is identical
everywhere and vectors of several parties can be summed element-wise.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from fedanon.arrays import BoolArray, IntArray, grown
from fedanon.errors import ProtocolError
from fedanon.model.registry import score_factory
from fedanon.model.tree import AttrTree


@runtime_checkable
class StatsLayout(Protocol):
    """What the shared state needs from the utility score: the layout of the statistics.

    SPLIT phase, per pending numeric value with ``n_bins`` admissible bins and ``n_parts``
    partitions on its link: :meth:`split_width` cells; a record of partition i in bin j
    counts into cell ``split_cells(...)[i, j]`` (plus its class code when
    :attr:`split_classes`).  COUNTS phase: the privacy model's per-partition child counts
    always; with :attr:`child_classes`, a children x classes block per new candidate value as
    well.  (The rest of the score is :class:`fedanon.tds.ports.UtilityScore`.)
    """

    name: str
    split_classes: bool  # SPLIT cells are split further by class
    child_classes: bool  # COUNTS carries a children x classes block per new candidate

    def split_width(self, n_bins: int, n_parts: int, n_class: int) -> int:
        """Cells of one pending numeric value in the SPLIT vector."""
        ...

    def split_cells(self, n_bins: int, n_parts: int, n_class: int) -> IntArray:
        """(n_parts or 1, n_bins) cell of each (partition, bin), relative to the value's
        offset (broadcast over the partitions when it has one row)."""
        ...


class UnionParams(Protocol):
    """What an :class:`Update` for the union carries (:class:`fedanon.union.params.
    SketchParams`: layout and key of the union sketch); the engine does not read it."""

    @property
    def digest(self) -> bytes: ...


class Phase(IntEnum):
    SPLIT = 1  # class / partition histograms to choose numeric split points
    COUNTS = 2  # per-partition child counts for validity and scores
    UNION = 3  # counts per released record, when every released column is enumerable
    UNION_LENGTHS = 4  # sketch union: released records per length class
    UNION_SKETCH = 5  # sketch union: the IBLT sketch of the released records


@dataclass(frozen=True)
class Update:
    """What the leader announces after a phase (the paper's *Instruction* / *End*).

    ``splits``: (attr, node, first bin of right child or NO_SPLIT); ``invalid``: (attr, node)
    candidates that can never be specialized; ``best``: (attr, node) to specialize;
    ``children_mask``: for every partition on Link_best (ascending id) and child slot, 1 if
    that child partition is non-empty in the union of all tables.  ``union``: not a
    decision but the layout and key of the union sketch summed in round ``round`` (sent
    after the end; a party keeps it for the sketch, :meth:`SharedState.apply` refuses it).
    """

    round: int
    splits: tuple[tuple[int, int, int], ...] = ()
    invalid: tuple[tuple[int, int], ...] = ()
    best: tuple[int, int] | None = None
    children_mask: bytes = b""
    end: bool = False
    union: UnionParams | None = None

    def __post_init__(self) -> None:
        if self.round < 0:
            raise ProtocolError("negative round")
        if self.union is not None and (
            self.splits or self.invalid or self.best is not None or self.end
        ):
            raise ProtocolError("union sketch parameters together with a decision")
        if self.best is None and self.children_mask:
            raise ProtocolError("children_mask without best")


@dataclass(frozen=True)
class SplitEntry:
    attr: int
    node: int
    offset: int
    n_bins: int
    parts: IntArray  # positions in new_parts of the partitions on Link_node


@dataclass(frozen=True)
class SplitLayout:
    entries: tuple[SplitEntry, ...]
    size: int
    digest: bytes


@dataclass(frozen=True)
class ClassEntry:
    attr: int
    node: int
    offset: int
    n_child: int


@dataclass(frozen=True)
class CountLayout:
    """Block i (new partition i): W totals by sensitive slot, then for each candidate
    attribute a (``off[i, a] >= 0``) n_child x W counts; then the class blocks."""

    width: int
    base: IntArray
    off: IntArray
    classes: tuple[ClassEntry, ...]
    size: int
    digest: bytes = field(repr=False)


@dataclass(frozen=True)
class Applied:
    """How one specialization changed the partitions (what TIPS needs to follow)."""

    attr: int
    link: IntArray  # parent partitions, ascending
    new_ids: IntArray  # created partitions, ascending
    new_parent_pos: IntArray  # index into link of each new partition's parent
    new_slot: IntArray  # child slot of each new partition


class SharedState:
    """``n_sens``: COUNTS cells per count beyond the number of records (the privacy model's
    width - 1: one per sensitive value for LKC); ``score``: the utility score, or its
    registered name -- it fixes the layout of the statistics."""

    def __init__(
        self, trees: list[AttrTree], n_class: int, n_sens: int, score: str | StatsLayout
    ) -> None:
        self.trees = trees
        self.m = len(trees)
        self.n_class = n_class
        self.width = 1 + n_sens
        self.scorer: StatsLayout = score_factory(score)() if isinstance(score, str) else score
        self.score = self.scorer.name
        # node ids in the smallest type that holds every node a tree can grow (memory per
        # partition ever created: a long run creates many more than it keeps)
        most = max((2 * t.n_leaves if t.dynamic else len(t) for t in trees), default=1)
        node_dtype = np.uint16 if most <= 1 << 16 else np.int32
        self.pvals: npt.NDArray[Any] = np.zeros((16, self.m), dtype=node_dtype)
        self.alive = np.zeros(16, dtype=bool)
        self.alive[0] = True
        self.n_parts = 1
        self.new_parts = np.array([0], dtype=np.int64)
        self.new_values: list[tuple[int, int]] = [(a, 0) for a in range(self.m)]
        self.in_cut = [np.zeros(len(t), dtype=bool) for t in trees]
        self.invalid = [np.zeros(len(t), dtype=bool) for t in trees]
        for cut in self.in_cut:
            cut[0] = True
        self.active: set[int] = set()
        self.round = 0
        self.last_attr: int | None = None
        self.ended = False
        # derived from the fields above, computed once per change (apply() clears them)
        self._count_layout: CountLayout | None = None
        self._alive_ids: IntArray | None = None

    # queries ------------------------------------------------------------------------------
    def candidate_mask(self, a: int) -> BoolArray:
        mask = self.in_cut[a] & ~self.invalid[a] & (self.trees[a].nchild > 0)
        return np.asarray(mask, dtype=bool)

    def is_candidate(self, a: int, node: int) -> bool:
        return bool(self.candidate_mask(a)[node])

    def pending_splits(self) -> list[tuple[int, int]]:
        return [
            (a, x)
            for a, x in self.new_values
            if self.trees[a].needs_split(x) and not self.invalid[a][x]
        ]

    def alive_ids(self) -> IntArray:
        """Ids of the alive partitions, ascending (read-only; kept until the next change)."""
        if self._alive_ids is None:
            ids = np.flatnonzero(self.alive[: self.n_parts]).astype(np.int64)
            ids.setflags(write=False)
            self._alive_ids = ids
        return self._alive_ids

    def split_layout(self) -> SplitLayout:
        entries = []
        offset = 0
        newv = self.pvals[self.new_parts]
        for a, x in self.pending_splits():
            nb = self.trees[a].n_bins(x)
            parts = np.flatnonzero(newv[:, a] == x).astype(np.int64)
            entries.append(SplitEntry(a, x, offset, nb, parts))
            offset += self.scorer.split_width(nb, len(parts), self.n_class)
        h = hashlib.sha256(b"split%d" % self.round)
        for e in entries:
            h.update(np.array([e.attr, e.node, e.offset, e.n_bins, len(e.parts)]).tobytes())
        return SplitLayout(tuple(entries), offset, h.digest())

    def count_layout(self) -> CountLayout:
        """The COUNTS layout of this round (computed once per change of the state: the
        round loop, the party and the decider all ask for it)."""
        if self._count_layout is None:
            self._count_layout = self._make_count_layout()
        return self._count_layout

    def _make_count_layout(self) -> CountLayout:
        w = self.width
        newv = self.pvals[self.new_parts]
        sizes = np.zeros(newv.shape, dtype=np.int64)
        for a in range(self.m):
            cand = self.candidate_mask(a)[newv[:, a]]
            sizes[:, a] = np.where(cand, self.trees[a].nchild[newv[:, a]] * w, 0)
        block = w + sizes.sum(axis=1)
        base = np.concatenate(([0], np.cumsum(block)[:-1])).astype(np.int64)
        inner = np.cumsum(sizes, axis=1) - sizes
        off = np.where(sizes > 0, base[:, None] + w + inner, -1)
        size = int(block.sum())
        classes = []
        if self.scorer.child_classes:
            for a, x in self.new_values:
                if self.is_candidate(a, x):
                    nc = int(self.trees[a].nchild[x])
                    classes.append(ClassEntry(a, x, size, nc))
                    size += nc * self.n_class
        h = hashlib.sha256(b"counts%d" % self.round)
        h.update(self.new_parts.tobytes())
        h.update(off.tobytes())
        for c in classes:
            h.update(np.array([c.attr, c.node, c.offset, c.n_child]).tobytes())
        return CountLayout(w, base, off, tuple(classes), size, h.digest())

    # changes ------------------------------------------------------------------------------
    def apply(self, update: Update) -> Applied | None:
        if update.union is not None:
            raise ProtocolError("union sketch parameters are no change of the shared state")
        if self.ended:
            raise ProtocolError("update after end")
        self._count_layout = None
        self._alive_ids = None
        for a, x, at in update.splits:
            self._check_node(a, x)
            tree = self.trees[a]
            try:
                tree.split(x, at)
            except ValueError as exc:
                raise ProtocolError(str(exc)) from exc
            grow = len(tree) - len(self.in_cut[a])
            if grow:
                self.in_cut[a] = np.concatenate((self.in_cut[a], np.zeros(grow, dtype=bool)))
                self.invalid[a] = np.concatenate((self.invalid[a], np.zeros(grow, dtype=bool)))
        for a, x in update.invalid:
            self._check_node(a, x)
            self.invalid[a][x] = True
        if update.end:
            self.ended = True
            return None
        if update.best is None:
            return None
        return self._specialize(update)

    def _check_node(self, a: int, x: int) -> None:
        if not (0 <= a < self.m and 0 <= x < len(self.trees[a])):
            raise ProtocolError(f"unknown node {x} of attribute {a}")

    def _specialize(self, update: Update) -> Applied:
        assert update.best is not None
        b, x = update.best
        self._check_node(b, x)
        if not self.is_candidate(b, x):
            raise ProtocolError(f"best ({b}, {x}) is not a valid candidate")
        tree = self.trees[b]
        kids = np.asarray(tree.children[x], dtype=np.int64)
        ids = self.alive_ids()
        link = ids[self.pvals[ids, b] == x]
        mask = np.frombuffer(update.children_mask, dtype=np.uint8)
        if mask.size != link.size * kids.size or (mask.size > 0 and int(mask.max()) > 1):
            raise ProtocolError("children mask does not match the partitions on Link_best")
        grid = mask.reshape(link.size, kids.size).astype(bool)
        parent_pos, slot = np.nonzero(grid)
        n_new = parent_pos.size
        first = self.n_parts
        self._reserve(first + n_new)
        rows = self.pvals[link[parent_pos]].copy()
        rows[:, b] = kids[slot]
        self.pvals[first : first + n_new] = rows
        self.alive[link] = False
        self.alive[first : first + n_new] = True
        self.n_parts = first + n_new
        self._alive_ids = None  # read above, before this change
        self.new_parts = np.arange(first, first + n_new, dtype=np.int64)
        self.in_cut[b][x] = False
        self.in_cut[b][kids] = True
        self.new_values = [(b, int(c)) for c in kids]
        self.active.add(b)
        self.last_attr = b
        self.round += 1
        return Applied(b, link, self.new_parts, parent_pos.astype(np.int64), slot.astype(np.int64))

    def _reserve(self, n: int) -> None:
        self.pvals, self.alive = grown(self.pvals, n), grown(self.alive, n, False)
