"""``fedanon kkm-evaluate``: NCP, UL and ARE of a released RT table against its input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fedanon.errors import DataError, InputError
from fedanon.kkm.io import read_rt, read_text_columns
from fedanon.kkm.metrics import are, parse_release, record_ncp, record_ul, workload
from fedanon.kkm.run import WORKLOADS, original_cells
from fedanon.kkm.schema import build_kkm_schema


def evaluate_files(
    one: Any, original: Path, released: Path, report: Path | None, queries: int
) -> dict[str, Any]:
    """``one``: the parsed :class:`fedanon.Spec` of the release ((k, k^m)'s view)."""
    spec, reader = one.view, one.file_bytes_reader()
    schema = build_kkm_schema(spec, reader)
    table = read_rt(schema, original)
    _, data = read_text_columns(released)
    n_rows = len(next(iter(data.values())))
    for a in (*spec.qids, spec.set_attr):
        if a.name not in data:
            raise InputError("released table lacks a column", file=str(released), column=a.name)
    left_out: set[int] = set()
    if report is not None:
        try:
            rep = json.loads(report.read_text(encoding="utf-8"))
            left_out = {int(r) - 1 for r in rep.get("suppressed_record_rows", [])}
        except (OSError, ValueError, TypeError) as exc:
            raise InputError(f"cannot read the report: {exc}", file=str(report)) from exc
    kept = [r for r in range(table.n) if r not in left_out]
    if len(kept) != n_rows:
        raise DataError(
            f"the release has {n_rows} rows but the input has {len(kept)} records to match",
            file=str(released),
            expected="the release of this input in input order (pass --report when the run "
            "left records out)",
        )
    parsed = parse_release(spec, data)
    flat, ip = table.codes.tolist(), table.indptr.tolist()
    label = schema.items.leaf_label
    codes = [[label(c) for c in flat[ip[r] : ip[r + 1]]] for r in range(table.n)]
    demo = [original_cells(schema, a.name, table.qid[i].tolist()) for i, a in enumerate(spec.qids)]
    n = table.n
    full = sum(spec.weights)
    ncp = (sum(record_ncp(schema, parsed, table.num_range)) + len(left_out) * full) / n
    ul_rel = record_ul(parsed, [codes[r] for r in kept])
    ul = (sum(ul_rel) + sum(len(codes[r]) for r in left_out)) / n
    return {
        "records": n,
        "released": n_rows,
        "NCP": ncp,
        "UL": ul,
        "ARE": {
            w: are(workload(w, queries, j, demo, codes), schema, parsed, demo, codes)
            for j, w in enumerate(WORKLOADS)
        },
    }
