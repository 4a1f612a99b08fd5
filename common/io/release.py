"""Writing what a run publishes: the released table (atomically; CSV, gzip CSV or Parquet)
and the JSON report."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fedanon.io.fsutil import Pending, atomic_write_all
from fedanon.io.tablewrite import ColumnData, as_coded, is_parquet_name, write_csv, write_parquet
from fedanon.model.attributes import NOT_RELEASED
from fedanon.model.spec import RunSpec


def output_columns(spec: RunSpec, input_columns: Sequence[str] | None = None) -> list[str]:
    """Input column order (spec order when unknown), identifiers and the provider column
    dropped."""
    names = list(input_columns) if input_columns is not None else [a.name for a in spec.attributes]
    dropped = {a.name for a in spec.attributes if a.role in NOT_RELEASED}
    return [n for n in names if n not in dropped]


def table_file(path: Path, columns: list[str], data: Mapping[str, ColumnData]) -> Pending:
    """The released table as a pending file: Parquet when the name ends in .parquet (or .pq),
    else CSV, gzip-compressed when the name ends in .gz.  Columns are written from their
    distinct values and codes (see :mod:`fedanon.io.tablewrite`), never row by row in Python."""
    coded = [as_coded(data[c]) for c in columns]
    if is_parquet_name(path):
        return Pending(path, lambda fh: write_parquet(fh, columns, coded), binary=True)
    if not path.name.lower().endswith(".gz"):
        return Pending(path, lambda fh: write_csv(fh, columns, coded), binary=True)

    def gz(fh: Any) -> None:
        with gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0, compresslevel=6) as z:
            write_csv(z, columns, coded)

    return Pending(path, gz, binary=True)


def report_file(path: Path, rep: Mapping[str, Any]) -> Pending:
    return Pending(path, lambda fh: json.dump(rep, fh, indent=2))


def write_table(path: Path, columns: list[str], data: Mapping[str, ColumnData]) -> None:
    atomic_write_all([table_file(path, columns, data)])


def publish(
    output: Path,
    columns: list[str],
    data: Mapping[str, ColumnData],
    report_path: Path | None,
    rep: Mapping[str, Any],
) -> None:
    """Write the released table and the report together: both or neither."""
    files = [table_file(output, columns, data)]
    if report_path is not None:
        files.append(report_file(report_path, rep))
    atomic_write_all(files)


def write_report(path: Path, rep: Mapping[str, Any]) -> None:
    atomic_write_all([report_file(path, rep)])
