"""The run-time tree of one quasi-identifier: a static taxonomy or a growing binary one.

Both kinds answer the same questions with integer arrays: the children of a node, and for a
batch of (node, leaf code) pairs the child of the node that covers each leaf.  For numeric
attributes with dynamic splits the leaves are the admissible bins ``[min + i*step,
min + (i+1)*step)`` and a node is a bin range; its split point is decided once, when the node
enters the cut (the same on every party, from global statistics).
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np

from fedanon.arrays import IntArray
from fedanon.model.taxonomy import Taxonomy

UNDECIDED = -1
NO_SPLIT = -2


def as_written(x: float) -> Decimal:
    """A spec's number as the decimal it wrote (its shortest repr: 0.1, not 0.1000...0555)."""
    return Decimal(repr(float(x)))


def bin_edge(lo: float, step: float, i: int) -> Decimal:
    """The edge ``lo + i*step`` of the admissible bins, exactly, as the decimals the spec wrote
    (7 * 0.1 is 0.7, not 0.7000000000000001)."""
    return as_written(lo) + i * as_written(step)


def format_number(x: float | Decimal) -> str:
    """A bin edge in a label: every digit it has (``1000000021.5``, not the 10 significant
    digits ``1000000022``), without an exponent (``0.00005``, not ``5e-05``)."""
    d = x if isinstance(x, Decimal) else as_written(x)
    if d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


class AttrTree:
    """Mutable only through :meth:`split` (dynamic numeric trees); node ids never change."""

    def __init__(
        self,
        name: str,
        labels: list[str],
        parent: list[int],
        leaf_lo: list[int],
        leaf_hi: list[int],
        n_leaves: int,
        dynamic: bool,
        domain: tuple[float, float] = (0.0, 0.0),
        step: float = 1.0,
    ) -> None:
        self.name = name
        self.labels = labels
        self.parent = parent
        self.leaf_lo = leaf_lo
        self.leaf_hi = leaf_hi
        self.n_leaves = n_leaves
        self.dynamic = dynamic
        self.domain = domain
        self.step = step
        self.children: list[list[int]] = [[] for _ in labels]
        for i, p in enumerate(parent):
            if p >= 0:
                self.children[p].append(i)
        self.split_at: list[int] = [UNDECIDED] * len(labels)
        self._refresh()

    # construction -------------------------------------------------------------------------
    @classmethod
    def from_taxonomy(cls, name: str, tax: Taxonomy) -> AttrTree:
        return cls(
            name,
            list(tax.labels),
            list(tax.parent),
            [int(x) for x in tax.leaf_lo],
            [int(x) for x in tax.leaf_hi],
            tax.n_leaves,
            dynamic=False,
        )

    @classmethod
    def numeric(cls, name: str, domain: tuple[float, float], step: float) -> AttrTree:
        n_bins = max(1, math.ceil((domain[1] - domain[0]) / step - 1e-9))
        tree = cls(name, [""], [-1], [0], [n_bins], n_bins, True, domain, step)
        tree.labels[0] = tree._interval_label(0, n_bins)
        return tree

    def _interval_label(self, lo_bin: int, hi_bin: int) -> str:
        lo = bin_edge(self.domain[0], self.step, lo_bin)
        top = as_written(self.domain[1])  # the last bin ends at the domain's end
        hi = (
            top
            if hi_bin >= self.n_leaves
            else min(bin_edge(self.domain[0], self.step, hi_bin), top)
        )
        return f"[{format_number(lo)}-{format_number(hi)})"

    def _refresh(self) -> None:
        n = len(self.labels)
        self.nchild = np.array([len(c) for c in self.children], dtype=np.int64)
        slot = np.zeros(n, dtype=np.int64)
        for kids in self.children:
            for k, c in enumerate(kids):
                slot[c] = k
        self.slot = slot
        width = max(1, int(self.nchild.max()) if n else 1)
        table = np.full((n, width), -1, dtype=np.int64)
        for i, kids in enumerate(self.children):
            table[i, : len(kids)] = kids
        self.child_table = table
        if self.dynamic:
            split = np.asarray(self.split_at, dtype=np.int64)
            left = np.full(n, -1, dtype=np.int64)
            right = np.full(n, -1, dtype=np.int64)
            for i, kids in enumerate(self.children):
                if kids:
                    left[i], right[i] = kids
            self._split, self._left, self._right = split, left, right
        else:
            depth = np.zeros(n, dtype=np.int64)
            for i in range(1, n):
                depth[i] = depth[self.parent[i]] + 1
            self.depth = depth
            max_d = int(depth.max()) + 1
            anc = np.full((max_d + 1, self.n_leaves), -1, dtype=np.int64)
            for i in range(n):
                anc[depth[i], self.leaf_lo[i] : self.leaf_hi[i]] = i
            self._anc = anc

    # queries ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.labels)

    def is_leaf(self, node: int) -> bool:
        return not self.children[node]

    def needs_split(self, node: int) -> bool:
        return self.dynamic and self.split_at[node] == UNDECIDED

    def n_bins(self, node: int) -> int:
        return self.leaf_hi[node] - self.leaf_lo[node]

    def child_of(self, nodes: IntArray, leaves: IntArray) -> IntArray:
        """The child of each ``nodes[i]`` that covers ``leaves[i]`` (nodes must be split)."""
        if self.dynamic:
            out = np.where(leaves < self._split[nodes], self._left[nodes], self._right[nodes])
        else:
            out = self._anc[self.depth[nodes] + 1, leaves]
        return np.asarray(out, dtype=np.int64)

    def order_key(self, node: int) -> int:
        """Value order used for tie-breaking: position of the node's first leaf."""
        return self.leaf_lo[node]

    # growth -------------------------------------------------------------------------------
    def split(self, node: int, at_bin: int) -> None:
        """Decide the split of a dynamic node: ``at_bin`` is the first bin of the right child,
        or NO_SPLIT when no admissible point separates its records (it then acts as a leaf)."""
        if not self.dynamic or self.split_at[node] != UNDECIDED:
            raise ValueError(f"{self.name}: node {node} cannot be split")
        lo, hi = self.leaf_lo[node], self.leaf_hi[node]
        if at_bin == NO_SPLIT:
            self.split_at[node] = NO_SPLIT
            self._refresh()
            return
        if not lo < at_bin < hi:
            raise ValueError(f"{self.name}: split {at_bin} outside ({lo}, {hi})")
        self.split_at[node] = at_bin
        for a, b in ((lo, at_bin), (at_bin, hi)):
            self.labels.append(self._interval_label(a, b))
            self.parent.append(node)
            self.leaf_lo.append(a)
            self.leaf_hi.append(b)
            self.children.append([])
            self.split_at.append(UNDECIDED if b - a > 1 else NO_SPLIT)
            self.children[node].append(len(self.labels) - 1)
        self._refresh()
