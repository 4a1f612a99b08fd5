"""`fedanon dp-anonymize`: a DiffGen release of one table (the centralized algorithm)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from fedanon.centralized import timing_line
from fedanon.dp.bounds import MAX_EXPANDED_ROWS, MAX_TABLE_ROWS, check_expanded
from fedanon.dp.publishrun import publish_timed, run_source
from fedanon.dp.release import release_file, report
from fedanon.dp.run import anonymize_tables, check_table_size
from fedanon.dp.spec import DPSpec
from fedanon.io.fsutil import check_outputs
from fedanon.io.table import build_schema, encode_table
from fedanon.tds.decide import Specialization


def anonymize_dp_file(
    one: Any,
    input_path: Path,
    output: Path,
    report_path: Path | None = None,
    *,
    expand: bool = False,
    seed: int | None = None,
    progress: bool = False,
    max_table_rows: int = MAX_TABLE_ROWS,
    max_expanded_rows: int = MAX_EXPANDED_ROWS,
) -> dict[str, Any]:
    """Read, run ``one`` (the parsed :class:`fedanon.Spec`: DiffGen's view), then write the
    table (CSV, .gz or Parquet by the output's name) and the report, both or neither (nothing
    is written on failure).  A spec whose table would exceed ``max_table_rows`` rows, or an
    ``expand`` release of more than ``max_expanded_rows`` rows, is refused (exit 2;
    :mod:`fedanon.dp.bounds`)."""
    # before any work: outputs in existing folders, regular files, distinct, never an input
    check_outputs({"--output": output, "--report": report_path}, [input_path, *one.input_files()])
    t0 = time.perf_counter()
    spec, reader = DPSpec.of(one.view), one.taxonomy_reader()
    if spec.set_attr is not None:  # diagnosis codes: fedanon.dp.setanonymize
        from fedanon.dp.setanonymize import anonymize_set_file

        return anonymize_set_file(
            one,
            input_path,
            output,
            report_path,
            expand=expand,
            seed=seed,
            max_table_rows=max_table_rows,
            max_expanded_rows=max_expanded_rows,
        )
    schema = build_schema(spec.run, reader)
    check_table_size(spec, schema, max_table_rows)  # from the spec alone: before reading
    table = encode_table(schema, input_path)
    t1 = time.perf_counter()
    rng = run_source(seed)
    show = _printer() if progress else None
    result = anonymize_tables(spec, schema, [table], rng, show, max_table_rows)
    if progress:
        sys.stderr.write("\n")
    if expand:
        check_expanded(int(result.counts.counts.sum()), max_expanded_rows)
    t2 = time.perf_counter()
    pending, rows = release_file(output, result, table.columns, expand)
    return publish_timed(pending, rows, report(result, expand), report_path, (t0, t1, t2))


def _printer() -> Any:
    def show(round_: int, spec: Specialization | None) -> None:
        if spec is not None:
            sys.stderr.write(f"\r  selection {round_}: {spec.attribute}: {spec.value}" + " " * 30)
            sys.stderr.flush()

    return show


def summary_text(rep: dict[str, Any], output: Path, report_path: Path | None) -> str:
    p, b, r = rep["parameters"], rep["budget"], rep["release"]
    lines = []
    if not rep["private"]:
        lines.append(f"{rep['warning']}: this release is NOT differentially private")
    lines += [
        f"released {r['groups']} groups x {len(p['class_values'])} class values "
        f"(noisy total {r['noisy_total']}, {r['rows_written']} rows) -> {output}",
        f"  epsilon = {p['epsilon']:g} ({b['epsilon']['exact']}), h = {p['specializations']}, "
        f"score = {p['score']}; epsilon' = {b['epsilon_prime']['exact']} per "
        f"exponential-mechanism call, Laplace scale {b['laplace_scale']['exact']}; "
        f"spent {b['spent_total']['exact']}",
        f"  {len(rep['selections'])} specializations; final cut: "
        + "; ".join(f"{k}: {len(v)}" for k, v in rep["cut"].items()),
    ]
    if p["not_released"]:
        lines.append("  not released: " + ", ".join(p["not_released"]))
    if "timings" in rep:
        lines.append(timing_line(rep["timings"]))
    if report_path is not None:
        lines.append(f"  report (confidential: exact scores): {report_path}")
    return "\n".join(lines)
