"""``fedanon anonymize`` for a kkm spec: read, ArtUC (Algorithm 2 if needed and allowed),
recount, write.  A failed run publishes nothing; inputs are never overwritten."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fedanon.errors import InternalError
from fedanon.io.fsutil import check_outputs
from fedanon.io.release import table_file
from fedanon.kkm.artuc import Outcome, RequirementNotMet, build_problem, run_artuc
from fedanon.kkm.audit import audit_release
from fedanon.kkm.io import read_rt
from fedanon.kkm.metrics import Parsed, are, parse_release, workload
from fedanon.kkm.relax import ThresholdOwner, run_relaxed
from fedanon.kkm.release import Released, render, report
from fedanon.kkm.schema import KkmSchema, build_kkm_schema
from fedanon.methods.publish import publish_release

QUERIES = 100  # per ARE workload in the report
WORKLOADS = ("W1", "W2", "W3")


def anonymize_outcome(schema: KkmSchema, input_path: Path) -> tuple[Outcome, float]:
    """Read and anonymize; returns the outcome and the read time."""
    t0 = time.perf_counter()
    table = read_rt(schema, input_path)
    t1 = time.perf_counter()
    problem = build_problem(schema, table)
    spec = schema.spec
    try:
        out = run_artuc(problem)
    except RequirementNotMet as first:
        if spec.relax is None:
            raise
        owner = ThresholdOwner(
            spec.privacy.delta,
            spec.relax.max_delta,
            spec.privacy.epsilon_suppress,
            spec.relax.max_epsilon_suppress,
        )
        problem.codes.calls = 0
        out = run_relaxed(problem, owner)
        out.stats["algorithm_1_stopped"] = first.message
    return out, t1 - t0


def anonymize_kkm_file(
    one: Any, input_path: Path, output: Path, report_path: Path | None
) -> dict[str, Any]:
    """``one``: the parsed :class:`fedanon.Spec` ((k, k^m)'s view, the files it names)."""
    # before any work: outputs writable, distinct, and never a file the run reads
    check_outputs({"--output": output, "--report": report_path}, [input_path, *one.input_files()])
    t0 = time.perf_counter()
    spec, reader = one.view, one.file_bytes_reader()
    schema = build_kkm_schema(spec, reader)
    out, _ = anonymize_outcome(schema, input_path)
    t1 = time.perf_counter()
    rel = render(out)
    check = audit_release(spec, rel.data, schema, header=rel.columns)
    if not check.ok:  # a bug: publish nothing
        raise InternalError(
            f"safety check failed: {check.violations} released records have a combination of "
            f"demographics and <= {spec.privacy.m} codes shared by fewer than "
            f"{spec.privacy.k} records, {check.constraint_violations} generalized codes cross "
            f"utility constraints, {len(check.identifier_columns + check.undeclared_columns)} "
            "columns are not released by the spec; nothing was written"
        )
    t2 = time.perf_counter()
    rep = report(out, rel)
    rep["audit"] = check.as_dict()
    rep["ARE"] = report_are(schema, out, rel)
    t3 = time.perf_counter()
    rep["timings"] = {
        "read_and_anonymize": t1 - t0,
        "render_and_check": t2 - t1,
        "evaluate": t3 - t2,
    }
    # the table and the report together: both or neither
    publish_release(table_file(output, list(rel.columns), rel.data), report_path, rep)
    rep["timings"]["write"] = time.perf_counter() - t3  # for the summary line only
    return rep


def report_are(schema: KkmSchema, out: Outcome, rel: Released) -> dict[str, float]:
    """ARE of the seed's three workloads on this release (QUERIES queries each, seed 0)."""
    table = out.problem.table
    spec = schema.spec
    demo = [original_cells(schema, a.name, table.qid[i].tolist()) for i, a in enumerate(spec.qids)]
    flat, ip = table.codes.tolist(), table.indptr.tolist()
    label = schema.items.leaf_label
    codes = [[label(c) for c in flat[ip[r] : ip[r + 1]]] for r in range(table.n)]
    parsed: Parsed = parse_release(spec, rel.data)
    return {
        w: are(workload(w, QUERIES, j, demo, codes), schema, parsed, demo, codes)
        for j, w in enumerate(WORKLOADS)
    }


def original_cells(schema: KkmSchema, name: str, values: list[Any]) -> list[str]:
    """A demographic column of the input as text (leaf labels; numbers as in the release)."""
    tree = schema.trees.get(name)
    if tree is not None:
        return [tree.leaf_label(int(v)) for v in values]
    return [str(int(v)) if float(v).is_integer() else repr(float(v)) for v in values]


def summary_text(rep: dict[str, Any], output: Path, report_path: Path | None) -> str:
    p = rep["parameters"]
    lines = [
        f"released {rep['released_records']} of {rep['records']} records in {rep['clusters']} "
        f"clusters -> {output}",
        f"  (k, k^m): k={p['k']} m={p['m']}  recount: min support {rep['audit']['min_support']}"
        f" ({'ok' if rep['audit']['ok'] else 'FAILED'})",
        f"  NCP {rep['NCP']:.4f} (delta {p['delta']}), UL {rep['UL']:.4f}, suppressed code "
        f"entries {rep['suppressed_code_entries']} of {rep['code_entries']}, "
        f"suppressed records {rep['suppressed_records']}",
        "  ARE " + ", ".join(f"{k} {v:.3f}" for k, v in rep["ARE"].items()),
        f"  {rep['algorithm']}",
    ]
    for key, val in rep.get("relaxed", {}).items():
        lines.append(
            f"  relaxed {key}: requested {val['requested']}, released {val['released']:.4f} "
            f"(limit {val['limit']})"
        )
    t = rep["timings"]
    lines.append(
        f"  time: read+anonymize {t['read_and_anonymize']:.2f}s, check "
        f"{t['render_and_check']:.2f}s, write {t['write']:.2f}s, evaluate {t['evaluate']:.2f}s"
    )
    if report_path is not None:
        lines.append(f"  report: {report_path}")
    return "\n".join(lines)
