"""From anonymized clusters to the released table and the report.

Released rows keep the input order; records suppressed with their group (ArtUC Step 2) are
left out; identifier columns are dropped; class and other columns are copied unchanged.
A numeric value is written ``v`` or ``[lo:hi]`` (closed range), a categorical one as its
hierarchy node, a set cell as its generalized codes joined by the spec's separator, a
generalized code of several codes as ``(c1 c2 ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedanon.kkm.artuc import Outcome
from fedanon.kkm.gendiag import record_ul


@dataclass(frozen=True)
class Released:
    columns: list[str]
    data: dict[str, list[str]]
    rows: list[int]  # input record index of every released row
    record_ul: list[float]  # UL(r) of every released row
    record_ncp: list[float]  # NCP(r) of every released row


def token_text(codes: tuple[int, ...], label: Any) -> str:
    if len(codes) == 1:
        return str(label(codes[0]))
    return "(" + " ".join(label(c) for c in codes) + ")"


def render(out: Outcome) -> Released:
    prob = out.problem
    spec = prob.schema.spec
    st = out.state
    items = prob.schema.items
    sep = spec.set_attr.separator
    demo = prob.demo
    n = prob.table.n
    demo_text: list[list[str]] = [[""] * n for _ in demo.attrs]
    set_text = [""] * n
    rul = [0.0] * n
    rncp = [0.0] * n
    recs = prob.codes.recs
    for c in st.live():
        g = st.gen[c]
        labels = [a.label(st.lo[i][c], st.hi[i][c]) for i, a in enumerate(demo.attrs)]
        lo = [np.array([st.lo[i][c]]) for i in range(len(demo.attrs))]
        hi = [np.array([st.hi[i][c]]) for i in range(len(demo.attrs))]
        ncp = float(demo.record_ncp(lo, hi)[0])
        texts = [token_text(t, items.leaf_label) for t in g.tokens]
        sizes = [len(t) for t in g.tokens]
        cells: dict[tuple[int, ...], str] = {}  # records of a cluster share their cell text
        for r in st.members[c]:
            for i, lab in enumerate(labels):
                demo_text[i][r] = lab
            toks = tuple(sorted({g.token_of[x] for x in recs[r] if x in g.token_of}))
            cell = cells.get(toks)
            if cell is None:
                cell = cells[toks] = sep.join(texts[t] for t in toks)
            set_text[r] = cell
            lost = sum(1 for x in recs[r] if x not in g.token_of)
            rul[r] = record_ul([sizes[t] for t in toks]) + lost
            rncp[r] = ncp
    dropped = set(out.suppressed_records.tolist())
    rows = [r for r in range(n) if r not in dropped]
    ident = {a.name for a in spec.attributes if a.role == "identifier"}
    columns = [h for h in prob.table.header if h not in ident]
    data: dict[str, list[str]] = {}
    for i, a in enumerate(spec.qids):
        data[a.name] = [demo_text[i][r] for r in rows]
    data[spec.set_attr.name] = [set_text[r] for r in rows]
    for name, col in prob.table.kept.items():
        data[name] = [col[r] for r in rows]
    return Released(columns, data, rows, [rul[r] for r in rows], [rncp[r] for r in rows])


def report(out: Outcome, rel: Released) -> dict[str, Any]:
    prob = out.problem
    spec = prob.schema.spec
    st = out.state
    sizes = [len(st.members[c]) for c in st.live()]
    n = prob.table.n
    dropped = int(out.suppressed_records.size)
    codes_in = int(prob.table.codes.size)
    # code entries that left with their records (not counted in suppressed_code_entries)
    of_dropped = sum(len(prob.codes.recs[r]) for r in out.suppressed_records.tolist())
    return {
        "model": "kkm",
        "parameters": {
            "k": spec.privacy.k,
            "m": spec.privacy.m,
            "delta": spec.privacy.delta,
            "epsilon_suppress": spec.privacy.epsilon_suppress,
            "constraints": spec.privacy.constraints,
            "utility_constraints": prob.schema.constraints.n_listed,
            "groups": prob.schema.constraints.n_groups,
        },
        "records": n,
        "released_records": len(rel.rows),
        "suppressed_records": dropped,
        "suppressed_record_rows": [int(r) + 1 for r in out.suppressed_records.tolist()],
        "clusters": len(sizes),
        "min_cluster_size": min(sizes) if sizes else 0,
        "NCP": out.ncp,
        "UL": (sum(rel.record_ul) + of_dropped) / n,
        "suppressed_code_entries": st.total_lost,
        "suppressed_record_code_entries": of_dropped,
        "max_suppressed_code_entries": prob.max_suppressed,
        "code_entries": codes_in,
        "suppressed_codes_s": st.total_s,
        "distinct_codes": prob.n_distinct,
        "repeated_codes_ignored": prob.table.repeated_codes,
        **out.stats,
    }
