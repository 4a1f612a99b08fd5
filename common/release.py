"""Writing what a run publishes: the released table (atomically) and the JSON report."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from common.decide import Decider
from common.engine import RunResult
from common.fsutil import atomic_write
from common.spec import RunSpec


def output_columns(spec: RunSpec, input_columns: Sequence[str] | None = None) -> list[str]:
    """Input column order (spec order when unknown), identifiers dropped."""
    names = list(input_columns) if input_columns is not None else [a.name for a in spec.attributes]
    dropped = {a.name for a in spec.attributes if a.role == "identifier"}
    return [n for n in names if n not in dropped]


def write_table(path: Path, columns: list[str], data: Mapping[str, Sequence[str]]) -> None:
    def body(fh: Any) -> None:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(columns)
        w.writerows(zip(*(data[c] for c in columns), strict=True))

    atomic_write(path, body)


def report(
    spec: RunSpec, result: RunResult, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    dec: Decider = result.decider
    st = dec.state
    cut: dict[str, list[str]] = {}
    for a, tree in enumerate(st.trees):
        nodes = [int(x) for x in range(len(tree)) if st.in_cut[a][x]]
        nodes.sort(key=tree.order_key)
        cut[tree.name] = [tree.labels[x] for x in nodes]
    rep: dict[str, Any] = {
        "parameters": {
            "L": spec.privacy.L,
            "K": spec.privacy.K,
            "C": spec.privacy.C,
            "sensitive_values": list(spec.privacy.sensitive_values),
            "score": spec.score,
            "qids": [a.name for a in spec.qids],
        },
        "cut": cut,
        "specializations": [
            {
                "attribute": s.attribute,
                "value": s.value,
                "children": list(s.children),
                "score": s.score,
            }
            for s in result.specializations
        ],
        **dec.summary(),
        "anonymize_seconds": round(result.seconds, 4),
    }
    if extra:
        rep.update(extra)
    return rep


def write_report(path: Path, rep: Mapping[str, Any]) -> None:
    atomic_write(path, lambda fh: json.dump(rep, fh, indent=2))
