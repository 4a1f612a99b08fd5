"""Reading an RT-dataset (demographics + one set-valued column) and writing a release.

A set cell lists codes separated by the spec's separator (default ``|``); an empty cell is
a record without codes.  Every code must be a leaf of the set attribute's hierarchy; an
unknown code, an internal node or an empty code between two separators is an input error
naming the file, the physical line, the column and the code.  A code listed twice in one
record counts once (the number of such repeats is reported).
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.arrays import FloatArray, Int32Array, IntArray
from fedanon.errors import DataError
from fedanon.io.fsutil import Pending, atomic_write_all
from fedanon.kkm.hierarchy import Tree
from fedanon.kkm.schema import KkmSchema
from fedanon.kkm.spec import KkmAttribute


@dataclass(frozen=True)
class RTTable:
    source: str
    header: tuple[str, ...]
    qid: tuple[npt.NDArray[Any], ...]  # numeric: float64 values; categorical: int64 leaf codes
    num_range: tuple[tuple[float, float], ...]  # per qid: (lo, hi) used by NCP (numeric only)
    indptr: IntArray  # record i's codes are codes[indptr[i]:indptr[i+1]], sorted, distinct
    codes: Int32Array  # leaf codes of the set hierarchy
    kept: dict[str, list[str]]  # class / other columns, unchanged
    lines: IntArray  # physical line where each record starts
    repeated_codes: int

    @property
    def n(self) -> int:
        return int(self.indptr.size - 1)

    def record_of_code(self) -> IntArray:
        """For every entry of ``codes``: the record it belongs to."""
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))


def _read_text(path: Path) -> str:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
                return fh.read()
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read input: {exc.strerror or exc}", file=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise DataError("input is not UTF-8 text", file=str(path)) from exc


def read_rows(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, rows (stripped cells) and the physical start line of every row."""
    src = str(path)
    reader = csv.reader(io.StringIO(_read_text(path), newline=""))
    header: list[str] | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    prev = 0
    try:
        for row in reader:
            start, prev = prev + 1, reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if header is None:
                header = [h.strip() for h in row]
                dup = sorted({h for h in header if header.count(h) > 1})
                if dup:
                    raise DataError("duplicate column", file=src, line=start, column=dup[0])
                continue
            if len(row) != len(header):
                raise DataError(
                    f"row has {len(row)} fields",
                    file=src,
                    line=start,
                    expected=f"{len(header)} fields like the header",
                )
            rows.append([c.strip() for c in row])
            lines.append(start)
    except csv.Error as exc:
        raise DataError(f"malformed CSV: {exc}", file=src, line=reader.line_num) from exc
    if header is None:
        raise DataError("the input is empty", file=src, expected="a header line")
    if not rows:
        raise DataError("the input has a header but no records", file=src)
    return header, rows, lines


def read_rt(schema: KkmSchema, path: Path) -> RTTable:
    spec = schema.spec
    src = str(path)
    header, rows, lines_list = read_rows(path)
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
    cols = {h: list(c) for h, c in zip(header, zip(*rows, strict=True), strict=True)}
    lines = np.asarray(lines_list, dtype=np.int64)
    qid: list[npt.NDArray[Any]] = []
    ranges: list[tuple[float, float]] = []
    for a in spec.qids:
        if a.type == "numeric":
            vals = _numeric(a, cols[a.name], lines, src)
            lo, hi = a.domain if a.domain is not None else (float(vals.min()), float(vals.max()))
            qid.append(vals)
            ranges.append((lo, hi))
        else:
            qid.append(_categorical(a, schema.trees[a.name], cols[a.name], lines, src))
            ranges.append((0.0, 0.0))
    indptr, codes, repeats = parse_sets(
        cols[spec.set_attr.name], spec.set_attr, schema.items, lines, src
    )
    kept = {a.name: cols[a.name] for a in spec.attributes if a.role in ("class", "other")}
    return RTTable(
        src, tuple(header), tuple(qid), tuple(ranges), indptr, codes, kept, lines, repeats
    )


def _numeric(a: KkmAttribute, cells: list[str], lines: IntArray, src: str) -> FloatArray:
    uniq = {c: 0.0 for c in cells}
    for c in uniq:
        try:
            uniq[c] = float(c)
        except ValueError:
            uniq[c] = float("nan")
    vals = np.fromiter((uniq[c] for c in cells), dtype=np.float64, count=len(cells))
    bad = ~np.isfinite(vals)
    if a.domain is not None:
        bad |= (vals < a.domain[0]) | (vals > a.domain[1])
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        where = f"a number in [{a.domain[0]:g}, {a.domain[1]:g}]" if a.domain else "a number"
        raise DataError(
            "not a number" if not np.isfinite(vals[i]) else "number outside the declared domain",
            file=src,
            line=int(lines[i]),
            column=a.name,
            value=cells[i],
            expected=where,
        )
    return vals


def _categorical(
    a: KkmAttribute, tree: Tree, cells: list[str], lines: IntArray, src: str
) -> IntArray:
    index = tree.index
    codes = np.fromiter((index.get(c, -1) for c in cells), dtype=np.int64, count=len(cells))
    if (codes < 0).any():
        i = int(np.flatnonzero(codes < 0)[0])
        sample = ", ".join(list(index)[:5])
        raise DataError(
            "value is not a leaf of the attribute's hierarchy",
            file=src,
            line=int(lines[i]),
            column=a.name,
            value=cells[i],
            expected=f"a leaf of {tree.source} (e.g. {sample})",
        )
    return codes


def parse_sets(
    cells: Sequence[str], attr: KkmAttribute, items: Tree, lines: IntArray, src: str
) -> tuple[IntArray, Int32Array, int]:
    """Set cells -> (indptr, sorted distinct leaf codes per record, repeats dropped)."""
    sep = attr.separator
    parts = [c.split(sep) if c else [] for c in cells]
    counts = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    flat = [x.strip() for p in parts for x in p]
    index = items.index
    ids = np.fromiter((index.get(x, -1) for x in flat), dtype=np.int64, count=len(flat))
    if (ids < 0).any():
        j = int(np.flatnonzero(ids < 0)[0])
        rec = int(np.searchsorted(np.cumsum(counts), j, side="right"))
        code = flat[j]
        node = items.node_index.get(code)
        if not code:
            msg, expected = "empty code", f"codes separated by a single {sep!r}"
        elif node is not None:
            msg, expected = "code is not a leaf of the hierarchy", "a most specific code"
        else:
            msg, expected = "unknown code", f"a leaf code of {items.source}"
        raise DataError(
            msg, file=src, line=int(lines[rec]), column=attr.name, value=code, expected=expected
        )
    rec_of = np.repeat(np.arange(len(cells), dtype=np.int64), counts)
    key = np.unique(rec_of * items.n_leaves + ids)
    rec_u = key // items.n_leaves
    indptr = np.zeros(len(cells) + 1, dtype=np.int64)
    np.cumsum(np.bincount(rec_u, minlength=len(cells)), out=indptr[1:])
    return indptr, (key % items.n_leaves).astype(np.int32), int(ids.size - key.size)


def csv_file(path: Path, columns: Sequence[str], data: Mapping[str, Sequence[str]]) -> Pending:
    """The released table as a pending file (columns in the given order)."""

    def body(fh: Any) -> None:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(columns)
        w.writerows(zip(*(data[c] for c in columns), strict=True))

    return Pending(path, body)


def write_csv(path: Path, columns: Sequence[str], data: Mapping[str, Sequence[str]]) -> None:
    """Columns in the given order, written atomically."""
    atomic_write_all([csv_file(path, columns, data)])
