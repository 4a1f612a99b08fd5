"""Reading a CSV input larger than a few KB: Arrow's streaming CSV reader (strict row widths,
columns not asked for never decoded), fed from the read-once byte stream through
:class:`fedanon.io.arrowfeed.ArrowFeed` (records longer than a block; Arrow's threads stopped
before any error leaves).  Messages name lines, never cells."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.errors import DataError
from fedanon.io.arrowfeed import ArrowFeed
from fedanon.io.batches import Batch, Batches, Location
from fedanon.io.bytestream import BLOCK_BYTES, InputStream


def width_error(fields: int, line: int | None, width: int, src: str) -> DataError:
    return DataError(
        f"row has {fields} fields", file=src, line=line, expected=f"{width} fields like the header"
    )


@dataclass
class _BadRow:
    expected: int
    actual: int
    number: int | None  # Arrow's row number (header = 1, blank lines skipped), if known


def large_batches(stream: InputStream, path: Path, header: list[str], wanted: list[str]) -> Batches:
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

    batches = _arrow_batches(stream, path, header, wanted)

    def close() -> None:
        """Stop Arrow's reader now (the generator's ``finally``), whatever stopped the reading:
        a consumer that fails on a batch (a value outside the spec's domain) leaves the
        generator suspended, and the exception's traceback keeps it alive -- in a daemon,
        through any reference cycle, until the interpreter's exit, where Arrow's threads can
        no longer drop what they hold (see :mod:`fedanon.io.arrowfeed`)."""
        try:
            batches.close()
        finally:
            stream.close()

    return Batches(src, header, batches, locate, "csv", close)


def _reopenable(path: Path) -> bool:
    """A regular file can be read a second time (to locate a ragged row exactly)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _open_arrow(
    feed: ArrowFeed, header: list[str], wanted: list[str], threads: bool, bad: list[_BadRow]
) -> Any:
    """Arrow's streaming reader of ``feed``; ragged rows are recorded in ``bad``.  The
    caller drops the reader and calls ``feed.release()`` before going on (see
    :mod:`fedanon.io.arrowfeed`).  What Arrow holds is passed inline, never kept in a local
    variable: a traceback through this frame must not keep it alive."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    text = pa.dictionary(pa.int32(), pa.binary())
    return pacsv.open_csv(
        feed.file,
        read_options=pacsv.ReadOptions(
            use_threads=threads, block_size=BLOCK_BYTES, column_names=header, skip_rows=1
        ),
        parse_options=_parse_options(feed, bad),
        convert_options=pacsv.ConvertOptions(
            include_columns=wanted,
            column_types={c: text for c in wanted},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            null_values=[],
        ),
    )


class _RecordRagged:
    """Arrow's invalid-row handler: records the row in ``bad`` and stops the read."""

    def __init__(self, bad: list[_BadRow]) -> None:
        self.bad = bad

    def __call__(self, row: Any) -> str:
        self.bad.append(_BadRow(row.expected_columns, row.actual_columns, row.number))
        return "error"


def _parse_options(feed: ArrowFeed, bad: list[_BadRow]) -> Any:
    import pyarrow.csv as pacsv

    handler = _RecordRagged(bad)
    feed.watch(handler)
    return pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=handler)


def _arrow_batches(
    stream: InputStream, path: Path, header: list[str], wanted: list[str]
) -> Generator[Batch, None, None]:
    import pyarrow as pa

    src = stream.src
    threads = _reopenable(path)
    bad: list[_BadRow] = []
    total = 0
    feed = ArrowFeed(stream)
    reader = None
    try:
        reader = _open_arrow(feed, header, wanted, threads, bad)
        while True:
            try:
                rb = reader.read_next_batch()
            except StopIteration:
                break
            cols = {name: _utf8(rb.column(i), total, stream, name) for i, name in enumerate(wanted)}
            yield Batch(total, cols, rb.num_rows)
            total += rb.num_rows
    except (pa.ArrowInvalid, OSError):
        _close(reader)
        reader = None
        feed.release()
        if stream.failure is not None:
            raise stream.failure from None
        if bad:
            raise _ragged(bad[0], path, header, wanted, stream) from None
        raise _malformed(stream, feed) from None
    finally:
        _close(reader)
        reader = None
        feed.release()
        stream.close()
    if total == 0:
        raise DataError("the input has a header but no records", file=src)


def _close(reader: Any) -> None:
    """Close Arrow's reader (the caller drops it, then waits for ``feed.release()``: an
    object its threads drop while the interpreter exits aborts the process)."""
    if reader is not None:
        reader.close()


def _malformed(stream: InputStream, feed: ArrowFeed) -> DataError:
    """Arrow refused the CSV (its message may quote the row: say only where)."""
    exact = stream.lines.exact
    if feed.oversized is not None:
        return DataError(
            f"a record longer than {_mb(feed.limit)}, or a quoted field that is never closed",
            file=stream.src,
            line=feed.oversized if exact else None,
            expected=f"records under {_mb(feed.limit)} with every quote closed",
        )
    return DataError(
        "malformed CSV (an unterminated quoted field, or a field Arrow cannot read)",
        file=stream.src,
        expected="RFC 4180 CSV: fields with commas, quotes or newlines in double quotes",
    )


def _mb(n: int) -> str:
    return f"{n / (1 << 20):g} MB"


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
        feed = ArrowFeed(again)
        bad: list[_BadRow] = []
        reader = None
        try:
            reader = _open_arrow(feed, header, wanted, False, bad)
            for _ in reader:
                pass
        except (pa.ArrowInvalid, OSError):
            pass
        finally:
            _close(reader)
            reader = None
            feed.release()
            again.close()
        if bad:
            number, actual, lines = bad[0].number, bad[0].actual, again.lines
    line = lines.line_of(number - 2) if number is not None else None
    return width_error(actual, line, len(header), stream.src)


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


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
