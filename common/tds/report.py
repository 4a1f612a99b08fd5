"""The JSON report of a run of the engine: parameters, the final cut, every specialization
and the privacy model's summary (written with the table by :func:`fedanon.io.release.publish`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedanon.model.spec import RunSpec
from fedanon.tds.decide import Decider
from fedanon.tds.engine import RunResult


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
            # LKC: L, K, C, sensitive_values; another model: "model" and its own parameters
            **spec.privacy.parameters(),
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
                "round": s.decided_in,  # the COUNTS sum that decided it (several per sum)
            }
            for s in result.specializations
        ],
        **dec.summary(),
        "anonymize_seconds": round(result.seconds, 4),
    }
    if extra:
        rep.update(extra)
    return rep
