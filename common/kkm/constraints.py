"""Utility constraints (the seed's Definition 8) and record grouping (ArtUC Step 1).

A constraint names, for each demographic, the most general value a record may be released
with (a closed range ``[lo, hi]`` for a numeric attribute, a hierarchy node for a categorical
one; omitted = anything), and a set of codes (codes or hierarchy nodes, expanded to their leaf
codes) that may be generalized together into one generalized code.  TOML::

    [[constraint]]
    age = [19, 50]
    origin = "Europe"
    diagnoses = ["458.1", "458.21"]   # the set attribute's name; omitted = every code

or CSV (header = attribute names; ``19:50`` or ``[19:50]`` or ``51`` for ranges, the spec's
separator between codes, an empty cell = anything)::

    age,origin,diagnoses
    19:50,Europe,458.1|458.21

Checked (Section 3.3 of the seed, as its Table 4 reads it): two constraints have the same
demographics or demographics disjoint in at least one attribute (Table 4 pairs Origin = All
with Origin = Africa, told apart by Age), and the same code set or disjoint code sets.
Every record must lie inside the demographics of some
constraint (else it could not be grouped: an input error naming its line).  A code that no
constraint lists may not be generalized with any other code: it is kept or suppressed.
"""

from __future__ import annotations

import csv
import io
import tomllib
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.arrays import Int32Array, IntArray
from fedanon.errors import InputError
from fedanon.kkm.hierarchy import Tree
from fedanon.kkm.spec import KkmAttribute

# one demographic element: ("range", lo, hi) or ("node", node_id) or ("any",)
Element = tuple[Any, ...]


@dataclass(frozen=True)
class Constraints:
    """The parsed constraint set: one demographic box per group, one code class per code."""

    source: str
    boxes: tuple[tuple[Element, ...], ...]  # distinct demographic parts, one per group
    code_class: Int32Array  # per leaf code of the set hierarchy: its code class (singletons last)
    n_listed: int  # constraints in the file (0 = none given)

    @property
    def n_groups(self) -> int:
        return len(self.boxes)


def no_constraints(qids: tuple[KkmAttribute, ...], n_codes: int) -> Constraints:
    """Without a file: one group, every code may be generalized with every other code."""
    return Constraints(
        "<none>", (tuple(("any",) for _ in qids),), np.zeros(n_codes, dtype=np.int32), 0
    )


def parse_constraints(
    data: bytes,
    source: str,
    qids: tuple[KkmAttribute, ...],
    trees: dict[str, Tree],
    set_attr: KkmAttribute,
    items: Tree,
) -> Constraints:
    rows = _rows(data, source, set_attr)
    if not rows:
        raise InputError("the constraint file lists no constraint", file=source)
    names = {a.name for a in qids} | {set_attr.name}
    boxes: list[tuple[Element, ...]] = []
    code_sets: list[tuple[int, frozenset[int] | None]] = []
    for where, row in rows:
        extra = sorted(set(row) - names)
        if extra:
            raise InputError(
                "unknown attribute in a constraint",
                file=source,
                line=where,
                column=extra[0],
                expected=", ".join(sorted(names)),
            )
        box = tuple(_element(a, row.get(a.name), trees, source, where) for a in qids)
        boxes.append(box)
        code_sets.append((where, _codes(row.get(set_attr.name), items, source, where, set_attr)))
    _check_boxes([(w, b) for (w, _), b in zip(rows, boxes, strict=True)], qids, trees, source)
    code_class = _code_classes(code_sets, items.n_leaves, source)
    uniq = tuple(dict.fromkeys(boxes))
    return Constraints(source, uniq, code_class, len(rows))


def _rows(data: bytes, source: str, set_attr: KkmAttribute) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("constraint file is not UTF-8 text", file=source) from exc
    if source.lower().endswith(".csv"):
        reader = csv.reader(io.StringIO(text))
        header: list[str] | None = None
        out: list[tuple[int, dict[str, Any]]] = []
        for row in reader:
            if not row or not any(c.strip() for c in row):
                continue
            if header is None:
                header = [h.strip() for h in row]
                continue
            if len(row) != len(header):
                raise InputError(
                    f"row has {len(row)} fields",
                    file=source,
                    line=reader.line_num,
                    expected=f"{len(header)} like the header",
                )
            cells: dict[str, Any] = {}
            for h, c in zip(header, row, strict=True):
                c = c.strip()
                if not c:
                    continue
                cells[h] = (
                    [x.strip() for x in c.split(set_attr.separator)] if (h == set_attr.name) else c
                )
            out.append((reader.line_num, cells))
        return out
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML: {exc}", file=source) from exc
    if set(doc) - {"constraint"} or not isinstance(doc.get("constraint", []), list):
        raise InputError(
            "a constraint file holds only [[constraint]] tables",
            file=source,
            value=str(sorted(set(doc) - {"constraint"})),
        )
    rows = doc.get("constraint", [])
    bad = [i for i, r in enumerate(rows, 1) if not isinstance(r, dict)]
    if bad:
        raise InputError(f"[[constraint]] #{bad[0]} is not a table", file=source)
    return [(i, r) for i, r in enumerate(rows, 1)]


def _element(a: KkmAttribute, val: Any, trees: dict[str, Tree], source: str, where: int) -> Element:
    if val is None:
        return ("any",)
    if a.type == "numeric":
        lo_hi = _range(val)
        if lo_hi is None:
            raise InputError(
                "not a range",
                file=source,
                line=where,
                column=a.name,
                value=str(val),
                expected="[lo, hi] (TOML) or lo:hi (CSV), lo <= hi",
            )
        return ("range", *lo_hi)
    tree = trees[a.name]
    node = tree.node_index.get(str(val)) if isinstance(val, str) else None
    if node is None:
        raise InputError(
            "not a node of the attribute's hierarchy",
            file=source,
            line=where,
            column=a.name,
            value=str(val),
            expected=f"a label of {tree.source}",
        )
    return ("node", node) if node != 0 else ("any",)


def _range(val: Any) -> tuple[float, float] | None:
    nums: list[Any]
    if isinstance(val, list):
        nums = val
    elif isinstance(val, int | float) and not isinstance(val, bool):
        nums = [val, val]
    elif isinstance(val, str):
        body = val.strip().removeprefix("[").removesuffix("]")
        nums = body.split(":") if ":" in body else [body, body]
    else:
        return None
    if len(nums) != 2:
        return None
    try:
        lo, hi = float(nums[0]), float(nums[1])
    except (TypeError, ValueError):
        return None
    return (lo, hi) if lo <= hi else None


def _codes(
    val: Any, items: Tree, source: str, where: int, set_attr: KkmAttribute
) -> frozenset[int] | None:
    if val is None:
        return None
    if not isinstance(val, list) or not all(isinstance(v, str) for v in val):
        raise InputError(
            "codes must be a list of code or hierarchy labels",
            file=source,
            line=where,
            column=set_attr.name,
        )
    out: set[int] = set()
    for lab in val:
        node = items.node_index.get(lab)
        if node is None:
            raise InputError(
                "unknown code",
                file=source,
                line=where,
                column=set_attr.name,
                value=lab,
                expected=f"a code or node label of {items.source}",
            )
        out.update(items.leaves_under(node))
    return frozenset(out)


def _check_boxes(
    boxes: list[tuple[int, tuple[Element, ...]]],
    qids: tuple[KkmAttribute, ...],
    trees: dict[str, Tree],
    source: str,
) -> None:
    """Two constraints have the same demographics or demographics that no record can share
    (disjoint in at least one attribute), so every record falls in at most one group."""
    seen: dict[tuple[Element, ...], int] = {}
    for where, box in boxes:
        for other, w0 in seen.items():
            if other == box:
                continue
            if all(_meet(a, e0, e1, trees) for a, e0, e1 in zip(qids, other, box, strict=True)):
                raise InputError(
                    f"the demographics of this constraint overlap those of the constraint at "
                    f"{w0} without being equal",
                    file=source,
                    line=where,
                    expected="equal demographics, or disjoint ones in at least one attribute",
                )
        seen.setdefault(box, where)


def _meet(a: KkmAttribute, e0: Element, e1: Element, trees: dict[str, Tree]) -> bool:
    """Do two elements of one attribute share a value?"""
    if e0[0] == "any" or e1[0] == "any":
        return True
    if e0[0] == "range":
        return bool(e0[1] <= e1[2] and e1[1] <= e0[2])
    tax = trees[a.name].tax
    return bool(tax.leaf_lo[e0[1]] < tax.leaf_hi[e1[1]] and tax.leaf_lo[e1[1]] < tax.leaf_hi[e0[1]])


def _code_classes(
    code_sets: list[tuple[int, frozenset[int] | None]], n_codes: int, source: str
) -> Int32Array:
    cls = np.full(n_codes, -1, dtype=np.int32)
    by_set: dict[frozenset[int] | None, int] = {}
    for where, s in code_sets:
        if s in by_set:
            continue
        members = np.arange(n_codes) if s is None else np.fromiter(s, dtype=np.int64)
        if (cls[members] >= 0).any():
            raise InputError(
                "constraints overlap on codes",
                file=source,
                line=where,
                expected="the same code set as, or one disjoint from, every other constraint",
            )
        cls[members] = len(by_set)
        by_set[s] = len(by_set)
    free = np.flatnonzero(cls < 0)
    cls[free] = len(by_set) + np.arange(free.size, dtype=np.int32)
    return cls


def group_records(
    cons: Constraints,
    qids: tuple[KkmAttribute, ...],
    values: tuple[npt.NDArray[Any], ...],
    trees: dict[str, Tree],
) -> IntArray:
    """ArtUC Step 1: the group (index into ``cons.boxes``) of every record, -1 if none."""
    n = values[0].shape[0] if values else 0
    group = np.full(n, -1, dtype=np.int64)
    for g, box in enumerate(cons.boxes):
        inside = group < 0
        for a, e, v in zip(qids, box, values, strict=True):
            if e[0] == "range":
                inside &= (v >= e[1]) & (v <= e[2])
            elif e[0] == "node":
                tree = trees[a.name]
                inside &= (v >= tree.tax.leaf_lo[e[1]]) & (v < tree.tax.leaf_hi[e[1]])
        group[inside] = g
    return group
