"""Taxonomy trees for categorical and static-interval numeric attributes.

Nodes are numbered in depth-first pre-order (root = 0), leaves get codes 0..n_leaves-1 in the
same order, so every node covers a contiguous range of leaf codes ``[leaf_lo, leaf_hi)``.
Two formats are read: the native indented format and ARX hierarchy CSV files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray
from fedanon.errors import TaxonomyError

BOM = "\ufeff"  # a UTF-8 byte order mark some editors write; never part of a label
_INTERVAL = re.compile(r"^\[\s*(-?[0-9.eE+]+)\s*-\s*(-?[0-9.eE+]+)\s*\)$")


@dataclass(frozen=True)
class Taxonomy:
    """An immutable tree; ``parent[0] == -1``; validated on construction."""

    labels: tuple[str, ...]
    parent: tuple[int, ...]
    source: str = "<taxonomy>"
    children: tuple[tuple[int, ...], ...] = field(init=False, repr=False)
    depth: IntArray = field(init=False, repr=False)
    leaf_lo: IntArray = field(init=False, repr=False)
    leaf_hi: IntArray = field(init=False, repr=False)
    leaf_nodes: IntArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.labels)
        if n == 0 or len(self.parent) != n or self.parent[0] != -1:
            raise TaxonomyError("a taxonomy needs exactly one root", file=self.source)
        kids: list[list[int]] = [[] for _ in range(n)]
        depth = np.zeros(n, dtype=np.int64)
        for i in range(1, n):
            p = self.parent[i]
            if not (0 <= p < i):
                raise TaxonomyError("nodes must be in pre-order", file=self.source)
            kids[p].append(i)
            depth[i] = depth[p] + 1
        seen: dict[str, int] = {}
        for i, lab in enumerate(self.labels):
            if lab in seen:
                raise TaxonomyError(
                    "duplicate label",
                    file=self.source,
                    value=lab,
                    expected="every label of a taxonomy to be unique",
                )
            seen[lab] = i
        leaf_lo = np.zeros(n, dtype=np.int64)
        leaf_hi = np.zeros(n, dtype=np.int64)
        leaves = [i for i in range(n) if not kids[i]]
        code = {node: c for c, node in enumerate(leaves)}
        for i in range(n - 1, -1, -1):
            if not kids[i]:
                leaf_lo[i] = code[i]
                leaf_hi[i] = code[i] + 1
            else:
                leaf_lo[i] = leaf_lo[kids[i][0]]
                leaf_hi[i] = leaf_hi[kids[i][-1]]
        object.__setattr__(self, "children", tuple(tuple(k) for k in kids))
        object.__setattr__(self, "depth", depth)
        object.__setattr__(self, "leaf_lo", leaf_lo)
        object.__setattr__(self, "leaf_hi", leaf_hi)
        object.__setattr__(self, "leaf_nodes", np.asarray(leaves, dtype=np.int64))

    @property
    def n_leaves(self) -> int:
        return len(self.leaf_nodes)

    def leaf_index(self) -> dict[str, int]:
        """Label of each leaf -> leaf code."""
        return {self.labels[int(node)]: c for c, node in enumerate(self.leaf_nodes)}


def parse_native(text: str, source: str) -> Taxonomy:
    """Indented format: first line is the root, deeper indentation means child."""
    labels: list[str] = []
    parent: list[int] = []
    stack: list[tuple[int, int]] = []  # (indent, node)
    for lineno, raw in enumerate(text.removeprefix(BOM).splitlines(), 1):
        body = raw.split("#", 1)[0].rstrip()
        if not body.strip():
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise TaxonomyError("indent with spaces, not tabs", file=source, line=lineno)
        indent = len(body) - len(body.lstrip(" "))
        label = body.strip()
        if not stack:
            if indent != 0:
                raise TaxonomyError("the root must not be indented", file=source, line=lineno)
            labels.append(label)
            parent.append(-1)
            stack.append((0, 0))
            continue
        if indent == 0:
            raise TaxonomyError(
                "a second root",
                file=source,
                line=lineno,
                value=label,
                expected="one root on the first line, every other label indented below it",
            )
        if indent <= stack[-1][0] and indent not in {lvl for lvl, _ in stack}:
            raise TaxonomyError(
                "bad indentation",
                file=source,
                line=lineno,
                value=label,
                expected="the indentation of an enclosing level, or deeper than the line above",
            )
        while stack[-1][0] >= indent:
            stack.pop()
        if label in labels:
            raise TaxonomyError(
                "duplicate label",
                file=source,
                line=lineno,
                value=label,
                expected="every label of a taxonomy to be unique",
            )
        labels.append(label)
        parent.append(stack[-1][1])
        stack.append((indent, len(labels) - 1))
    if not labels:
        raise TaxonomyError("the taxonomy is empty", file=source)
    return Taxonomy(tuple(labels), tuple(parent), source)


def parse_arx(text: str, source: str) -> Taxonomy:
    """ARX hierarchy: one row per leaf, ``leaf;parent;...;root``."""
    rows: list[list[str]] = []
    lines: list[int] = []  # the file line of each row
    _check_arx_separator(text.removeprefix(BOM), source)
    for lineno, raw in enumerate(text.removeprefix(BOM).splitlines(), 1):
        if not raw.strip():
            continue
        cells = [c.strip() for c in raw.split(";")]
        if any(not c for c in cells):
            raise TaxonomyError("empty cell", file=source, line=lineno, value=raw)
        path: list[str] = []
        for c in reversed(cells):  # root first; collapse repeated labels of one node
            if not path or path[-1] != c:
                path.append(c)
        rows.append(path)
        lines.append(lineno)
        if rows[0][0] != path[0]:
            raise TaxonomyError(
                "every row must end in the same root",
                file=source,
                line=lineno,
                value=path[0],
                expected=repr(rows[0][0]),
            )
    if not rows:
        raise TaxonomyError("the hierarchy is empty", file=source)
    _check_arx_rows(rows, lines, source)
    node_of: dict[tuple[str, ...], int] = {}
    labels: list[str] = []
    parent: list[int] = []
    # insertion in row order, nodes created in pre-order after sorting paths by first use
    order: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    root: tuple[str, ...] = (rows[0][0],)
    for path in rows:
        for d in range(1, len(path)):
            key, par = tuple(path[: d + 1]), tuple(path[:d])
            kids = order.setdefault(par, [])
            if key not in kids:
                kids.append(key)
    stack = [root]
    while stack:
        key = stack.pop()
        node_of[key] = len(labels)
        labels.append(key[-1])
        parent.append(node_of[key[:-1]] if len(key) > 1 else -1)
        stack.extend(order.get(key, [])[::-1])
    return Taxonomy(tuple(labels), tuple(parent), source)


def _check_arx_separator(text: str, source: str) -> None:
    """A hierarchy saved with another separator (a spreadsheet's ',' or a tab) has no ';' at
    all: say so, instead of reading each whole row as one label ('every row must end in the
    same root', naming the second row)."""
    body = [(n, raw) for n, raw in enumerate(text.splitlines(), 1) if raw.strip()]
    if len(body) < 2 or any(";" in raw for _, raw in body):
        return
    for sep, name in ((",", "','"), ("\t", "a tab")):
        if all(sep in raw for _, raw in body):
            raise TaxonomyError(
                f"the cells of an ARX hierarchy are separated by ';', this file's by {name}",
                file=source,
                line=body[0][0],
                expected="one row per leaf: the leaf, then its ancestors, the root last, "
                "separated by ';' (save the hierarchy with ';' as the separator)",
            )


def _check_arx_rows(rows: list[list[str]], lines: list[int], source: str) -> None:
    """Every label is one node (one path from the root), and no row's leaf is a node that
    another row generalizes to; either is named by the row's line."""
    path_of: dict[str, tuple[str, ...]] = {}
    inner: dict[tuple[str, ...], int] = {}  # an inner node -> the first line that has it
    for path, lineno in zip(rows, lines, strict=True):
        for d in range(len(path)):
            key = tuple(path[: d + 1])
            if path_of.setdefault(key[-1], key) != key:
                raise TaxonomyError(
                    "duplicate label",
                    file=source,
                    line=lineno,
                    value=key[-1],
                    expected="every label of a taxonomy to be unique (one parent per label)",
                )
            if d < len(path) - 1:
                inner.setdefault(key, lineno)
    for path, lineno in zip(rows, lines, strict=True):
        if tuple(path) in inner:
            raise TaxonomyError(
                f"the row's leaf is an inner node of the hierarchy (line {inner[tuple(path)]}"
                " generalizes to it)",
                file=source,
                line=lineno,
                value=path[-1],
                expected="one row per leaf: the leaf, then its ancestors, the root last",
            )


def parse_taxonomy(text: str, source: str) -> Taxonomy:
    """Pick the reader by file name: ``.csv`` is ARX, anything else is native."""
    text = text.removeprefix(BOM)
    if source.lower().endswith(".csv"):
        return parse_arx(text, source)
    return parse_native(text, source)


def parse_interval(label: str) -> tuple[float, float] | None:
    """``[lo-hi)`` -> (lo, hi), or None if the label is not an interval."""
    m = _INTERVAL.match(label.strip())
    if not m:
        return None
    try:
        lo, hi = float(m.group(1)), float(m.group(2))
    except ValueError:
        return None
    return (lo, hi) if lo < hi else None


def interval_leaves(tax: Taxonomy) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """For a static numeric taxonomy: (lo, hi) of every leaf, in leaf-code order.

    Checks that every label is an interval, children lie inside their parent and leaves do
    not overlap.
    """
    bounds = []
    for i, lab in enumerate(tax.labels):
        iv = parse_interval(lab)
        if iv is None:
            raise TaxonomyError(
                "numeric taxonomy labels must be intervals",
                file=tax.source,
                value=lab,
                expected="[lo-hi)",
            )
        bounds.append(iv)
        p = tax.parent[i]
        if p >= 0:
            plo, phi = bounds[p]
            if iv[0] < plo or iv[1] > phi:
                raise TaxonomyError(
                    "interval is not inside its parent",
                    file=tax.source,
                    value=lab,
                    expected=f"inside {tax.labels[p]}",
                )
    lo = np.array([bounds[int(n)][0] for n in tax.leaf_nodes])
    hi = np.array([bounds[int(n)][1] for n in tax.leaf_nodes])
    srt = np.argsort(lo, kind="stable")
    if np.any(lo[srt][1:] < hi[srt][:-1]):
        raise TaxonomyError("leaf intervals overlap", file=tax.source)
    return lo, hi
