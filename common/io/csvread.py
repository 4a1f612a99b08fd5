"""Reading a CSV input once, as batches of dictionary-encoded Arrow columns.

The file is read exactly once (pipes, FIFOs and ``/dev/stdin`` work), gzip is recognised by
its magic bytes, a UTF-8 byte order mark is dropped, and every record remembers the physical
line it starts on (blank lines and quoted fields spanning lines count, see
:mod:`fedanon.io.lines`), so errors point at the line an editor shows.  Small inputs go through
the csv module; larger ones through Arrow's streaming CSV reader (strict row widths, columns
not asked for are never decoded) without ever holding the whole file.  Error messages never
contain a cell of the file: they may reach a leader or a log.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Collection
from pathlib import Path

import numpy as np

from fedanon.errors import DataError
from fedanon.io.batches import Batch, Batches, Location
from fedanon.io.bytestream import InputStream
from fedanon.io.columns import Column, columns_from_batches, use_system_allocator
from fedanon.io.csvarrow import large_batches, width_error

SMALL_INPUT_BYTES = 64 << 10  # below this the csv module is as fast as Arrow (tiny inputs)
MAX_HEADER_BYTES = 1 << 20  # the header line's limit (it is read before any record)

__all__ = ["Column", "check_header", "read_batches", "read_columns"]


def read_batches(
    path: Path,
    declared: Collection[str] | None = None,
    include: Collection[str] | None = None,
    optional: Collection[str] = (),
) -> Batches:
    """The CSV as :class:`Batches` of the ``include`` columns (None: all).  With ``declared``
    (the spec's column names) the header must name exactly those (``optional``: or lack
    these)."""
    use_system_allocator()
    stream = InputStream(path)
    src = stream.src
    try:
        want = max(SMALL_INPUT_BYTES + 1, 1 << 16)
        head = stream.prefix(want)
        while _header_end(head) < 0 and len(head) == want:  # a header line longer than that
            if want > MAX_HEADER_BYTES:
                raise DataError(
                    f"the first line is longer than {MAX_HEADER_BYTES >> 20} MB",
                    file=src,
                    line=1,
                    expected="a header line naming the columns",
                )
            want *= 2
            head = stream.prefix(want)
        header = _header(head, src)
        if declared is not None:
            check_header(header, declared, src, optional=optional)
        _check_distinct(header, src)
        wanted = [h for h in header if include is None or h in include]
        if len(head) <= SMALL_INPUT_BYTES:
            data = stream.read()
            stream.close()
            return _small(data, header, wanted, src)
    except BaseException:
        stream.close()
        raise
    return large_batches(stream, path, header, wanted)


def _header_end(head: bytes) -> int:
    """Where the first line ends: its line feed or carriage return (-1: not in ``head``)."""
    ends = [i for i in (head.find(b"\n"), head.find(b"\r")) if i >= 0]
    return min(ends) if ends else -1


def _header(head: bytes, src: str) -> list[str]:
    end = _header_end(head)
    first = head[:end] if end >= 0 else head
    if not first.strip():
        raise DataError("the input is empty", file=src, expected="a header line")
    try:
        return [h.strip() for h in next(csv.reader([_decode(first, src)]))]
    except csv.Error as exc:  # e.g. a quote left open: the message quotes no cell
        raise DataError(f"malformed header line: {exc}", file=src, line=1) from exc


def _check_distinct(header: list[str], src: str) -> None:
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


def check_header(
    header: list[str],
    declared: Collection[str],
    src: str,
    *,
    schema: bool = False,
    optional: Collection[str] = (),
) -> None:
    """The first line names declared columns.  When it looks like a record instead (most
    fields unknown, or an unknown field is a number), say so without echoing any field: it
    may be a patient's data and this message may reach the leader or a log.  ``schema``:
    the names are a Parquet file's or a query's columns (no line, never a record);
    ``optional``: declared columns the table may lack."""
    names = list(declared)
    unknown = [h for h in header if h not in declared]
    line = None if schema else 1
    looks_like_record = 2 * len(unknown) > len(header) or any(_numeric(h) for h in unknown)
    if looks_like_record and not schema:
        sep = _other_separator(header, declared)
        if sep is not None:  # the declared names, joined by another delimiter
            raise DataError(
                f"the first line holds the declared column names separated by {sep!r}",
                file=src,
                line=1,
                expected="',' between fields (a comma-separated CSV: save the table with ','"
                " as the separator)",
            )
        raise DataError(
            f"the first line must be the header: {','.join(names)} "
            f"(it has {len(header)} fields, {len(header) - len(unknown)} of them declared "
            "column names)",
            file=src,
            line=1,
        )
    if unknown:
        lacking = [n for n in names if n not in header and n not in optional]
        raise DataError(
            "column is not declared in the spec"
            + (f" (the spec declares {lacking[0]!r}, which the header lacks)" if lacking else ""),
            file=src,
            line=line,
            column=unknown[0],
            expected="every column declared as [[attribute]] (role 'other' to keep it)",
        )
    for name in names:
        if name not in header and name not in optional:
            raise DataError(f"declared column {name!r} is missing", file=src, line=line)


def _other_separator(header: list[str], declared: Collection[str]) -> str | None:
    """The delimiter (';', tab or '|') that splits a one-field first line into mostly
    declared column names, if any: a table exported with another separator."""
    if len(header) != 1:
        return None
    for sep in (";", "\t", "|"):
        fields = [f.strip().strip('"') for f in header[0].split(sep)]
        if len(fields) > 1 and 2 * sum(f in declared for f in fields) > len(fields):
            return sep
    return None


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_columns(path: Path) -> tuple[list[str], dict[str, Column]]:
    """Header and every column, dictionary-encoded with sorted, stripped values."""
    b = read_batches(path)
    try:
        return b.header, columns_from_batches(b)
    finally:
        b.close()


def _decode(data: bytes, src: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError("input is not UTF-8 text", file=src, line=line) from exc


# small inputs: the csv module ----------------------------------------------------------------


def _csv_rows(text: str, width: int, src: str) -> tuple[list[list[str]], list[int]]:
    """Records after the header and the line each starts on (quotes honoured)."""
    # newline="": lines end at \n, \r\n or a bare \r (as for Arrow), nothing is translated
    reader = csv.reader(io.StringIO(text, newline=""))
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
                raise width_error(len(row), start, width, src)
            rows.append(row)
            starts.append(start)
    except csv.Error as exc:
        raise DataError(f"malformed CSV: {exc}", file=src, line=prev + 1) from exc
    return rows, starts


def _small(data: bytes, header: list[str], wanted: list[str], src: str) -> Batches:
    import pyarrow as pa

    # undecodable bytes are kept as surrogates and refused only in columns the run reads
    rows, starts = _csv_rows(data.decode("utf-8", "surrogateescape"), len(header), src)
    if not rows:
        raise DataError("the input has a header but no records", file=src)
    cols: dict[str, pa.Array] = {}
    for name in wanted:
        j = header.index(name)
        seen: dict[str, int] = {}
        codes = np.fromiter(
            (seen.setdefault(r[j], len(seen)) for r in rows), dtype=np.int32, count=len(rows)
        )
        values = list(seen)
        for i, v in enumerate(values):
            if not _is_utf8_text(v):
                line = starts[int(np.flatnonzero(codes == i)[0])]
                raise DataError("input is not UTF-8 text", file=src, line=line, column=name)
        cols[name] = pa.DictionaryArray.from_arrays(codes, pa.array(values, pa.string()))
    lines = np.asarray(starts, dtype=np.int64)

    def locate(record: int) -> Location:
        return Location(line=int(lines[record]))

    return Batches(src, header, iter([Batch(0, cols, len(rows))]), locate)


def _is_utf8_text(v: str) -> bool:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
