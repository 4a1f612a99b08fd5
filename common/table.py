"""CSV -> integer-coded numpy columns, validated against the run spec.

Every QID value becomes a leaf code of its tree; class values become class codes; the
sensitive column becomes 0 (not a sensitive value) or 1..|S| (position in sensitive_values).
Columns that are released unchanged are kept as string arrays.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

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
                    file=a.taxonomy, expected=f"inside [{a.domain[0]}, {a.domain[1]})",
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

    @property
    def n_rows(self) -> int:
        return int(self.cls.shape[0])


def read_csv_columns(path: Path) -> tuple[list[str], list[list[str]]]:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", newline="", encoding="utf-8") as gz:
                text = gz.read()
        else:
            with path.open(newline="", encoding="utf-8") as fh:
                text = fh.read()
    except OSError as exc:
        raise DataError(f"cannot read input: {exc.strerror}", file=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise DataError("input is not UTF-8 text", file=str(path)) from exc
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise DataError("the input is empty", file=str(path), expected="a header line") from None
    rows = [r for r in reader if r]
    if not rows:
        raise DataError("the input has a header but no records", file=str(path))
    width = len(header)
    bad = next((i for i, r in enumerate(rows) if len(r) != width), None)
    if bad is not None:
        raise DataError(
            f"row has {len(rows[bad])} fields", file=str(path), line=bad + 2,
            expected=f"{width} fields like the header",
        )
    cols = [list(c) for c in zip(*rows, strict=True)]
    return header, cols


def encode_table(schema: Schema, path: Path) -> EncodedTable:
    spec = schema.spec
    src = str(path)
    header, cols = read_csv_columns(path)
    declared = {a.name for a in spec.attributes}
    for name in header:
        if name not in declared:
            raise DataError(
                "column is not declared in the spec", file=src, line=1, column=name,
                expected="every column declared as [[attribute]] (role 'other' to keep it)",
            )
    dup = [h for h in header if header.count(h) > 1]
    if dup:
        raise DataError("duplicate column", file=src, line=1, column=dup[0])
    for a in spec.attributes:
        if a.name not in header:
            raise DataError(f"declared column {a.name!r} is missing", file=src, line=1)
    by_name = {h: np.asarray([v.strip() for v in c]) for h, c in zip(header, cols, strict=True)}
    trees = schema.new_trees()
    leaves = np.empty((len(spec.qids), len(cols[0])), dtype=np.int64)
    for i, a in enumerate(spec.qids):
        leaves[i] = _encode_qid(a, schema, trees[i], by_name[a.name], src)
    n = leaves.shape[1]
    class_labels: tuple[str, ...] = ("",)
    cls = np.zeros(n, dtype=np.int64)
    if spec.class_attr is not None:
        col = by_name[spec.class_attr.name]
        class_labels = schema.class_labels or tuple(sorted(set(col.tolist())))
        cls = _lookup(col, {v: i for i, v in enumerate(class_labels)}, src, spec.class_attr.name,
                      f"one of the declared class values {list(class_labels)}")
    sens = np.zeros(n, dtype=np.int64)
    if spec.sensitive_attr is not None:
        col = by_name[spec.sensitive_attr.name]
        table = {v: i + 1 for i, v in enumerate(spec.privacy.sensitive_values)}
        uniq, inv = np.unique(col, return_inverse=True)
        sens = np.asarray([table.get(str(u), 0) for u in uniq], dtype=np.int64)[inv]
    kept = {
        a.name: by_name[a.name] for a in spec.attributes if a.role in ("class", "sensitive", "other")
    }
    return EncodedTable(src, tuple(header), leaves, cls, sens, kept, class_labels)


def _lookup(col: StrArray, table: dict[str, int], src: str, name: str, expected: str) -> IntArray:
    uniq, inv = np.unique(col, return_inverse=True)
    codes = np.asarray([table.get(str(u), -1) for u in uniq], dtype=np.int64)
    out = codes[inv]
    if (out < 0).any():
        first = int(np.flatnonzero(out < 0)[0])
        raise DataError(
            "value not allowed", file=src, line=first + 2, column=name, value=str(col[first]),
            expected=expected,
        )
    return out


def _encode_qid(a: AttributeSpec, schema: Schema, tree: AttrTree, col: StrArray, src: str) -> IntArray:
    if a.type == "categorical":
        tax = schema.taxonomies[a.name]
        index = tax.leaf_index()
        sample = ", ".join(list(index)[:5])
        return _lookup(col, index, src, a.name,
                       f"a leaf of taxonomy {a.taxonomy} (e.g. {sample})")
    assert a.domain is not None
    try:
        vals = col.astype(np.float64)
    except ValueError:
        for i, v in enumerate(col.tolist()):
            try:
                float(v)
            except ValueError:
                raise DataError(
                    "not a number", file=src, line=i + 2, column=a.name, value=v,
                    expected=f"a number in [{a.domain[0]:g}, {a.domain[1]:g})",
                ) from None
        raise
    lo, hi = a.domain
    bad = ~np.isfinite(vals) | (vals < lo) | (vals >= hi)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise DataError(
            "number outside the declared domain", file=src, line=first + 2, column=a.name,
            value=str(col[first]), expected=f"a number in [{lo:g}, {hi:g})",
        )
    if a.dynamic:
        bins = np.floor((vals - lo) / a.bin_step).astype(np.int64)
        return np.minimum(bins, tree.n_leaves - 1)
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
            "number in no leaf interval of the taxonomy", file=src, line=first + 2,
            column=a.name, value=str(col[first]), expected=f"a value inside a leaf of {a.taxonomy}",
        )
    return leaf.astype(np.int64)
