"""What a DP run publishes: the noisy table (the seed's Table 5) and the run report.

The table has the generalized predictor columns, the class and a ``count`` column, one row per
final group x class value -- every group of the cross product of the cut, also those no
record falls into (their count is noise, clamped at 0).  ``expand`` writes instead one row per
counted record (no ``count`` column), for tools that want records.  The file is CSV, gzip
CSV or Parquet by its name (:mod:`fedanon.dp.tablefile`).  A run with a fixed seed is not
private: its table starts with a ``# NOT PRIVATE`` comment line (Parquet: in its metadata).

The report holds epsilon, h, the budget split and the ledger of what was spent, every
selection and split point with its score, and the cut.  The scores are exact functions of the
data (not differentially private): the report is for the data custodian, the table is what
may be published.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.arrays import ObjArray
from fedanon.dp.budget import fraction_json
from fedanon.dp.randomness import NOT_PRIVATE
from fedanon.dp.run import DPRun
from fedanon.dp.tablefile import coded_columns, release_pending
from fedanon.errors import SpecError
from fedanon.io.fsutil import Pending, atomic_write_all

COUNT = "count"
CONFIDENTIAL = (
    "The scores below are exact functions of the raw data and are not differentially "
    "private: keep this report with the data custodian. Only the released table (and the "
    "parameters, budget and cut, which are outputs of the mechanism) may be published."
)


def released_columns(result: DPRun, header: Sequence[str] | None = None) -> list[str]:
    """Predictors and class in input column order (spec order when unknown), then count."""
    spec = result.spec
    keep = {a.name for a in spec.predictors} | {spec.class_name}
    if COUNT in keep:
        raise SpecError(
            f"a predictor or class is named {COUNT!r}, like the count column of the release",
            file=spec.source,
        )
    names = list(header) if header is not None else [a.name for a in spec.run.attributes]
    return [n for n in names if n in keep] + [COUNT]


def table_data(result: DPRun, expand: bool = False) -> dict[str, ObjArray]:
    """Column arrays of the release: G x C rows (``count``), or one row per counted record."""
    dec = result.decider
    counts = result.counts.counts
    n_groups, n_class = counts.shape
    out: dict[str, ObjArray] = {}
    for a, tree in enumerate(dec.state.trees):
        labels = np.asarray(tree.labels, dtype=object)[result.counts.nodes[:, a]]
        out[tree.name] = np.repeat(labels, n_class)
    classes = np.asarray(result.spec.class_values, dtype=object)
    out[result.spec.class_name] = np.tile(classes, n_groups)
    flat = counts.reshape(-1)
    if expand:
        return {k: np.repeat(v, flat) for k, v in out.items()}
    out[COUNT] = flat.astype(object)
    return out


def release_file(
    path: Path, result: DPRun, header: Sequence[str] | None = None, expand: bool = False
) -> tuple[Pending, int]:
    """The table as a pending atomic write in the format its name says (CSV, ``.gz``,
    ``.parquet``; :mod:`fedanon.dp.tablefile`) and its number of data rows."""
    cols = released_columns(result, header)
    if expand:
        cols = cols[:-1]
    coded = coded_columns(result, cols, None if expand else COUNT, expand)
    seed = result.decider.rng.seed
    note = None if seed is None else f"{NOT_PRIVATE} {seed}: for tests and experiments only"
    rows = len(coded[cols[0]])
    return release_pending(path, cols, coded, COUNT, note), rows


def write_release(
    path: Path, result: DPRun, header: Sequence[str] | None = None, expand: bool = False
) -> int:
    """Write the table atomically; returns the number of data rows."""
    pending, rows = release_file(path, result, header, expand)
    atomic_write_all([pending])
    return rows


def report(result: DPRun, expand: bool = False) -> dict[str, Any]:
    spec, dec = result.spec, result.decider
    budget, ledger = dec.budget, dec.ledger
    st = dec.state
    rng = dec.rng
    counts = result.counts.counts
    allocated = budget.allocation()
    rep: dict[str, Any] = {
        "model": "dp",
        "algorithm": "DiffGen (Mohammed et al.), Algorithm 1",
        "private": rng.private,
        "randomness": rng.describe(),
    }
    if not rng.private:
        rep["warning"] = f"{NOT_PRIVATE} {rng.seed}"
    rep["parameters"] = {
        "epsilon": float(budget.epsilon),
        "specializations": budget.specializations,
        "score": dec.utility.score,
        "score_sensitivity": dec.utility.delta,
        "predictors": [a.name for a in spec.predictors],
        "numeric_predictors": [a.name for a in spec.numeric],
        "class": spec.class_name,
        "class_values": list(spec.class_values),
        "not_released": list(spec.dropped),
        "neighbouring": "data sets differing by one added or removed record",
    }
    rep["budget"] = {
        "epsilon": fraction_json(budget.epsilon),
        "mechanism_calls": budget.mechanism_calls,
        "epsilon_prime": fraction_json(budget.epsilon_prime),
        "noise_budget": budget.noise_budget,
        "laplace_scale": fraction_json(dec.noise_scale or budget.laplace_scale),
        "allocated": {k: fraction_json(v) for k, v in allocated.items()},
        "allocated_total": fraction_json(sum(allocated.values(), start=budget.epsilon * 0)),
        "spent": {s: fraction_json(ledger.by_step(s)) for s in ("split", "selection", "noise")},
        "spent_total": fraction_json(ledger.total()),
        "unspent": fraction_json(budget.epsilon - ledger.total()),
        "ledger": [
            {"step": e.step, "round": e.round, "epsilon": str(e.epsilon), "what": e.detail}
            for e in ledger.entries
        ],
    }
    rep["confidential"] = CONFIDENTIAL
    rep["selections"] = [
        {
            "round": s.round,
            "attribute": s.attribute,
            "value": s.value,
            "children": list(s.children),
            "score": s.score,
            "candidates": s.candidates,
        }
        for s in dec.selections
    ]
    rep["split_points"] = []
    for sp in dec.splits:
        tree = st.trees[sp.attr]
        kids = tree.children[sp.node]
        rep["split_points"].append(
            {
                "round": sp.round,
                "attribute": tree.name,
                "interval": tree.labels[sp.node],
                "halves": [tree.labels[c] for c in kids],
                "score": sp.score,
                "candidates": sp.candidates,
            }
        )
    rep["cut"] = dec.cut()
    rep["release"] = {
        "format": "one row per record (expanded)" if expand else "counts",
        "groups": int(counts.shape[0]),
        "rows_with_count": int(counts.size),
        "noisy_total": int(counts.sum()),
        "negative_counts_set_to_zero": result.counts.negatives_clamped,
    }
    rep["anonymize_seconds"] = round(result.seconds, 4)
    return rep
