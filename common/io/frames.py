"""A pandas DataFrame as the engine's input: the same text the CSV reader would see.

Every cell becomes the string a CSV file would hold, and those bytes go through the CSV
reader and encoder (:func:`fedanon.io.table.encode_table`) unchanged, through a pipe: nothing is
written to disk, and a DataFrame is encoded, validated and reported on exactly as the same
table saved as CSV (header check, leaf lookup, numeric domains, declared values).

How cells become text (the one choice a CSV file does not make for us):

* strings as they are (the reader drops surrounding blanks, as for a file);
* integers in decimal (``34``), booleans as ``True`` / ``False``;
* floats: an integral value within 2^53 is written as an integer (``34.0`` -> ``34``: a column
  of whole numbers turns float in pandas as soon as one value is missing, and the file it was
  read from said ``34``); any other float in the shortest form that reads back as the same
  value at its precision (``34.5``, ``0.1``, ``1e-07``; a float32 0.1 is ``0.1`` too);
* a missing value (NaN, None, NA, NaT) is an empty cell, as ``DataFrame.to_csv`` writes it
  (an empty QID cell is then rejected like an empty cell of a file);
* categorical columns: their categories formatted by the same rules; anything else by str().
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from fedanon.errors import DataError, InputError
from fedanon.io.csvread import check_header
from fedanon.io.table import EncodedTable, Schema, encode_table

SOURCE = "<DataFrame>"
EXACT_INT = 2**53  # floats below this are integers exactly when integral


def cell_text(value: Any) -> str:
    """One cell as CSV text (see the module docstring)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        f = float(value)
        if f != f:
            return ""
        if f.is_integer() and abs(f) < EXACT_INT:
            return str(int(f))
        return str(value) if isinstance(value, np.floating) else repr(f)
    return str(value)


def column_text(series: pd.Series) -> npt.NDArray[np.object_]:
    """A column as an object array of str, formatting each distinct value once (cell by
    cell when a cell cannot be hashed: a list or a dict, written by str() as to_csv does)."""
    try:
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
    except TypeError:  # unhashable cells
        return np.asarray([cell_text(v) for v in series.to_numpy(dtype=object)], dtype=object)
    labels = np.asarray([*(cell_text(v) for v in uniques), ""], dtype=object)
    return np.asarray(labels[codes], dtype=object)  # code -1 (missing) -> the last, ""


def text_frame(frame: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """``frame`` (or its ``columns``) with every cell as CSV text."""
    names = list(frame.columns) if columns is None else columns
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise InputError("the DataFrame lacks a column", file=SOURCE, column=str(missing[0]))
    return pd.DataFrame(
        {str(c): column_text(frame[c]) for c in names}, index=frame.index, dtype=object
    )


def frame_csv(frame: pd.DataFrame) -> bytes:
    """The CSV file (UTF-8, header first) a reader would see for ``frame``."""
    return _csv_bytes(text_frame(frame))


def _csv_bytes(text: pd.DataFrame) -> bytes:
    # records end in CRLF so that the csv writer quotes a cell holding a bare CR as well (with
    # "\n" it quotes only cells with a LF, and a CR left bare ends the record for the reader)
    csv_text: str = text.to_csv(index=False, lineterminator="\r\n")
    return csv_text.encode("utf-8")


def _row_lines(text: pd.DataFrame) -> npt.NDArray[np.int64]:
    """The physical line each row of the CSV starts on (the header is line 1), then the line
    after the last row: a cell holding line breaks (LF, CRLF or CR, each one line as the
    reader counts them) pushes the rows after it down."""
    lines = np.ones(len(text), dtype=np.int64)
    for c in text.columns:
        lines += text[c].str.count("\r\n|\r|\n").to_numpy(dtype=np.int64)
    return np.concatenate(([2], 2 + np.cumsum(lines)))


def encode_frame(schema: Schema, frame: pd.DataFrame) -> EncodedTable:
    """Encode ``frame`` exactly as :func:`fedanon.io.table.encode_table` encodes a CSV file;
    input errors name the DataFrame row (position and index label) instead of a line."""
    if frame.empty and len(frame.columns) == 0:
        raise InputError("the DataFrame has no columns", file=SOURCE)
    _check_names(schema, frame)
    text = text_frame(frame)
    try:
        data = _csv_bytes(text)
    except UnicodeEncodeError:  # a lone surrogate (e.g. bytes decoded with surrogateescape)
        raise _not_unicode(text, frame) from None
    try:
        return _through_pipe(schema, data)
    except _PipeInputError as wrapped:
        # an error's line gives the row; a large input with bare CRs is counted in records
        # by the reader (docs/anonymize.md), so only there the line is not mapped
        bare_cr = data.count(b"\r") != data.count(b"\r\n") and len(data) >= 65536
        starts = None if bare_cr else _row_lines(text)
        raise _relabel(wrapped.error, frame, starts) from None


def _check_names(schema: Schema, frame: pd.DataFrame) -> None:
    """The column labels are the header (as text, blanks dropped as the reader drops them):
    distinct, and checked as names (never as a record that might be a first data line, as
    a CSV's first line is): a label 0 or 1.5 is an undeclared column, not a missing header."""
    names = [str(c).strip() for c in frame.columns]
    where = f"{SOURCE} header"
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            raise DataError(
                f"the columns at positions {seen[name]} and {i} have the same name",
                file=where,
                column=name,
                expected="distinct column names (a column selected twice, or a merge's "
                "suffixes dropped?)",
            )
        seen[name] = i
    check_header(names, [a.name for a in schema.spec.attributes], where, schema=True)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _not_unicode(text: pd.DataFrame, frame: pd.DataFrame) -> InputError:
    """The first cell (or column name) that cannot be written as UTF-8, named without its
    value (it cannot be printed either)."""
    message = "not valid Unicode text (it holds a lone surrogate, e.g. from bytes decoded"
    message += " with errors='surrogateescape')"
    expected = "text that can be written as UTF-8"
    for name in text.columns:
        if not _utf8(name):
            return DataError(
                f"a column name is {message}", file=f"{SOURCE} header", expected=expected
            )
    for j, name in enumerate(text.columns):
        cells = text.iloc[:, j].to_numpy(dtype=object)
        for pos, cell in enumerate(cells):
            if not _utf8(cell):
                return DataError(message, file=_row(frame, pos), column=name, expected=expected)
    return DataError(message, file=SOURCE, expected=expected)  # not reached


def _row(frame: pd.DataFrame, pos: int) -> str:
    """Row ``pos`` of ``frame`` as an error names it: its position and its index label."""
    label = frame.index[pos]
    label = label.item() if isinstance(label, np.generic) else label
    return f"{SOURCE} row {pos} (index {label!r})"


class _PipeInputError(Exception):
    """An input error about the piped table itself (not, say, a taxonomy file)."""

    def __init__(self, error: InputError) -> None:
        super().__init__(str(error))
        self.error = error


def _encode_path(schema: Schema, path: Path) -> EncodedTable:
    try:
        return encode_table(schema, path)
    except InputError as exc:
        if exc.file == str(path):
            raise _PipeInputError(exc) from None
        raise


def _through_pipe(schema: Schema, data: bytes) -> EncodedTable:
    fd_dir = Path("/dev/fd")
    if not fd_dir.is_dir():  # no /dev/fd (not Linux or macOS): a private temporary file
        import tempfile

        with tempfile.TemporaryDirectory(prefix="fedanon-frame-") as tmp:
            path = Path(tmp) / "frame.csv"
            path.write_bytes(data)
            return _encode_path(schema, path)
    read_end, write_end = os.pipe()

    def feed() -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(write_end, view) :]
        except OSError:
            pass  # the reader gave up (it raised): nothing more to deliver
        finally:
            os.close(write_end)

    writer = threading.Thread(target=feed, name="fedanon-frame-feed", daemon=True)
    writer.start()
    try:
        return _encode_path(schema, fd_dir / str(read_end))
    finally:
        os.close(read_end)  # a writer still blocked gets EPIPE and ends
        writer.join()


def _relabel(
    exc: InputError, frame: pd.DataFrame, starts: npt.NDArray[np.int64] | None
) -> InputError:
    """The same error, pointing into the DataFrame instead of the pipe it was read from
    (``starts``: :func:`_row_lines`, None when lines do not map to rows)."""
    where = SOURCE
    pos = -1
    if exc.line is not None and starts is not None and exc.line >= 2:
        pos = int(np.searchsorted(starts, exc.line, side="right")) - 1
    if exc.line == 1:
        where = f"{SOURCE} header"
    elif 0 <= pos < len(frame):
        where = _row(frame, pos)
    elif exc.line is not None:
        where = f"{SOURCE} as CSV, line {exc.line}"
    return type(exc)(
        exc.message, file=where, column=exc.column, value=exc.value, expected=exc.expected
    )
