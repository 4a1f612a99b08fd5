"""CSV -> integer-coded numpy columns, validated against the run spec.

Every QID value becomes a leaf code of its tree; class values become class codes; the
sensitive column becomes 0 (not a sensitive value) or 1..|S| (position in sensitive_values).
Columns that are released unchanged are kept as string arrays.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
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


@dataclass(frozen=True)
class Column:
    """One input column, dictionary-encoded: ``values[codes]`` is the column."""

    values: tuple[str, ...]
    codes: IntArray

    def strings(self) -> StrArray:
        return np.asarray(self.values, dtype=object)[self.codes]

    def first_row_with(self, value_index: int) -> int:
        return int(np.flatnonzero(self.codes == value_index)[0])


SMALL_INPUT_BYTES = 8 << 20  # below this the csv module beats pandas' import time


def read_columns(path: Path) -> tuple[list[str], dict[str, Column]]:
    """Parse a CSV (optionally .gz) into dictionary-encoded columns: the csv module for small
    files, pandas' C parser (categorical columns, little memory) for large ones."""
    src = str(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", newline="", encoding="utf-8") as gz:
                first = gz.readline()
        else:
            with path.open(newline="", encoding="utf-8") as fh:
                first = fh.readline()
        size = path.stat().st_size
    except OSError as exc:
        raise DataError(f"cannot read input: {exc.strerror}", file=src) from exc
    except UnicodeDecodeError as exc:
        raise DataError("input is not UTF-8 text", file=src) from exc
    if not first.strip():
        raise DataError("the input is empty", file=src, expected="a header line")
    header = [h.strip() for h in next(csv.reader([first]))]
    dup = [h for h in header if header.count(h) > 1]
    if dup:
        raise DataError("duplicate column", file=src, line=1, column=dup[0])
    small = size < SMALL_INPUT_BYTES if path.suffix != ".gz" else size < SMALL_INPUT_BYTES // 8
    raw = _parse_small(path, header, src) if small else _parse_large(path, header, src)
    cols: dict[str, Column] = {}
    for name, (values, codes) in zip(header, raw, strict=True):
        stripped = [v.strip() for v in values]
        uniq = sorted(set(stripped))
        index = {v: i for i, v in enumerate(uniq)}
        remap = np.asarray([index[v] for v in stripped], dtype=np.int64)
        cols[name] = Column(tuple(uniq), remap[codes])
    return header, cols


def _parse_small(path: Path, header: list[str], src: str) -> list[tuple[list[str], IntArray]]:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", newline="", encoding="utf-8") as gz:
                text = gz.read()
        else:
            text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError("input is not UTF-8 text", file=src) from exc
    reader = csv.reader(io.StringIO(text))
    next(reader)
    width = len(header)
    rows = []
    for row in reader:
        if not row:
            continue
        if len(row) != width:
            raise DataError(
                f"row has {len(row)} fields",
                file=src,
                line=reader.line_num,
                expected=f"{width} fields like the header",
            )
        rows.append(row)
    if not rows:
        raise DataError("the input has a header but no records", file=src)
    out = []
    for j in range(width):
        seen: dict[str, int] = {}
        codes = [seen.setdefault(r[j], len(seen)) for r in rows]
        out.append((list(seen), np.asarray(codes, dtype=np.int64)))
    return out


def _check_widths(path: Path, width: int, src: str) -> None:
    """Every non-blank line has ``width`` fields (pandas pads short rows silently)."""
    if path.suffix == ".gz":
        with gzip.open(path) as gz:
            data = gz.read()
    else:
        data = path.read_bytes()
    if b'"' in data:  # quoted fields may hold commas or newlines: let the csv module count
        reader = csv.reader(io.StringIO(data.decode("utf-8", errors="replace")))
        for row in reader:
            if row and len(row) != width:
                raise DataError(
                    f"row has {len(row)} fields",
                    file=src,
                    line=reader.line_num,
                    expected=f"{width} fields like the header",
                )
        return
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == ord("\n"))
    if ends.size == 0 or ends[-1] != buf.size - 1:
        ends = np.append(ends, buf.size)
    starts = np.concatenate(([0], ends[:-1] + 1))
    comma_pos = np.flatnonzero(buf == ord(","))
    fields = np.diff(np.searchsorted(comma_pos, np.concatenate(([0], ends)))) + 1
    length = ends - starts
    last = buf[np.minimum(starts, buf.size - 1)]
    blank = (length == 0) | ((length == 1) & (last == ord("\r")))
    bad = np.flatnonzero((fields != width) & ~blank)
    if bad.size:
        line = int(bad[0])
        raise DataError(
            f"row has {int(fields[line])} fields",
            file=src,
            line=line + 1,
            expected=f"{width} fields like the header",
        )


def _parse_large(path: Path, header: list[str], src: str) -> list[tuple[list[str], IntArray]]:
    import pandas as pd

    try:
        frame = pd.read_csv(
            path,
            dtype="category",
            keep_default_na=False,
            na_filter=False,
            header=0,
            names=header,
            engine="c",
            encoding="utf-8",
            skip_blank_lines=True,
        )
    except pd.errors.ParserError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise DataError(
            f"malformed row: {exc}",
            file=src,
            line=int(m.group(1)) if m else None,
            expected=f"{len(header)} fields like the header",
        ) from exc
    except UnicodeDecodeError as exc:
        raise DataError("input is not UTF-8 text", file=src) from exc
    if len(frame) == 0:
        raise DataError("the input has a header but no records", file=src)
    _check_widths(path, len(header), src)
    out = []
    for name in header:
        cat = frame[name].cat
        codes = cat.codes.to_numpy().astype(np.int64)
        if (codes < 0).any():
            raise DataError(
                "row has too few fields",
                file=src,
                line=int(np.flatnonzero(codes < 0)[0]) + 2,
                column=name,
                expected=f"{len(header)} fields like the header",
            )
        out.append(([str(v) for v in cat.categories], codes))
    return out


def read_csv_columns(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and plain string columns (for tools that want lists)."""
    header, cols = read_columns(path)
    return header, [cols[h].strings().tolist() for h in header]


def encode_table(schema: Schema, path: Path) -> EncodedTable:
    spec = schema.spec
    src = str(path)
    header, by_name = read_columns(path)
    declared = {a.name for a in spec.attributes}
    for name in header:
        if name not in declared:
            raise DataError(
                "column is not declared in the spec",
                file=src,
                line=1,
                column=name,
                expected="every column declared as [[attribute]] (role 'other' to keep it)",
            )
    for a in spec.attributes:
        if a.name not in header:
            raise DataError(f"declared column {a.name!r} is missing", file=src, line=1)
    trees = schema.new_trees()
    leaves = np.empty((len(spec.qids), by_name[header[0]].codes.size), dtype=np.int64)
    for i, a in enumerate(spec.qids):
        leaves[i] = _encode_qid(a, schema, trees[i], by_name[a.name], src)
    n = leaves.shape[1]
    class_labels: tuple[str, ...] = ("",)
    cls = np.zeros(n, dtype=np.int64)
    if spec.class_attr is not None:
        col = by_name[spec.class_attr.name]
        class_labels = schema.class_labels or tuple(sorted(set(col.values)))
        cls = _lookup(
            col,
            {v: i for i, v in enumerate(class_labels)},
            src,
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
            src,
            a.name,
            f"one of the declared values {list(a.values)}",
        )
        for a in spec.attributes
        if a.role in ("class", "sensitive", "other") and a.values is not None
    }
    return EncodedTable(src, tuple(header), leaves, cls, sens, kept, class_labels, kept_codes)


def _lookup(col: Column, table: dict[str, int], src: str, name: str, expected: str) -> IntArray:
    codes = np.asarray([table.get(v, -1) for v in col.values], dtype=np.int64)
    if (codes < 0).any():
        bad = int(np.flatnonzero(codes < 0)[0])
        first = col.first_row_with(bad) if (col.codes == bad).any() else 0
        raise DataError(
            "value not allowed",
            file=src,
            line=first + 2,
            column=name,
            value=col.values[bad],
            expected=expected,
        )
    return codes[col.codes]


def _encode_qid(
    a: AttributeSpec, schema: Schema, tree: AttrTree, col: Column, src: str
) -> IntArray:
    if a.type == "categorical":
        tax = schema.taxonomies[a.name]
        index = tax.leaf_index()
        sample = ", ".join(list(index)[:5])
        return _lookup(col, index, src, a.name, f"a leaf of taxonomy {a.taxonomy} (e.g. {sample})")
    assert a.domain is not None
    nums = np.empty(len(col.values), dtype=np.float64)
    for i, v in enumerate(col.values):  # once per distinct value, not per row
        try:
            nums[i] = float(v)
        except ValueError:
            raise DataError(
                "not a number",
                file=src,
                line=col.first_row_with(i) + 2,
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
            file=src,
            line=first + 2,
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
            file=src,
            line=first + 2,
            column=a.name,
            value=col.values[col.codes[first]],
            expected=f"a value inside a leaf of {a.taxonomy}",
        )
    return np.asarray(leaf, dtype=np.int64)
