"""Hierarchies for categorical demographics and for the codes of the set attribute.

The files are read with ``fedanon.model.taxonomy``'s readers (native indented format, or ARX
``.csv``),
optionally gzip-compressed (``*.gz``, format chosen by the name without ``.gz``).  The bundled
ICD-9-CM hierarchy is ``taxonomy = "builtin:icd9cm"`` (see ``common/kkm/data/README.md``).

:class:`Tree` adds what NCP and the code merging need: for every leaf its ancestor at every
depth (``anc``), so the lowest common ancestor of many leaf pairs is one vectorized compare.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from fedanon.arrays import Int32Array, IntArray
from fedanon.errors import SpecError, TaxonomyError
from fedanon.kkm.spec import BUILTIN_PREFIX, BUILTINS
from fedanon.model.builtins import builtin_taxonomy
from fedanon.model.taxonomy import Taxonomy, parse_taxonomy

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Tree:
    """A taxonomy with per-leaf ancestor table; leaves are coded 0..n_leaves-1 (pre-order)."""

    tax: Taxonomy
    anc: Int32Array = field(init=False, repr=False)  # (n_leaves, max_depth + 1) node ids
    leaf_depth: IntArray = field(init=False, repr=False)
    node_leaves: IntArray = field(init=False, repr=False)  # leaves under every node
    index: dict[str, int] = field(init=False, repr=False)  # leaf label -> leaf code
    node_index: dict[str, int] = field(init=False, repr=False)  # any label -> node id

    def __post_init__(self) -> None:
        tax = self.tax
        leaves = tax.leaf_nodes
        depth = tax.depth
        object.__setattr__(self, "anc", _ancestors(tax))
        object.__setattr__(self, "leaf_depth", depth[leaves].astype(np.int64))
        object.__setattr__(self, "node_leaves", (tax.leaf_hi - tax.leaf_lo).astype(np.int64))
        object.__setattr__(self, "index", tax.leaf_index())
        object.__setattr__(self, "node_index", {lab: i for i, lab in enumerate(tax.labels)})

    @property
    def n_leaves(self) -> int:
        return self.tax.n_leaves

    @property
    def source(self) -> str:
        return self.tax.source

    def label(self, node: int) -> str:
        return self.tax.labels[node]

    def leaf_label(self, leaf: int) -> str:
        return self.tax.labels[int(self.tax.leaf_nodes[leaf])]

    def lca_depth(self, a: IntArray, b: IntArray) -> IntArray:
        """Depth of the lowest common ancestor of leaves ``a[i]`` and ``b[i]``."""
        eq = self.anc[a] == self.anc[b]
        d = np.cumprod(eq, axis=1).sum(axis=1) - 1
        return np.asarray(np.minimum(d, self.leaf_depth[a]), dtype=np.int64)

    def lca(self, a: IntArray, b: IntArray) -> IntArray:
        """Node id of the lowest common ancestor of leaves ``a[i]`` and ``b[i]``."""
        d = self.lca_depth(a, b)
        return np.asarray(self.anc[a, d], dtype=np.int64)

    def leaves_under(self, node: int) -> range:
        return range(int(self.tax.leaf_lo[node]), int(self.tax.leaf_hi[node]))


def _ancestors(tax: Taxonomy) -> Int32Array:
    """``anc[leaf, d]``: the ancestor at depth d, or the leaf's own node below its depth
    (a leaf is never another leaf's ancestor, so deeper columns never match across leaves)."""
    leaves = tax.leaf_nodes
    dmax = int(tax.depth.max())
    parent = np.asarray(tax.parent, dtype=np.int64)
    anc = np.empty((leaves.size, dmax + 1), dtype=np.int32)
    ldepth = tax.depth[leaves]
    anc[:] = leaves[:, None]
    cur = leaves.copy()
    for d in range(dmax, -1, -1):
        at = ldepth >= d
        anc[at, d] = cur[at]
        move = at & (d > 0)
        cur = np.where(move, parent[np.maximum(cur, 0)], cur)
    return anc


def parse_hierarchy(data: bytes, name: str) -> Tree:
    """A hierarchy file's bytes (gzip if ``name`` ends in ``.gz``) -> Tree."""
    if name.lower().endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise TaxonomyError(f"not a gzip file: {exc}", file=name) from exc
        name = name[:-3]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaxonomyError("hierarchy is not UTF-8 text", file=name) from exc
    return Tree(parse_taxonomy(text, name))


@lru_cache(maxsize=4)
def builtin(name: str) -> Tree:
    """A hierarchy bundled with fedanon (``icd9cm``), parsed once per process."""
    if name not in BUILTINS:
        raise SpecError("unknown built-in hierarchy", value=name, expected=" | ".join(BUILTINS))
    return Tree(builtin_taxonomy(name))


def load_tree(ref: str, reader: Callable[[str], bytes]) -> Tree:
    """``builtin:NAME`` or a file name resolved by ``reader``."""
    if ref.startswith(BUILTIN_PREFIX):
        return builtin(ref[len(BUILTIN_PREFIX) :])
    return parse_hierarchy(reader(ref), ref)
