"""CSV -> integer-coded numpy columns, validated against the run spec.

Every QID value becomes a leaf code of its tree; class values become class codes; the
sensitive column becomes 0 (not a sensitive value) or 1..|S| (position in sensitive_values).
Columns that are released unchanged are kept as string arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from common.csvread import Column, RawTable, read_columns, read_table
from common.errors import DataError
from common.spec import AttributeSpec, RunSpec
from common.taxonomy import Taxonomy, interval_leaves, parse_taxonomy
from common.tree import AttrTree

IntArray = npt.NDArray[np.int64]
StrArray = npt.NDArray[np.str_]


@dataclass(frozen=True)
class Schema:
    """What a spec plus its taxonomy files define, before any data is read."""

    spec: RunSpec
    taxonomies: dict[str, Taxonomy]  # by attribute name (categorical and static numeric)
    files: dict[str, str]  # taxonomy texts by relative path, for hashing / shipping
    class_labels: tuple[str, ...] | None

    def new_trees(self) -> list[AttrTree]:
        trees = []
        for a in self.spec.qids:
            if a.dynamic:
                assert a.domain is not None
                trees.append(AttrTree.numeric(a.name, a.domain, a.bin_step))
            else:
                trees.append(AttrTree.from_taxonomy(a.name, self.taxonomies[a.name]))
        return trees


def build_schema(spec: RunSpec, reader: Callable[[str], str]) -> Schema:
    taxes: dict[str, Taxonomy] = {}
    files: dict[str, str] = {}
    for a in spec.qids:
        if a.taxonomy is None:
            continue
        text = reader(a.taxonomy)
        files[a.taxonomy] = text
        tax = parse_taxonomy(text, a.taxonomy)
        if a.type == "numeric":
            lo, hi = interval_leaves(tax)
            assert a.domain is not None
            if lo.min() < a.domain[0] or hi.max() > a.domain[1]:
                raise DataError(
                    f"attribute {a.name!r}: taxonomy intervals leave the declared domain",
                    file=a.taxonomy,
                    expected=f"inside [{a.domain[0]}, {a.domain[1]})",
                )
        taxes[a.name] = tax
    labels = spec.class_attr.values if spec.class_attr is not None else None
    return Schema(spec, taxes, files, labels)


@dataclass(frozen=True)
class EncodedTable:
    source: str
    columns: tuple[str, ...]
    qid_leaves: IntArray  # shape (n_qids, n_rows)
    cls: IntArray
    sens: IntArray
    kept: dict[str, StrArray]  # class, sensitive and 'other' columns, unchanged
    class_labels: tuple[str, ...]
    kept_codes: dict[str, IntArray]  # kept columns with declared values: index into values

    @property
    def n_rows(self) -> int:
        return int(self.cls.shape[0])


def read_csv_columns(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and plain string columns (for tools that want lists)."""
    header, cols = read_columns(path)
    return header, [cols[h].strings().tolist() for h in header]


def encode_table(schema: Schema, path: Path) -> EncodedTable:
    spec = schema.spec
    raw = read_table(path, [a.name for a in spec.attributes])
    src, header, by_name = raw.source, raw.header, raw.columns
    trees = schema.new_trees()
    leaves = np.empty((len(spec.qids), by_name[header[0]].codes.size), dtype=np.int64)
    for i, a in enumerate(spec.qids):
        leaves[i] = _encode_qid(a, schema, trees[i], by_name[a.name], raw)
    n = leaves.shape[1]
    class_labels: tuple[str, ...] = ("",)
    cls = np.zeros(n, dtype=np.int64)
    if spec.class_attr is not None:
        col = by_name[spec.class_attr.name]
        class_labels = schema.class_labels or tuple(sorted(set(col.values)))
        cls = _lookup(
            col,
            {v: i for i, v in enumerate(class_labels)},
            raw,
            spec.class_attr.name,
            f"one of the declared class values {list(class_labels)}",
        )
    sens = np.zeros(n, dtype=np.int64)
    if spec.sensitive_attr is not None:
        col = by_name[spec.sensitive_attr.name]
        table = {v: i + 1 for i, v in enumerate(spec.privacy.sensitive_values)}
        sens = np.asarray([table.get(v, 0) for v in col.values], dtype=np.int64)[col.codes]
    kept = {
        a.name: by_name[a.name].strings()
        for a in spec.attributes
        if a.role in ("class", "sensitive", "other")
    }
    kept_codes = {
        a.name: _lookup(
            by_name[a.name],
            {v: i for i, v in enumerate(a.values)},
            raw,
            a.name,
            f"one of the declared values {list(a.values)}",
        )
        for a in spec.attributes
        if a.role in ("class", "sensitive", "other") and a.values is not None
    }
    return EncodedTable(src, tuple(header), leaves, cls, sens, kept, class_labels, kept_codes)


def _lookup(
    col: Column, table: dict[str, int], raw: RawTable, name: str, expected: str
) -> IntArray:
    codes = np.asarray([table.get(v, -1) for v in col.values], dtype=np.int64)
    if (codes < 0).any():
        bad = int(np.flatnonzero(codes < 0)[0])
        first = col.first_row_with(bad) if (col.codes == bad).any() else 0
        raise DataError(
            "value not allowed",
            file=raw.source,
            line=raw.line_of(first),
            column=name,
            value=col.values[bad],
            expected=expected,
        )
    return codes[col.codes]


def _encode_qid(
    a: AttributeSpec, schema: Schema, tree: AttrTree, col: Column, raw: RawTable
) -> IntArray:
    if a.type == "categorical":
        tax = schema.taxonomies[a.name]
        index = tax.leaf_index()
        sample = ", ".join(list(index)[:5])
        return _lookup(col, index, raw, a.name, f"a leaf of taxonomy {a.taxonomy} (e.g. {sample})")
    assert a.domain is not None
    nums = np.empty(len(col.values), dtype=np.float64)
    for i, v in enumerate(col.values):  # once per distinct value, not per row
        try:
            nums[i] = float(v)
        except ValueError:
            raise DataError(
                "not a number",
                file=raw.source,
                line=raw.line_of(col.first_row_with(i)),
                column=a.name,
                value=v,
                expected=f"a number in [{a.domain[0]:g}, {a.domain[1]:g})",
            ) from None
    vals = nums[col.codes]
    lo, hi = a.domain
    bad = ~np.isfinite(vals) | (vals < lo) | (vals >= hi)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise DataError(
            "number outside the declared domain",
            file=raw.source,
            line=raw.line_of(first),
            column=a.name,
            value=col.values[col.codes[first]],
            expected=f"a number in [{lo:g}, {hi:g})",
        )
    if a.dynamic:
        bins = np.floor((vals - lo) / a.bin_step).astype(np.int64)
        return np.asarray(np.minimum(bins, tree.n_leaves - 1), dtype=np.int64)
    tax = schema.taxonomies[a.name]
    llo, lhi = interval_leaves(tax)
    srt = np.argsort(llo, kind="stable")
    pos = np.searchsorted(llo[srt], vals, side="right") - 1
    ok = pos >= 0
    leaf = srt[np.maximum(pos, 0)]
    ok &= vals < lhi[leaf]
    if not ok.all():
        first = int(np.flatnonzero(~ok)[0])
        raise DataError(
            "number in no leaf interval of the taxonomy",
            file=raw.source,
            line=raw.line_of(first),
            column=a.name,
            value=col.values[col.codes[first]],
            expected=f"a value inside a leaf of {a.taxonomy}",
        )
    return np.asarray(leaf, dtype=np.int64)
