"""`fedanon anonymize`: the centralized algorithm on one table."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedanon.io.fsutil import check_outputs
from fedanon.io.progress import Progress, to_stderr
from fedanon.io.release import output_columns, table_file, write_report
from fedanon.io.sources import DataSource
from fedanon.io.spill import parse_budget
from fedanon.io.table import build_schema, encode_table
from fedanon.methods.publish import publish_release
from fedanon.privacy.mprivacy import local_check
from fedanon.tds.decide import Decider, Specialization
from fedanon.tds.engine import LocalFederation, RunResult, run
from fedanon.tds.report import report
from fedanon.union.localparty import LocalParty


@dataclass(frozen=True)
class Timings:
    read: float
    anonymize: float
    write: float


def anonymize_file(
    one: Any,
    source: DataSource,
    output: Path,
    report_path: Path | None,
    progress: bool,
    memory_budget: str | None = None,
) -> tuple[dict[str, Any], Timings]:
    """Read ``source`` (CSV, Parquet or a PostgreSQL query), anonymize by ``one`` (the parsed
    :class:`fedanon.Spec`: its engine view), publish ``output`` (CSV, .gz or .parquet) and
    the report.  With ``progress`` a long run prints a line on
    stderr every few seconds (records read, round, groups).  ``memory_budget`` ("16GB",
    "auto", "off"; None: FEDANON_MEMORY_BUDGET): above it the codes stay out of core."""
    if memory_budget is not None:
        parse_budget(memory_budget)  # a usage error before any work
    t0 = time.perf_counter()
    spec, reader = one.run_spec, one.taxonomy_reader()
    inputs = one.input_files()
    if isinstance(source, Path):
        inputs.insert(0, source)
    check_outputs({"--output": output, "--report": report_path}, inputs)
    schema = build_schema(spec, reader)
    ticker = Progress(to_stderr()) if progress else None
    table = encode_table(schema, source, ticker.rows if ticker else _quiet, memory_budget)
    t1 = time.perf_counter()
    party = LocalParty(schema, table)
    check = local_check(spec, party)  # m-privacy (None: m = 0)
    decider = Decider(spec, schema.new_trees(), len(table.class_labels), coalition=check)
    result: RunResult = run(decider, LocalFederation([party]), _rounds(ticker, decider))
    decider.verify()
    t2 = time.perf_counter()
    rep = report(spec, result)
    if check is not None:
        rep["m_privacy"] = check.summary()
    columns = output_columns(spec, table.columns)
    if ticker is not None and ticker.due():
        ticker.say(f"writing {table.n_rows:,} records to {output}")
    publish_release(table_file(output, columns, party.released_coded()), report_path, rep)
    t3 = time.perf_counter()
    rep["timings"] = {"read": t1 - t0, "anonymize": t2 - t1, "write": t3 - t2}
    if report_path is not None:  # the timings, known only now, go in a second atomic write
        write_report(report_path, rep)
    return rep, Timings(t1 - t0, t2 - t1, t3 - t2)


def _quiet(n: int) -> None:
    del n


def _rounds(ticker: Progress | None, decider: Decider) -> Any:
    if ticker is None:
        return None

    def show(round_: int, spec: Specialization | None) -> None:
        if not ticker.due():
            return
        st = decider.state
        groups = int(st.alive[: st.n_parts].sum())
        last = (
            "no valid specialization left"
            if spec is None
            else (f"last {spec.attribute}: {spec.value} (score {spec.score:.4g})")
        )
        ticker.say(f"round {round_}: {groups:,} groups, {last}")

    return show


def _model_line(rep: dict[str, Any]) -> str:
    """LKC's line as ever; another model: its name, parameters and summary figures."""
    par = rep["parameters"]
    if "model" not in par:
        m = f" m={par['m']}" if par.get("m") else ""  # m-privacy: only when asked for
        return (
            f"  LKC: L={par['L']} K={par['K']} C={par['C']}{m}  min group size (L-subsets) "
            f"{rep['min_group_size']}, max confidence {rep['max_confidence']:.3f}"
        )
    shown = " ".join(f"{k}={v}" for k, v in par.items() if k not in ("model", "score", "qids"))
    figures = [f"min group size {rep['min_group_size']}"] if "min_group_size" in rep else []
    if "max_confidence" in rep:
        figures.append(f"max confidence {rep['max_confidence']:.3f}")
    return f"  {par['model']}: {shown}  " + ", ".join(figures)


def summary_text(rep: dict[str, Any], output: Path, report_path: Path | None) -> str:
    lines = [
        f"released {rep['records']} records in {rep['groups']} equivalence groups -> {output}",
        _model_line(rep),
        f"  {len(rep['specializations'])} specializations, DR = {rep['DR']:.4f}",
        "  final cut: "
        + "; ".join(
            f"{k}: {len(v)} value{'s' if len(v) != 1 else ''}" for k, v in rep["cut"].items()
        ),
    ]
    if "timings" in rep:
        lines.append(timing_line(rep["timings"]))
    if report_path is not None:
        lines.append(f"  report: {report_path}")
    return "\n".join(lines)


def timing_line(timings: dict[str, float]) -> str:
    """The summary's time line: read, anonymize and write seconds."""
    return "  time: " + ", ".join(f"{k} {timings[k]:.2f}s" for k in ("read", "anonymize", "write"))
