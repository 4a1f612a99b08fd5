"""`fedanon anonymize` of a DP spec with a set-valued predictor (diagnosis codes): read the
relational columns (:func:`fedanon.io.table.encode_table`) and the set column
(:func:`fedanon.io.setread.read_set_column`) of one table, run
(:mod:`fedanon.dp.setrun`), publish the table and the report both or neither.

The table: one row per kept partition and class value, zeros included, with its noisy count;
the set-valued cell lists the partition's cut nodes joined by the column's separator (empty
for the partition of records without codes); ``expand``: one row per counted record instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.dp.bounds import MAX_EXPANDED_ROWS, MAX_TABLE_ROWS, check_expanded
from fedanon.dp.budget import fraction_json
from fedanon.dp.publishrun import publish_timed, run_source
from fedanon.dp.randomness import NOT_PRIVATE, RandomSource
from fedanon.dp.release import CONFIDENTIAL, COUNT
from fedanon.dp.setparty import SetRecords
from fedanon.dp.setrun import SetRun, anonymize_records
from fedanon.dp.settree import SetTree
from fedanon.dp.spec import DPSpec
from fedanon.dp.tablefile import release_pending
from fedanon.errors import InputError, SpecError
from fedanon.io.columns import Column, smallest_uint
from fedanon.io.fsutil import Pending
from fedanon.io.setread import read_set_column
from fedanon.io.sources import DataSource
from fedanon.io.table import Schema, build_schema, encode_table
from fedanon.model.builtins import BUILTIN_PREFIX, load_taxonomy


@dataclass(frozen=True)
class SetSchema:
    spec: DPSpec
    schema: Schema  # the relational predictors and the class
    stree: SetTree


def codes_schema(spec: DPSpec, reader: Callable[[str], str]) -> Schema:
    """The relational schema (the set-valued predictor is a column its reader skips), with
    the item taxonomy under the set-valued predictor's name and, unless builtin, its text in
    ``files`` (what a federated run ships to the hospitals and binds its run hash to)."""
    attr = spec.set_attr
    if attr is None or attr.taxonomy is None:
        raise SpecError("no set-valued predictor with a taxonomy", file=spec.source)
    rel = spec.relational
    if not rel.qids:
        raise SpecError(
            "a DP spec with a set-valued qid needs at least one relational qid",
            file=spec.source,
            expected="[[attribute]] with role = 'qid' and type = 'categorical' | 'numeric'",
        )
    schema = build_schema(rel, reader)
    files = dict(schema.files)
    if not attr.taxonomy.startswith(BUILTIN_PREFIX):
        files[attr.taxonomy] = reader(attr.taxonomy)
    tax = load_taxonomy(attr.taxonomy, lambda ref: files[ref])
    taxes = {**schema.taxonomies, attr.name: tax}
    return Schema(schema.spec, taxes, files, schema.class_labels)


def set_tree(spec: DPSpec, schema: Schema) -> SetTree:
    """The decomposed item taxonomy of a :func:`codes_schema` (the same at every hospital)."""
    attr = spec.set_attr
    assert attr is not None
    return SetTree(attr.name, schema.taxonomies[attr.name], attr.separator or "|")


def set_schema(spec: DPSpec, reader: Callable[[str], str]) -> SetSchema:
    schema = codes_schema(spec, reader)
    return SetSchema(spec, schema, set_tree(spec, schema))


def read_records(ss: SetSchema, source: DataSource) -> tuple[SetRecords, tuple[str, ...]]:
    """One table's records (and its header)."""
    table = encode_table(ss.schema, source)
    sets = read_set_column(source, ss.stree.column_spec())
    if sets.n != table.n_rows:
        raise InputError("the set column and the table have different row counts")
    return SetRecords(table.qid_leaves, table.cls, sets.indptr, sets.items), table.columns


def run_tables(
    ss: SetSchema,
    records: Sequence[SetRecords],
    rng: RandomSource,
    max_table_rows: int = MAX_TABLE_ROWS,
) -> SetRun:
    return anonymize_records(ss.spec, ss.schema.new_trees, ss.stree, records, rng, max_table_rows)


def released_columns(spec: DPSpec, header: Sequence[str] | None) -> list[str]:
    keep = {a.name for a in spec.predictors} | {spec.class_name}
    if COUNT in keep:
        raise SpecError(f"a predictor or class is named {COUNT!r}", file=spec.source)
    names = list(header) if header is not None else [a.name for a in spec.run.attributes]
    return [n for n in names if n in keep] + [COUNT]


def coded_columns(run: SetRun, expand: bool) -> dict[str, Column]:
    st = run.leader.state
    parts = run.release.partitions
    counts = run.release.counts
    n_groups, n_class = counts.shape
    flat = counts.reshape(-1)
    out: dict[str, Column] = {}
    prel = st.prel_array()[parts] if parts.size else np.zeros((0, st.m), dtype=np.int64)
    for a, tree in enumerate(st.trees):
        values, codes = np.unique(prel[:, a], return_inverse=True)
        labels = [tree.labels[int(x)] for x in values]
        out[tree.name] = Column(labels, np.repeat(codes.reshape(-1), n_class))
    cells = [st.stree.cell(st.pset[int(p)]) for p in parts.tolist()]
    uniq = sorted(set(cells))
    index = {v: i for i, v in enumerate(uniq)}
    codes = np.asarray([index[v] for v in cells], dtype=np.int64)
    out[st.stree.name] = Column(uniq, np.repeat(codes, n_class))
    cls = np.arange(n_class).astype(smallest_uint(n_class))
    out[run.spec.class_name] = Column(run.spec.class_values, np.tile(cls, n_groups))
    if expand:
        return {k: Column(c.values, np.repeat(c.codes, flat)) for k, c in out.items()}
    values, inverse = np.unique(flat, return_inverse=True)
    out[COUNT] = Column([str(v) for v in values.tolist()], inverse.reshape(-1))
    return out


def release_file(
    path: Path, run: SetRun, header: Sequence[str] | None, expand: bool = False
) -> tuple[Pending, int]:
    cols = released_columns(run.spec, header)
    if expand:
        cols = cols[:-1]
    coded = coded_columns(run, expand)
    seed = run.leader.rng.seed
    note = None if seed is None else f"{NOT_PRIVATE} {seed}: for tests and experiments only"
    rows = len(coded[cols[0]].codes)
    return release_pending(path, cols, {c: coded[c] for c in cols}, COUNT, note), rows


def report(run: SetRun, expand: bool = False) -> dict[str, Any]:
    ld = run.leader
    b, ledger = ld.budget, ld.ledger
    counts = run.release.counts
    rep: dict[str, Any] = {
        "model": "dp",
        "algorithm": "DiffGen (Mohammed et al.) with a set-valued predictor "
        "(binary decomposition, budgeted emptiness tests)",
        "private": ld.rng.private,
        "randomness": ld.rng.describe(),
    }
    if not ld.rng.private:
        rep["warning"] = f"{NOT_PRIVATE} {ld.rng.seed}"
    rep["parameters"] = {
        "epsilon": float(b.epsilon),
        "specializations": b.specializations,
        "score": ld.utility.score,
        "predictors": [a.name for a in run.spec.predictors],
        "set_valued_predictor": ld.state.stree.name,
        "class": run.spec.class_name,
        "class_values": list(run.spec.class_values),
        "not_released": list(run.spec.dropped),
    }
    steps = ("split", "selection", "emptiness", "noise")
    rep["budget"] = {
        "epsilon": fraction_json(b.epsilon),
        "mechanism_calls": b.mechanism_calls,
        "epsilon_prime": fraction_json(b.epsilon_prime),
        "noise_budget": "rest",
        "laplace_scale": fraction_json(ld.noise_scale or b.laplace_scale),
        "emptiness_threshold": fraction_json(1 / b.epsilon_prime),
        "spent": {s: fraction_json(ledger.by_step(s)) for s in steps},
        "spent_total": fraction_json(ledger.total()),
        "ledger": [
            {"step": e.step, "round": e.round, "epsilon": str(e.epsilon), "what": e.detail}
            for e in ledger.entries
        ],
    }
    rep["confidential"] = CONFIDENTIAL
    rep["selections"] = [s.__dict__ | {"children": list(s.children)} for s in ld.selections]
    rep["split_points"] = [
        {"round": r, "attribute": a, "interval": i, "score": s, "candidates": n}
        for r, a, i, s, n in ld.splits
    ]
    rep["cut"] = ld.state.cut()
    rep["release"] = {
        "format": "one row per record (expanded)" if expand else "counts",
        "groups": int(counts.shape[0]),
        "rows_with_count": int(counts.size),
        "noisy_total": int(counts.sum()),
        "negative_counts_set_to_zero": run.release.negatives_clamped,
    }
    rep["anonymize_seconds"] = round(run.seconds, 4)
    return rep


def anonymize_set_file(
    one: Any,
    input_path: Path,
    output: Path,
    report_path: Path | None = None,
    *,
    expand: bool = False,
    seed: int | None = None,
    max_table_rows: int = MAX_TABLE_ROWS,
    max_expanded_rows: int = MAX_EXPANDED_ROWS,
) -> dict[str, Any]:
    """``one``: the parsed :class:`fedanon.Spec` (DiffGen's view over diagnosis codes)."""
    t0 = time.perf_counter()
    ss = set_schema(DPSpec.of(one.view), one.taxonomy_reader())
    rec, header = read_records(ss, input_path)
    t1 = time.perf_counter()
    run = run_tables(ss, [rec], run_source(seed), max_table_rows)
    if expand:
        check_expanded(int(run.release.counts.sum()), max_expanded_rows)
    t2 = time.perf_counter()
    pending, rows = release_file(output, run, header, expand)
    return publish_timed(pending, rows, report(run, expand), report_path, (t0, t1, t2))
