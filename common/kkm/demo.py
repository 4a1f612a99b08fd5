"""The demographics of an RT-dataset as NCP sees them (the seed's Definitions 2-4).

Every attribute is held as integers so a cluster's generalized value is a pair (lo, hi):
numeric values are ranked (hi - lo of the *values* gives the range length), categorical
values are leaf codes in pre-order (the closest common ancestor of a cluster is the lowest
common ancestor of its smallest and largest leaf).

NCP of a generalized value (Definition 3): 0 for a single value / leaf; otherwise the range
length over the domain size (numeric; the domain is the spec's ``domain`` or the data's
min..max, as Example 3's 47-44 / 51-19), or the leaves under the node over all leaves
(categorical).  NCP(r) is the weighted sum over attributes (weights default to 1/l).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fedanon.arrays import FloatArray, IntArray
from fedanon.kkm.hierarchy import Tree

TABLE_MAX = 2048  # categorical trees up to this many leaves get an NCP lookup table


@dataclass(frozen=True)
class Attr:
    """One demographic: integer keys per record and how a (lo, hi) pair costs NCP."""

    name: str
    weight: float
    keys: IntArray  # per record: rank of the value (numeric) or leaf code (categorical)
    values: FloatArray | None  # numeric: sorted distinct values (key -> value)
    size: float  # numeric: domain length
    tree: Tree | None  # categorical
    # categorical: leaves under the (lo leaf, hi leaf) pair's common ancestor, 0 for a leaf
    # (the NCP times the tree's leaves: exact, and half the memory of float32 NCPs)
    table: npt.NDArray[np.uint16] | None

    @property
    def numeric(self) -> bool:
        return self.tree is None

    @property
    def levels(self) -> int:
        """Number of distinct keys."""
        return int(self.values.size) if self.values is not None else self._tree.n_leaves

    @property
    def _tree(self) -> Tree:
        assert self.tree is not None
        return self.tree

    def ncp(self, lo: IntArray, hi: IntArray) -> FloatArray:
        """NCP of generalized values given by key pairs (vectorized)."""
        if self.values is not None:
            return np.asarray((self.values[hi] - self.values[lo]) / self.size, dtype=np.float64)
        if self.table is not None:
            return self.table[lo, hi] / np.float64(self._tree.n_leaves)
        tree = self._tree
        node = tree.lca(lo, hi)
        n = tree.node_leaves[node]
        return np.where(n > 1, n / tree.n_leaves, 0.0)

    def label(self, lo: int, hi: int) -> str:
        """The released text: ``v`` or ``[lo:hi]`` (numeric), the node label (categorical)."""
        if self.values is not None:
            a, b = self.values[lo], self.values[hi]
            return _num(a) if a == b else f"[{_num(a)}:{_num(b)}]"
        tree = self._tree
        node = int(tree.lca(np.array([lo]), np.array([hi]))[0])
        return tree.label(node)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def numeric_attr(name: str, weight: float, vals: FloatArray, lo: float, hi: float) -> Attr:
    uniq, keys = np.unique(vals, return_inverse=True)
    size = hi - lo if hi > lo else 1.0
    return Attr(name, weight, keys.astype(np.int64), uniq.astype(np.float64), size, None, None)


def categorical_attr(name: str, weight: float, leaves: IntArray, tree: Tree) -> Attr:
    table = None
    n = tree.n_leaves
    if n <= TABLE_MAX:
        lo, hi = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        node = tree.lca(lo.ravel(), hi.ravel())
        cnt = tree.node_leaves[node]
        table = np.where(cnt > 1, cnt, 0).astype(np.uint16).reshape(n, n)
    return Attr(name, weight, np.asarray(leaves, dtype=np.int64), None, 0.0, tree, table)


@dataclass(frozen=True)
class Demographics:
    attrs: tuple[Attr, ...]

    @property
    def n(self) -> int:
        return int(self.attrs[0].keys.size)

    def record_ncp(self, lo: list[IntArray], hi: list[IntArray]) -> FloatArray:
        """NCP(r) of records generalized to the given key pairs (Definition 4)."""
        out = np.zeros(lo[0].shape, dtype=np.float64)
        for a, lo_a, hi_a in zip(self.attrs, lo, hi, strict=True):
            out += a.weight * a.ncp(lo_a, hi_a)
        return out

    def morton(self, rows: IntArray) -> npt.NDArray[np.uint64]:
        """Z-order key of the given records' demographics (space-filling order)."""
        bits = max(1, min(20, 63 // len(self.attrs)))
        scaled: list[npt.NDArray[np.uint64]] = []
        for a in self.attrs:
            top = max(1, a.levels - 1)
            frac = a.keys[rows].astype(np.float64) * (((1 << bits) - 1) / top)
            scaled.append(frac.astype(np.uint64))
        key = np.zeros(rows.size, dtype=np.uint64)
        one = np.uint64(1)
        for b in range(bits - 1, -1, -1):
            sb = np.uint64(b)
            for x in scaled:
                key = (key << one) | ((x >> sb) & one)
        return key
