"""The DiffGen run behind :func:`fedanon.anonymize` for a ``[privacy] model = "dp"`` spec.

The same functions as ``fedanon anonymize`` / ``fedanon dp-anonymize`` (schema, encoding,
:func:`fedanon.dp.run.anonymize_tables`, :func:`fedanon.dp.release.report`), so the table and
the report are the CLI's on the same data and seed; :func:`write` writes the CLI's bytes
(with its ``# NOT PRIVATE`` line when a seed was given).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fedanon.dp.bounds import MAX_EXPANDED_ROWS, MAX_TABLE_ROWS, check_expanded
from fedanon.dp.randomness import NOT_PRIVATE, RandomSource
from fedanon.dp.release import COUNT, release_file, released_columns, report, table_data
from fedanon.dp.run import DPRun, anonymize_tables, check_table_size
from fedanon.dp.spec import DPSpec
from fedanon.io.fsutil import Pending, atomic_write_all, check_outputs
from fedanon.io.table import EncodedTable, build_schema, encode_table

log = logging.getLogger(__name__)


def run_dp(
    data: pd.DataFrame | Path,
    spec: DPSpec,
    reader: Callable[[str], str],
    seed: int | None,
    expand: bool,
    *,
    max_table_rows: int = MAX_TABLE_ROWS,
    max_expanded_rows: int = MAX_EXPANDED_ROWS,
) -> tuple[pd.DataFrame, dict[str, Any], Callable[[Path, Path | None], None]]:
    """(table, report, writer): the release as a DataFrame (predictors and class as str,
    ``count`` as int64; with ``expand`` one row per counted record and no ``count``), the
    CLI's report without its timings, and what writes the CLI's files.  The bounds of
    :mod:`fedanon.dp.bounds` as in the CLI (InputError)."""
    from fedanon.io.frames import encode_frame

    rng = RandomSource(seed)  # ValueError for a bad seed, before reading anything
    schema = build_schema(spec.run, reader)
    check_table_size(spec, schema, max_table_rows)
    table: EncodedTable = (
        encode_frame(schema, data) if isinstance(data, pd.DataFrame) else encode_table(schema, data)
    )
    if not rng.private:
        log.warning("%s %d: the output is NOT differentially private", NOT_PRIVATE, seed)
    result = anonymize_tables(spec, schema, [table], rng, max_table_rows=max_table_rows)
    if expand:
        check_expanded(int(result.counts.counts.sum()), max_expanded_rows)
    cols = released_columns(result, table.columns)
    if expand:
        cols = cols[:-1]
    arrays = table_data(result, expand)
    frame = pd.DataFrame({c: arrays[c].astype(np.int64) if c == COUNT else arrays[c] for c in cols})
    rep = report(result, expand)
    rep["release"]["rows_written"] = len(frame)

    def write(output: Path, report_path: Path | None) -> None:
        _write(result, table.columns, expand, rep, output, report_path)

    return frame, rep, write


def _write(
    result: DPRun,
    header: tuple[str, ...],
    expand: bool,
    rep: dict[str, Any],
    output: Path,
    report_path: Path | None,
) -> None:
    check_outputs({"output": output, "report": report_path}, [])
    files = [release_file(output, result, header, expand)[0]]
    if report_path is not None:
        files.append(Pending(report_path, lambda fh: json.dump(rep, fh, indent=2)))
    atomic_write_all(files)  # both or neither
