"""What every input source hands the table encoder: a header and batches of Arrow columns.

A CSV file, a Parquet file and a PostgreSQL query all become the same thing: the column names,
then batches of records as Arrow arrays (dictionary-encoded text for CSV, typed columns for
Parquet and PostgreSQL), and a way to say where record ``r`` is -- a physical line of a CSV,
a row of a Parquet file or of a query result -- for error messages.  Nothing here holds the
whole table: batches are consumed and dropped one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fedanon.errors import DataError

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Batch:
    start: int  # index of its first record in the input (0-based)
    columns: dict[str, pa.Array]
    rows: int


@dataclass(frozen=True)
class Location:
    """``line`` for a CSV (the physical line an editor shows); otherwise a row description."""

    line: int | None = None
    row: str = ""


@dataclass
class Batches:
    source: str  # what messages name: a path, or a database URL (never with a password)
    header: list[str]
    batches: Iterator[Batch]
    locate: Callable[[int], Location]
    kind: str = "csv"  # csv | parquet | postgresql
    close: Callable[[], None] = field(default=lambda: None)

    def error(
        self,
        record: int,
        message: str,
        *,
        column: str | None = None,
        value: str | None = None,
        expected: str | None = None,
    ) -> DataError:
        """A DataError at record ``record``.  ``value`` is the offending cell: InputError keeps
        it in its own field, which a party strips before logging or sending (party/faults.py);
        never put it in ``message``."""
        where = self.locate(record)
        text = f"{where.row}: {message}" if where.row else message
        return DataError(
            text, file=self.source, line=where.line, column=column, value=value, expected=expected
        )
