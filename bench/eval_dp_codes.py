"""CA of C4.5 (Weka J48) on DiffGen releases with diagnosis codes (issue 21), against BA, LA
and the relational-only DiffGen on the same cohort with the codes dropped.

Cohort: ``fedanon.dp.cohort`` (30,000 patients, seed 1): the first 2/3 train, the rest test.
Release features: the cut value of sex and age (nominal), one binary feature per released cut
node of the codes (present iff the partition's set holds it); rows weighted by the noisy
counts.  Test records are mapped through the released cuts.  BA: J48 on the raw train set
(sex nominal, age numeric, one binary feature per top-level ICD-9-CM node: the finest level
J48 handles here without 14,567 attributes).  LA: the majority class of the train set.

    .venv/bin/python bench/eval_dp_codes.py --out docs/results [--seeds 10] [--rows 30000]
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from fedanon.dp.cohort import write
from fedanon.dp.randomness import RandomSource
from fedanon.dp.run import anonymize_tables
from fedanon.dp.setanonymize import SetSchema, read_records, run_tables, set_schema
from fedanon.dp.setparty import SetRecords
from fedanon.dp.spec import DPParams, DPSpec, load_dp_spec
from fedanon.evaluation.j48 import Attribute, j48_predict
from fedanon.io.table import build_schema, encode_table

EPSILONS = ("0.1", "0.25", "0.5", "1")
HS = (5, 10)


def _cut_of(tree, leaves: np.ndarray, cut: list[int]) -> np.ndarray:
    """The cut node holding every leaf (relational)."""
    out = np.full(leaves.size, -1, dtype=np.int64)
    for x in cut:
        sel = (leaves >= tree.leaf_lo[x]) & (leaves < tree.leaf_hi[x])
        out[sel] = x
    return out


def _nominal(name: str, nodes: np.ndarray, test_nodes: np.ndarray, labels) -> tuple:
    values = sorted(set(nodes.tolist()) | set(test_nodes.tolist()))
    index = {v: i for i, v in enumerate(values)}
    attr = Attribute(name, tuple(labels[v] for v in values))
    return (
        attr,
        np.asarray([index[v] for v in nodes.tolist()]),
        np.asarray([index[v] for v in test_nodes.tolist()]),
    )


def _set_features(stree, cut: list[int], rec: SetRecords) -> np.ndarray:
    """(records, cut nodes): 1 iff a code of the record falls under the node."""
    row = np.repeat(np.arange(rec.n), np.diff(rec.indptr))
    items = np.asarray(rec.items, dtype=np.int64)
    out = np.zeros((rec.n, len(cut)), dtype=np.int64)
    for j, v in enumerate(cut):
        sel = (items >= stree.leaf_lo[v]) & (items < stree.leaf_hi[v])
        out[row[sel], j] = 1
    return out


def ca_codes(ss: SetSchema, train: SetRecords, test: SetRecords, seed: int) -> float:
    run = run_tables(ss, [train], RandomSource(seed))
    st, rel = run.leader.state, run.release
    parts = rel.partitions.tolist()
    c = st.n_class
    attrs, tr_cols, te_cols = [], [], []
    prel = st.prel_array()[rel.partitions]
    for a, tree in enumerate(st.trees):
        cut = np.flatnonzero(st.in_cut[a]).tolist()
        te = _cut_of(tree, np.asarray(test.leaves[a], dtype=np.int64), cut)
        attr, tr, te = _nominal(tree.name, np.repeat(prel[:, a], c), te, tree.labels)
        attrs.append(attr)
        tr_cols.append(tr)
        te_cols.append(te)
    scut = np.flatnonzero(st.s_in_cut).tolist()
    te_set = _set_features(st.stree, scut, test)
    for j, v in enumerate(scut):
        has = np.asarray([1 if v in st.pset[p] else 0 for p in parts], dtype=np.int64)
        attrs.append(Attribute(f"code_{j}", ("0", "1")))
        tr_cols.append(np.repeat(has, c))
        te_cols.append(te_set[:, j])
    cls = np.tile(np.arange(c), len(parts))
    w = rel.counts.reshape(-1).astype(np.float64)
    pred = j48_predict(attrs, tr_cols, cls, te_cols, c, w)
    return float(np.mean(pred == np.asarray(test.cls, dtype=np.int64)))


def ca_relational(spec: DPSpec, schema, table, test_leaves, test_cls, seed: int) -> float:
    run = anonymize_tables(spec, schema, [table], RandomSource(seed))
    dec, counts = run.decider, run.counts
    c = counts.counts.shape[1]
    attrs, tr_cols, te_cols = [], [], []
    for a, tree in enumerate(dec.state.trees):
        cut = np.flatnonzero(dec.state.in_cut[a]).tolist()
        te = _cut_of(tree, np.asarray(test_leaves[a], dtype=np.int64), cut)
        attr, tr, te = _nominal(tree.name, np.repeat(counts.nodes[:, a], c), te, tree.labels)
        attrs.append(attr)
        tr_cols.append(tr)
        te_cols.append(te)
    cls = np.tile(np.arange(c), counts.counts.shape[0])
    w = counts.counts.reshape(-1).astype(np.float64)
    pred = j48_predict(attrs, tr_cols, cls, te_cols, c, w)
    return float(np.mean(pred == np.asarray(test_cls, dtype=np.int64)))


def ba(ss: SetSchema, train: SetRecords, test: SetRecords, age_lo: float) -> float:
    tax_top = ss.stree.children[0]
    tops: list[int] = []
    stack = list(tax_top)
    while stack:  # the real top-level nodes under the decomposition's groups
        v = stack.pop(0)
        if ss.stree.real[v]:
            tops.append(v)
        else:
            stack[:0] = ss.stree.children[v]
    attrs = [Attribute("sex", ("Male", "Female")), Attribute("age")]
    cols = []
    for rec in (train, test):
        sex = np.asarray(rec.leaves[0], dtype=np.int64)
        age = np.asarray(rec.leaves[1], dtype=np.float64) + age_lo
        cols.append([sex, age, *_set_features(ss.stree, tops, rec).T])
    attrs += [Attribute(f"ch_{j}", ("0", "1")) for j in range(len(tops))]
    pred = j48_predict(attrs, cols[0], np.asarray(train.cls, dtype=np.int64), cols[1], 2)
    return float(np.mean(pred == np.asarray(test.cls, dtype=np.int64)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rows", type=int, default=30_000)
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dpcodes-"))
    write(tmp, args.rows, seed=1)
    spec, reader = load_dp_spec(tmp / "cohort.toml")
    ss = set_schema(spec, reader)
    rec, _ = read_records(ss, tmp / "cohort.csv")
    n_train = 2 * rec.n // 3
    train, test = rec.take(0, n_train), rec.take(n_train, rec.n)
    base = ba(ss, train, test, 18.0)
    maj = int(np.bincount(np.asarray(train.cls, dtype=np.int64)).argmax())
    la = float(np.mean(np.asarray(test.cls) == maj))
    # relational-only: the same spec, codes dropped (read as an identifier column)
    rspec = DPSpec.of(spec.relational)
    rschema = build_schema(rspec.run, reader)
    rtable = encode_table(rschema, tmp / "cohort.csv")
    rows = []
    for eps in EPSILONS:
        for h in HS:
            params = DPParams(Fraction(eps), h, "max")
            s2 = replace(ss, spec=replace(spec, params=params))
            r2 = replace(rspec, params=params)
            rtrain = replace(rtable, qid_leaves=rtable.qid_leaves[:, :n_train],
                             cls=rtable.cls[:n_train])  # fmt: skip
            for seed in range(args.seeds):
                a = ca_codes(s2, train, test, 1000 + seed)
                b = ca_relational(r2, rschema, rtrain, test.leaves, test.cls, 1000 + seed)
                rows.append((eps, h, seed, a, b))
                print(eps, h, seed, f"{a:.4f} {b:.4f}", file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "dp_codes_ca_runs.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["epsilon", "h", "seed", "ca_codes", "ca_relational_only", "ba", "la"])
        for r in rows:
            w.writerow([*r, base, la])
    summary = []
    for eps in EPSILONS:
        for h in HS:
            sel = [r for r in rows if r[0] == eps and r[1] == h]
            ca = np.asarray([r[3] for r in sel])
            ro = np.asarray([r[4] for r in sel])
            summary.append((eps, h, ca.mean(), ca.std(), ro.mean(), ro.std(), base, la))
    with (args.out / "dp_codes_ca.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["epsilon", "h", "ca", "ca_std", "relational_only", "ro_std", "ba", "la"])
        w.writerows(summary)
    _plot(args.out / "dp_codes_ca.png", summary)
    for s in summary:
        eps, h, ca, sd, ro, rsd, b, low = s
        print(
            f"eps={eps} h={h} CA {100 * ca:.2f}±{100 * sd:.2f} relational-only "
            f"{100 * ro:.2f}±{100 * rsd:.2f} BA {100 * b:.2f} LA {100 * low:.2f}"
        )
    return 0


def _plot(path: Path, summary: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    x = [float(e) for e in EPSILONS]
    for h, mark in zip(HS, ("o", "s"), strict=True):
        s = [r for r in summary if r[1] == h]
        ax.errorbar(x, [100 * r[2] for r in s], [100 * r[3] for r in s], marker=mark,
                    label=f"DiffGen with codes, h={h}")  # fmt: skip
        ax.errorbar(x, [100 * r[4] for r in s], [100 * r[5] for r in s], marker=mark,
                    linestyle="--", label=f"relational only, h={h}")  # fmt: skip
    ax.axhline(100 * summary[0][6], color="k", linestyle=":", label="BA")
    ax.axhline(100 * summary[0][7], color="grey", linestyle=":", label="LA")
    ax.set_xscale("log")
    ax.set_xticks(x, [str(e) for e in EPSILONS])
    ax.set_xlabel("epsilon")
    ax.set_ylabel("CA of J48 (%)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
