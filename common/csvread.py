"""Reading a CSV input once into dictionary-encoded columns.

The file is read exactly once (pipes, FIFOs and ``/dev/stdin`` work), gzip is recognised by
its magic bytes, a UTF-8 byte order mark is dropped, and every record remembers the physical
line it starts on (blank lines and quoted fields spanning lines count), so errors point at the
line an editor shows.  Error messages never contain a cell of the file: they may reach a
leader or a log.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from common.errors import DataError

IntArray = npt.NDArray[np.int64]
StrArray = npt.NDArray[np.str_]

SMALL_INPUT_BYTES = 8 << 20  # below this the csv module beats pandas' import time
GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Column:
    """One input column, dictionary-encoded: ``values[codes]`` is the column."""

    values: tuple[str, ...]
    codes: IntArray

    def strings(self) -> StrArray:
        return np.asarray(self.values, dtype=object)[self.codes]

    def first_row_with(self, value_index: int) -> int:
        return int(np.flatnonzero(self.codes == value_index)[0])


@dataclass(frozen=True)
class RawTable:
    """A parsed input: header, columns, and where each record starts in the file."""

    source: str
    header: list[str]
    columns: dict[str, Column]
    lines: IntArray | None  # physical start line of each record; None: record i on line i + 2

    def line_of(self, record: int) -> int:
        return int(self.lines[record]) if self.lines is not None else record + 2


def read_bytes(path: Path) -> bytes:
    """The whole input, read once, gunzipped if it is gzip, without a byte order mark."""
    src = str(path)
    try:
        with path.open("rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise DataError(f"cannot read input: {exc.strerror}", file=src) from exc
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except EOFError as exc:
            raise DataError(
                "the gzip file is truncated (it ends inside the compressed stream)",
                file=src,
                expected="a complete .gz file (copy or download it again)",
            ) from exc
        except (OSError, zlib.error) as exc:
            raise DataError(
                f"corrupt gzip data ({exc})",
                file=src,
                expected="a valid .gz file (copy or download it again)",
            ) from exc
    elif path.name.lower().endswith(".gz"):
        raise DataError(
            "the file is named .gz but is not gzip-compressed",
            file=src,
            expected="a gzip file, or a plain CSV without the .gz suffix",
        )
    return raw[len(UTF8_BOM) :] if raw.startswith(UTF8_BOM) else raw


def read_table(path: Path, declared: Collection[str] | None = None) -> RawTable:
    """Parse a CSV (optionally gzip) into dictionary-encoded columns: the csv module for small
    inputs, pandas' C parser (categorical columns, little memory) for large ones.  With
    ``declared`` (the spec's column names, in order) the header must name exactly those."""
    src = str(path)
    data = read_bytes(path)
    first = data.split(b"\n", 1)[0]
    if not first.strip():
        raise DataError("the input is empty", file=src, expected="a header line")
    header = [h.strip() for h in next(csv.reader([_decode(first, src)]))]
    if declared is not None:
        check_header(header, declared, src)
    seen: dict[str, int] = {}
    for i, h in enumerate(header, 1):
        if h in seen:  # the first line may be a record: name positions, not cells
            raise DataError(
                f"fields {seen[h]} and {i} of the first line are equal",
                file=src,
                line=1,
                expected="a header line with distinct column names",
            )
        seen[h] = i
    if len(data) < SMALL_INPUT_BYTES:
        raw, lines = _parse_small(data, len(header), src)
    else:
        raw, lines = _parse_large(data, header, src)
    cols: dict[str, Column] = {}
    for name, (values, codes) in zip(header, raw, strict=True):
        stripped = [v.strip() for v in values]
        uniq = sorted(set(stripped))
        index = {v: i for i, v in enumerate(uniq)}
        remap = np.asarray([index[v] for v in stripped], dtype=np.int64)
        cols[name] = Column(tuple(uniq), remap[codes])
    return RawTable(src, header, cols, lines)


def check_header(header: list[str], declared: Collection[str], src: str) -> None:
    """The first line names declared columns.  When it looks like a record instead (most
    fields unknown, or an unknown field is a number), say so without echoing any field: it
    may be a patient's data and this message may reach the leader or a log."""
    names = list(declared)
    unknown = [h for h in header if h not in declared]
    if 2 * len(unknown) > len(header) or any(_numeric(h) for h in unknown):
        raise DataError(
            f"the first line must be the header: {','.join(names)} "
            f"(it has {len(header)} fields, {len(header) - len(unknown)} of them declared "
            "column names)",
            file=src,
            line=1,
        )
    if unknown:
        raise DataError(
            "column is not declared in the spec",
            file=src,
            line=1,
            column=unknown[0],
            expected="every column declared as [[attribute]] (role 'other' to keep it)",
        )
    for name in names:
        if name not in header:
            raise DataError(f"declared column {name!r} is missing", file=src, line=1)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_columns(path: Path) -> tuple[list[str], dict[str, Column]]:
    t = read_table(path)
    return t.header, t.columns


def _decode(data: bytes, src: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError("input is not UTF-8 text", file=src, line=line) from exc


def _regular(lines: IntArray) -> IntArray | None:
    """None when record i starts on line i + 2 (no blank lines, no multi-line fields)."""
    if lines.size == 0 or int(lines[-1]) == lines.size + 1:
        return None  # strictly increasing from >= 2: the last one pins them all
    return lines


def _width_error(fields: int, line: int, width: int, src: str) -> DataError:
    return DataError(
        f"row has {fields} fields", file=src, line=line, expected=f"{width} fields like the header"
    )


def _csv_rows(
    text: str, width: int, src: str, keep: bool = True
) -> tuple[list[list[str]], IntArray]:
    """Records after the header (if ``keep``) and the line each starts on (csv module,
    quotes honoured)."""
    reader = csv.reader(io.StringIO(text))
    rows: list[list[str]] = []
    starts: list[int] = []
    prev = 0
    try:
        next(reader)
        prev = reader.line_num
        for row in reader:
            start, prev = prev + 1, reader.line_num
            if not row:
                continue
            if len(row) != width:
                raise _width_error(len(row), start, width, src)
            if keep:
                rows.append(row)
            starts.append(start)
    except csv.Error as exc:
        raise DataError(f"malformed CSV: {exc}", file=src, line=prev + 1) from exc
    return rows, np.asarray(starts, dtype=np.int64)


def _parse_small(
    data: bytes, width: int, src: str
) -> tuple[list[tuple[list[str], IntArray]], IntArray | None]:
    rows, starts = _csv_rows(_decode(data, src), width, src)
    if not rows:
        raise DataError("the input has a header but no records", file=src)
    out = []
    for j in range(width):
        seen: dict[str, int] = {}
        codes = [seen.setdefault(r[j], len(seen)) for r in rows]
        out.append((list(seen), np.asarray(codes, dtype=np.int64)))
    return out, _regular(starts)


def _line_starts(data: bytes, width: int, src: str) -> IntArray:
    """Every non-blank line after the header has ``width`` fields (pandas pads short rows
    silently); returns the line each record starts on.  Vectorised unless quotes occur."""
    if b'"' in data:  # quoted fields may hold commas or newlines: let the csv module count
        return _csv_rows(_decode(data, src), width, src, keep=False)[1]
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
    blank[0] = False  # the header
    bad = np.flatnonzero((fields != width) & ~blank)
    if bad.size:
        line = int(bad[0])
        raise _width_error(int(fields[line]), line + 1, width, src)
    records = np.flatnonzero(~blank[1:]) + 2
    return np.asarray(records, dtype=np.int64)


def _parse_large(
    data: bytes, header: list[str], src: str
) -> tuple[list[tuple[list[str], IntArray]], IntArray | None]:
    import pandas as pd

    starts = _line_starts(data, len(header), src)
    if starts.size == 0:
        raise DataError("the input has a header but no records", file=src)
    try:
        frame = pd.read_csv(
            io.BytesIO(data),
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
            "malformed row",
            file=src,
            line=int(m.group(1)) if m else None,
            expected=f"{len(header)} fields like the header",
        ) from exc
    except UnicodeDecodeError as exc:
        _decode(data, src)  # raises with the line
        raise DataError("input is not UTF-8 text", file=src) from exc
    if len(frame) != starts.size:  # pandas saw other records than the csv module: trust csv
        return _parse_small(data, len(header), src)
    out = []
    for name in header:
        cat = frame[name].cat
        codes = cat.codes.to_numpy().astype(np.int64)
        if (codes < 0).any():
            raise DataError(
                "row has too few fields",
                file=src,
                line=int(starts[int(np.flatnonzero(codes < 0)[0])]),
                column=name,
                expected=f"{len(header)} fields like the header",
            )
        out.append(([str(v) for v in cat.categories], codes))
    return out, _regular(starts)
