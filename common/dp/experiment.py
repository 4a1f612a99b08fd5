"""The seed's DiffGen evaluation on Adult: classification accuracy (CA) of the released table
for epsilon in {0.1, 0.25, 0.5, 1}, h in {4, 6, ..., 16}, both scores, 10 runs each, next to
BA (the same classifier on the raw data) and LA (every predictor generalized to the root: the
majority class of the training part).

Split as in the seed authors' own experiment (McGill-DMaS/Privacy-DiffGen, ``runAdultMAX.bat``:
``nTraining = 30162``): Adult's own adult.data / adult.test split -- the first 30,162 records of
``examples/adult/adult.csv.gz`` train, the other 15,061 test (LA 75.4 %, the seed's 75.5 %).
Other data (``--data``, ``rows``): one stratified 2/3 train / 1/3 test split
(``fedanon.evaluation.evaluate.split_rows``, seed 0).  Only the training part is sanitized;
the test records are generalized through the released cut.  Runs
use fixed seeds (reproducible, hence NOT PRIVATE releases -- this is a measurement).

Classifier: an entropy decision tree (CART standing in for C4.5) pre-pruned with
``min_impurity_decrease = 3e-4`` (the project's pruning strength, ``fedanon.evaluation.experiments.
PRUNED_ALPHA``, applied while growing).  Cost-complexity post-pruning gives the same accuracy
on the small releases but takes minutes on the noise-dominated ones of h >= 14 (hundreds of
thousands of groups).  ``classifier = "j48"`` (``--classifier j48``) measures BA and CA with
the seed's classifier instead, C4.5 (Weka's J48 with its defaults, ``fedanon.evaluation.j48``;
needs ``apt-get install weka``); its files are named ``dp_ca_j48*``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.arrays import IntArray
from fedanon.bundled import EXAMPLES
from fedanon.dp.evaluate import accuracy, make_classifier
from fedanon.dp.randomness import RandomSource
from fedanon.dp.run import anonymize_tables
from fedanon.dp.spec import DPSpec
from fedanon.errors import InputError
from fedanon.evaluation.evaluate import feature_matrix, split_rows
from fedanon.evaluation.experiments import subset
from fedanon.evaluation.j48 import CLASSIFIERS, j48_predict, raw_table, require_j48
from fedanon.evaluation.tables import write_csv
from fedanon.io.table import EncodedTable, Schema, build_schema, encode_table, read_csv_columns

log = logging.getLogger(__name__)
DEFAULT_SPEC = EXAMPLES / "adult" / "dp.toml"  # package data in a wheel (fedanon.bundled)
DEFAULT_DATA = EXAMPLES / "adult" / "adult.csv.gz"
SEED_BA, SEED_LA = 85.3, 75.5  # the seed's Adult figures (%)
ADULT_TRAIN_ROWS = 30_162  # adult.data without unknowns; adult.test follows in adult.csv.gz


@dataclass(frozen=True)
class Grid:
    epsilons: tuple[str, ...]
    hs: tuple[int, ...]
    scores: tuple[str, ...]
    runs: int


FULL = Grid(("0.1", "0.25", "0.5", "1"), (4, 6, 8, 10, 12, 14, 16), ("max", "infogain"), 10)
QUICK = Grid(("0.1", "1"), (4, 10), ("max", "infogain"), 2)


@dataclass(frozen=True)
class Setting:
    spec: DPSpec
    schema: Schema
    train: EncodedTable
    test_leaves: IntArray
    test_cls: IntArray
    BA: float
    LA: float
    classifier: str = "tree"


def load_setting(
    one: Any,
    data_path: Path,
    rows: int | None = None,
    train_rows: int | None = None,
    classifier: str = "tree",
) -> Setting:
    """``train_rows``: the first ``train_rows`` records train, the rest test (Adult's own
    adult.data / adult.test split: 30,162 rows); None: a stratified 2/3 - 1/3 split.
    ``classifier``: "tree" (sklearn) or "j48" (C4.5, Weka) for BA and every CA."""
    if classifier not in CLASSIFIERS:
        raise InputError("unknown classifier", value=classifier, expected=" | ".join(CLASSIFIERS))
    if classifier == "j48":
        require_j48()
    spec, reader = DPSpec.of(one.view), one.taxonomy_reader()
    schema = build_schema(spec.run, reader)
    table = encode_table(schema, data_path)
    header, cols = read_csv_columns(data_path)
    original = {h: [v.strip() for v in c] for h, c in zip(header, cols, strict=True)}
    if rows is not None and rows < table.n_rows:
        table = subset(table, np.arange(rows, dtype=np.int64))
        original = {k: v[:rows] for k, v in original.items()}
    labels = [spec.class_values[c] for c in table.cls]
    if train_rows is None:
        train, test = split_rows(labels)
    else:
        if not 0 < train_rows < table.n_rows:
            raise InputError("train_rows outside the table", value=str(train_rows))
        train = np.arange(train_rows, dtype=np.int64)
        test = np.arange(train_rows, table.n_rows, dtype=np.int64)
    # BA: the same classifier on the raw predictors (numbers as numbers, the rest one-hot)
    num = [a.name for a in spec.predictors if a.type == "numeric"]
    cat = [a.name for a in spec.predictors if a.type != "numeric"]
    if classifier == "j48":
        attrs, raw = raw_table(original, cat, num)
        n_class = len(spec.class_values)
        pred = j48_predict(
            attrs, [c[train] for c in raw], table.cls[train], [c[test] for c in raw], n_class
        )
        ba = float(np.mean(pred == table.cls[test]))
    else:
        x = feature_matrix(original, cat, num, table.n_rows)
        clf = make_classifier().fit(x[train], table.cls[train])
        ba = float(np.mean(clf.predict(x[test]) == table.cls[test]))
    majority = int(np.argmax(np.bincount(table.cls[train], minlength=len(spec.class_values))))
    la = float(np.mean(table.cls[test] == majority))
    log.info("%d train / %d test rows; BA = %.4f, LA = %.4f", train.size, test.size, ba, la)
    return Setting(
        spec,
        schema,
        subset(table, train),
        table.qid_leaves[:, test],
        table.cls[test],
        ba,
        la,
        classifier,
    )


def one_run(s: Setting, score: str, epsilon: str, h: int, seed: int) -> dict[str, Any]:
    params = replace(s.spec.params, score=score, epsilon=Fraction(epsilon), specializations=h)
    spec = replace(s.spec, params=params)
    result = anonymize_tables(spec, s.schema, [s.train], RandomSource(seed))
    t0 = time.perf_counter()
    ca = accuracy(
        result.decider, result.counts, s.test_leaves, s.test_cls, make_classifier, s.classifier
    )
    counts = result.counts.counts
    return {
        "score": score,
        "epsilon": float(Fraction(epsilon)),
        "h": h,
        "seed": seed,
        "CA": ca,
        "groups": int(counts.shape[0]),
        "noisy_total": int(counts.sum()),
        "anonymize_s": result.seconds,
        "classify_s": time.perf_counter() - t0,
    }


def summarize(runs: Sequence[dict[str, Any]], s: Setting) -> list[dict[str, Any]]:
    out = []
    keys = sorted({(r["score"], r["epsilon"], r["h"]) for r in runs})
    for score, eps, h in keys:
        sel = [r for r in runs if (r["score"], r["epsilon"], r["h"]) == (score, eps, h)]
        ca = np.array([r["CA"] for r in sel])
        out.append(
            {
                "score": score,
                "epsilon": eps,
                "h": h,
                "runs": len(sel),
                "CA_mean": float(ca.mean()),
                "CA_std": float(ca.std()),
                "CA_min": float(ca.min()),
                "CA_max": float(ca.max()),
                "BA": s.BA,
                "LA": s.LA,
                "groups_median": float(np.median([r["groups"] for r in sel])),
                "anonymize_s_mean": float(np.mean([r["anonymize_s"] for r in sel])),
            }
        )
    return out


def plot(path: Path, summary: Sequence[dict[str, Any]], s: Setting, score: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for i, eps in enumerate(sorted({r["epsilon"] for r in summary})):
        sel = sorted(
            (r for r in summary if r["score"] == score and r["epsilon"] == eps),
            key=lambda r: r["h"],
        )
        ax.errorbar(
            [r["h"] for r in sel],
            [100 * r["CA_mean"] for r in sel],
            yerr=[100 * r["CA_std"] for r in sel],
            marker="osd^v"[i % 5],
            capsize=3,
            label=f"ε = {eps:g}",
        )
    ax.axhline(100 * s.BA, color="k", ls="--", lw=1, label=f"BA {100 * s.BA:.1f}%")
    ax.axhline(100 * s.LA, color="grey", ls=":", lw=1.5, label=f"LA {100 * s.LA:.1f}%")
    name = "Max" if score == "max" else "InfoGain"
    ax.set(
        xlabel="number of specializations h",
        ylabel="classification accuracy CA (%)",
        title=f"Adult, DiffGen, {name}: CA (mean ± std over runs)"
        + (", C4.5 (J48)" if s.classifier == "j48" else ""),
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_dp_experiment(
    out: Path,
    spec: Any,
    *,
    quick: bool = False,
    runs: int | None = None,
    data_path: Path | None = None,
    rows: int | None = None,
    grid: Grid | None = None,
    classifier: str = "tree",
) -> list[Path]:
    grid = grid or (QUICK if quick else FULL)
    if runs is not None:
        if runs < 1:
            raise InputError("--runs must be >= 1", value=str(runs))
        grid = replace(grid, runs=runs)
    train_rows = ADULT_TRAIN_ROWS if data_path is None and rows is None else None
    s = load_setting(spec, data_path or DEFAULT_DATA, rows, train_rows, classifier)
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for si, score in enumerate(grid.scores):
        for ei, eps in enumerate(grid.epsilons):
            for h in grid.hs:
                for r in range(grid.runs):
                    seed = ((si * 10 + ei) * 100 + h) * 1000 + r
                    results.append(one_run(s, score, eps, h, seed))
                last = results[-grid.runs :]
                log.info(
                    "%s eps=%s h=%d: CA %.4f (%d groups)",
                    score,
                    eps,
                    h,
                    float(np.mean([x["CA"] for x in last])),
                    last[-1]["groups"],
                )
    log.info("%d runs in %.1fs", len(results), time.perf_counter() - t0)
    summary = summarize(results, s)
    stem = "dp_ca" if classifier == "tree" else f"dp_ca_{classifier}"
    written = [out / f"{stem}.csv", out / f"{stem}_runs.csv"]
    write_csv(written[0], summary)
    write_csv(written[1], results)
    for score in grid.scores:
        path = out / f"{stem}_{score}.png"
        plot(path, summary, s, score)
        written.append(path)
    return written
