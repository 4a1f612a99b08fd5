"""Reading a released table for an audit: its header, and the columns the recount needs as text.

The released table is taken as text: every cell is a label, compared exactly as written
(surrounding blanks dropped, as the input reader does), so ``34``, ``34.0`` and ``[30-60)``
are three different labels and nothing is parsed as a number or turned into a missing value.
CSV (gzip recognised by its magic bytes, a UTF-8 byte order mark dropped, header on the first
line) and Parquet files are read, and DataFrames (cells as the text a CSV would hold).  The
whole header is returned, so that the column rule (:mod:`fedanon.privacy.columns`) sees every
column; only the cells of the wanted ones are kept (an identifier column is never parsed).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import re
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import pandas as pd

from fedanon.errors import DataError, InputError
from fedanon.io.arrowfeed import MAX_RECORD_BYTES  # the input readers' limit (numpy only)

PARQUET_MAGIC = b"PAR1"


def released_frame(
    table: pd.DataFrame | Path, wanted: Sequence[str], sep: str = ","
) -> tuple[list[str], pd.DataFrame]:
    """The header of ``table`` (a DataFrame or a file) and a frame of text holding those of
    the ``wanted`` columns it has (a missing one is left to the caller's column check)."""
    if isinstance(table, pd.DataFrame):
        from fedanon.io.frames import text_frame

        header = [str(c) for c in table.columns]
        frame = table.set_axis(header, axis=1)  # a new frame; the caller's is unchanged
        keep = [c for c in dict.fromkeys(wanted) if header.count(c) == 1]
        return header, text_frame(frame, keep).reset_index(drop=True)
    return read_release(table, wanted, sep)


def read_released(path: Path, columns: Sequence[str] | None = None, sep: str = ",") -> pd.DataFrame:
    """A released table as a frame of strings, only ``columns`` kept when given (DataError,
    exit 2, when one is missing).  Every CSV record must have as many fields as the header;
    typed Parquet cells become the text a CSV would hold (:func:`fedanon.io.frames.cell_text`)."""
    header, frame = read_release(path, columns, sep)
    for name in columns or ():
        if name not in frame.columns:
            hint = f" (separator {sep!r}: is it the right one?)" if len(header) == 1 else ""
            raise DataError(
                f"the released table lacks a column{hint}",
                file=str(path),
                line=1,
                column=name,
                expected=f"a header naming {', '.join(columns or ())}",
            )
    return frame


def read_release(
    path: Path, wanted: Sequence[str] | None = None, sep: str = ",", *, comments: bool = False
) -> tuple[list[str], pd.DataFrame]:
    """The header of the released file and a frame of text holding those of the ``wanted``
    columns (every column when None) that it has, in the order of ``wanted``.  With
    ``comments``, lines before the header that start with ``#`` are skipped (a seeded DiffGen
    release starts with ``# NOT PRIVATE``)."""
    src = str(path)
    sep = {"\\t": "\t", "tab": "\t"}.get(sep, sep)  # a tab is hard to type in a shell
    if len(sep) != 1:
        raise InputError("the separator must be one character", value=sep)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read the released table: {exc.strerror}", file=src) from exc
    if data[:4] == PARQUET_MAGIC or path.name.lower().endswith((".parquet", ".pq")):
        return _read_parquet(data, wanted, src)
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise DataError(f"corrupt or truncated gzip data ({exc})", file=src) from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError("the released table is not UTF-8 text", file=src, line=line) from exc
    at = [0]  # the offset where the next record starts
    reader = csv.reader(_lines(text, at), delimiter=sep)
    header: list[str] | None = None
    cols: list[list[str]] = []
    keep: list[int] = []
    records = 0
    start = (0, 1)  # the offset and line of the record being read
    try:
        with _field_limit(MAX_RECORD_BYTES):
            for row in reader:
                if at[0] == len(text):  # it runs to the end: a quote left open?
                    _unterminated(text, start, sep, src)
                line, start = start[1], (at[0], reader.line_num + 1)
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                if header is None and comments and row[0].lstrip().startswith("#"):
                    continue
                if header is None:
                    header = [h.strip() for h in row]
                    _no_repeats(header, src)
                    names = header if wanted is None else [w for w in wanted if w in header]
                    keep = [header.index(name) for name in dict.fromkeys(names)]
                    cols = [[] for _ in keep]
                    continue
                if len(row) != len(header):
                    raise DataError(
                        f"row has {len(row)} fields",
                        file=src,
                        line=line,
                        expected=f"{len(header)} fields like the header (separator {sep!r})",
                    )
                records += 1
                for out, j in zip(cols, keep, strict=True):
                    out.append(row[j].strip())
    except csv.Error as exc:  # a field over the limit (the message quotes no cell)
        _unterminated(text, start, sep, src)
        raise DataError(
            f"a field longer than {MAX_RECORD_BYTES >> 20} MB, or malformed CSV ({exc})",
            file=src,
            line=start[1],
            expected=f"fields under {MAX_RECORD_BYTES >> 20} MB (RFC 4180 CSV)",
        ) from exc
    if header is None:
        raise DataError("the released table is empty", file=src, expected="a header line")
    if records == 0:
        raise DataError("the released table has a header but no records", file=src)
    frame = pd.DataFrame(
        {header[j]: c for j, c in zip(keep, cols, strict=True)},
        index=pd.RangeIndex(records),
        dtype=object,
    )
    return header, frame


def _lines(text: str, at: list[int]) -> Iterator[str]:
    """The lines of ``text`` as the csv module splits them (``\\n``, ``\\r\\n`` or a bare
    ``\\r``, nothing translated); ``at[0]`` is the offset after the last line handed out."""
    for line in io.StringIO(text, newline=""):
        at[0] += len(line)
        yield line


@contextlib.contextmanager
def _field_limit(limit: int) -> Iterator[None]:
    """The csv module's field size limit raised to ``limit`` (it is per process: restored)."""
    old = csv.field_size_limit(max(limit, csv.field_size_limit()))
    try:
        yield
    finally:
        csv.field_size_limit(old)


_TERM = re.compile(r"\r\n|\r|\n")


def _unterminated(text: str, start: tuple[int, int], sep: str, src: str) -> None:
    """DataError naming the line where a quoted field opens that is never closed, when the
    record at ``start`` (offset, line) runs to the end of ``text`` inside quotes.  The fields
    are scanned as the csv module reads them: a quote opens a quoted field only at the start of
    a field, ``""`` inside one is a quote, and after its closing quote the field runs on to the
    separator (a quote there is a character)."""
    pos = start[0]
    if '"' not in text[pos:]:
        return
    plain = re.compile(f"[^{re.escape(sep)}\r\n]*")
    quoted = re.compile(r'"[^"]*(?:""[^"]*)*')
    while pos < len(text):
        if text[pos] == '"':
            end = quoted.match(text, pos).end()  # type: ignore[union-attr]
            if end >= len(text):
                line = start[1] + len(_TERM.findall(text, start[0], pos))
                raise DataError(
                    "unterminated quoted field (it opens here and runs to the end of the file)",
                    file=src,
                    line=line,
                    expected='a closing double quote (a quote inside a quoted field written "")',
                )
            pos = end + 1
        pos = plain.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text) or text[pos] != sep:
            return  # the record ends (a line terminator) before the end of the text
        pos += 1


def _no_repeats(header: Sequence[str], src: str) -> None:
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise DataError("a column name occurs twice in the header", file=src, line=1, column=dup[0])


def _read_parquet(
    data: bytes, wanted: Sequence[str] | None, src: str
) -> tuple[list[str], pd.DataFrame]:
    from fedanon.io.frames import text_frame

    try:
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(io.BytesIO(data))
        header = [str(n) for n in pf.schema_arrow.names]
        _no_repeats(header, src)
        names = header if wanted is None else [w for w in dict.fromkeys(wanted) if w in header]
        # the columns as the file holds them: a pandas index stored in it (to_parquet of a
        # frame with set_index) stays a column, whatever the pandas metadata says
        table = pf.read(columns=names, use_pandas_metadata=False)
        frame = table.to_pandas(ignore_metadata=True)
    except ImportError as exc:
        raise DataError("reading Parquet needs pyarrow", file=src) from exc
    except (OSError, ValueError) as exc:
        raise DataError(f"not a readable Parquet file ({type(exc).__name__})", file=src) from None
    if pf.metadata.num_rows == 0:
        raise DataError("the released table has no records", file=src)
    return header, text_frame(frame, list(frame.columns)).reset_index(drop=True)
