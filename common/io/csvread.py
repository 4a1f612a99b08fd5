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
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.errors import DataError
from fedanon.io.bytestream import BLOCK_BYTES, InputStream
from fedanon.io.columns import Column, columns_from_batches, use_system_allocator
from fedanon.io.sources.batches import Batch, Batches, Location

SMALL_INPUT_BYTES = 64 << 10  # below this the csv module is as fast as Arrow (tiny inputs)

__all__ = ["Column", "check_header", "read_batches", "read_columns"]


def read_batches(
    path: Path, declared: Collection[str] | None = None, include: Collection[str] | None = None
) -> Batches:
    """The CSV as :class:`Batches` of the ``include`` columns (None: all).  With ``declared``
    (the spec's column names) the header must name exactly those."""
    use_system_allocator()
    stream = InputStream(path)
    src = stream.src
    try:
        want = max(SMALL_INPUT_BYTES + 1, 1 << 16)
        head = stream.prefix(want)
        while b"\n" not in head and len(head) == want:  # a header line longer than that
            want *= 2
            head = stream.prefix(want)
        header = _header(head, src)
        if declared is not None:
            check_header(header, declared, src)
        _check_distinct(header, src)
        wanted = [h for h in header if include is None or h in include]
        if len(head) <= SMALL_INPUT_BYTES:
            data = stream.read()
            stream.close()
            return _small(data, header, wanted, src)
    except BaseException:
        stream.close()
        raise
    return _large(stream, path, header, wanted)


def _header(head: bytes, src: str) -> list[str]:
    first = head.split(b"\n", 1)[0]
    if not first.strip():
        raise DataError("the input is empty", file=src, expected="a header line")
    return [h.strip() for h in next(csv.reader([_decode(first, src)]))]


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


def _width_error(fields: int, line: int | None, width: int, src: str) -> DataError:
    return DataError(
        f"row has {fields} fields", file=src, line=line, expected=f"{width} fields like the header"
    )


# small inputs: the csv module ----------------------------------------------------------------


def _csv_rows(text: str, width: int, src: str) -> tuple[list[list[str]], list[int]]:
    """Records after the header and the line each starts on (quotes honoured)."""
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


# large inputs: Arrow's streaming reader -----------------------------------------------------


@dataclass
class _BadRow:
    expected: int
    actual: int
    number: int | None  # Arrow's row number (header = 1, blank lines skipped), if known


def _large(stream: InputStream, path: Path, header: list[str], wanted: list[str]) -> Batches:
    src = stream.src
    lines = stream.lines

    def locate(record: int) -> Location:
        if lines.exact and record < lines.records:
            return Location(line=lines.line_of(record))
        return Location(
            row=f"record {record + 1} (line unknown: the file has carriage returns "
            "without line feeds)"
            if not lines.exact
            else f"record {record + 1}"
        )

    return Batches(
        src, header, _arrow_batches(stream, path, header, wanted), locate, "csv",
        stream.close,
    )  # fmt: skip


def _reopenable(path: Path) -> bool:
    """A regular file can be read a second time (to locate a ragged row exactly)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _open_arrow(
    stream: Any, header: list[str], wanted: list[str], threads: bool, bad: list[_BadRow]
) -> Any:
    """Arrow's streaming reader; ragged rows are recorded in ``bad``."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    def on_invalid(row: Any) -> str:
        bad.append(_BadRow(row.expected_columns, row.actual_columns, row.number))
        return "error"

    text = pa.dictionary(pa.int32(), pa.binary())
    reader = pacsv.open_csv(
        stream,
        read_options=pacsv.ReadOptions(
            use_threads=threads, block_size=BLOCK_BYTES, column_names=header, skip_rows=1
        ),
        parse_options=pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=on_invalid),
        convert_options=pacsv.ConvertOptions(
            include_columns=wanted,
            column_types={c: text for c in wanted},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            null_values=[],
        ),
    )
    return reader


def _arrow_batches(
    stream: InputStream, path: Path, header: list[str], wanted: list[str]
) -> Iterator[Batch]:
    import pyarrow as pa

    src = stream.src
    threads = _reopenable(path)
    bad: list[_BadRow] = []
    total = 0
    try:
        reader = _open_arrow(stream, header, wanted, threads, bad)
        while True:
            try:
                rb = reader.read_next_batch()
            except StopIteration:
                break
            cols = {name: _utf8(rb.column(i), total, stream, name) for i, name in enumerate(wanted)}
            yield Batch(total, cols, rb.num_rows)
            total += rb.num_rows
    except (pa.ArrowInvalid, OSError):
        if stream.failure is not None:
            raise stream.failure from None
        if bad:
            raise _ragged(bad[0], path, header, wanted, stream) from None
        # Arrow's message may quote the row: say only where reading stopped
        raise DataError(
            "malformed CSV (an unterminated quoted field, or a field Arrow cannot read)",
            file=src,
            line=stream.lines.line_of(stream.lines.records) if stream.lines.records else None,
            expected="RFC 4180 CSV: fields with commas, quotes or newlines in double quotes",
        ) from None
    finally:
        stream.close()
    if total == 0:
        raise DataError("the input has a header but no records", file=src)


def _ragged(
    first: _BadRow, path: Path, header: list[str], wanted: list[str], stream: InputStream
) -> DataError:
    """The physical line of the first ragged row: Arrow numbers rows only when it reads
    serially, so a threaded read of a regular file is repeated serially to find it."""
    import pyarrow as pa

    lines = stream.lines
    number = first.number
    actual = first.actual
    if number is None and _reopenable(path):
        again = InputStream(path)
        bad: list[_BadRow] = []
        try:
            reader = _open_arrow(again, header, wanted, False, bad)
            for _ in reader:
                pass
        except (pa.ArrowInvalid, OSError):
            pass
        finally:
            again.close()
        if bad:
            number, actual, lines = bad[0].number, bad[0].actual, again.lines
    line = lines.line_of(number - 2) if number is not None else None
    return _width_error(actual, line, len(header), stream.src)


def _utf8(arr: Any, start: int, stream: InputStream, name: str) -> Any:
    """A dictionary<int32, binary> column as dictionary<int32, string>, or the line of the
    first cell that is not UTF-8."""
    import pyarrow as pa

    try:
        return pa.DictionaryArray.from_arrays(arr.indices, arr.dictionary.cast(pa.string()))
    except pa.ArrowInvalid:
        pass
    entries = arr.dictionary.to_pylist()
    bad = next(i for i, b in enumerate(entries) if not _is_utf8(b))
    rows = np.flatnonzero(arr.indices.to_numpy(zero_copy_only=False) == bad)
    record = start + int(rows[0])
    line = _line(stream, record)
    return _raise(DataError("input is not UTF-8 text", file=stream.src, line=line, column=name))


def _line(stream: InputStream, record: int) -> int | None:
    return stream.lines.line_of(record) if record < stream.lines.records else None


def _raise(exc: DataError) -> Any:
    raise exc


def _is_utf8_text(v: str) -> bool:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
