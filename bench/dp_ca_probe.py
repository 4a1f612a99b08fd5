"""Where DiffGen's CA on Adult (Max, epsilon = 1, h = 10) is lost: classifier variants,
post-processing of the noisy counts, the selections made, and a near-noiseless ceiling; then
(``--setting``) the evaluation setting against the seed authors' code, with many seeds: split
(Adult's own adult.data / adult.test vs a stratified 2/3 - 1/3), taxonomies (the authors'
exp/adult.hchy vs the ARX hierarchies) and the noise budget ("half" vs "rest").

    .venv/bin/python bench/dp_ca_probe.py                 # ~40 s on one core
    .venv/bin/python bench/dp_ca_probe.py --setting 100   # 100 seeds per setting, ~2 min

Same split, same seeds as `fedanon experiment dp` (its epsilon = 1, h = 10, Max point), so
the "current" line reproduces docs/results.md.  Fixed seeds: NOT PRIVATE releases (a
measurement).  Thresholding the released counts is post-processing (no privacy cost).
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.apispec import Spec
from fedanon.dp import experiment as E
from fedanon.dp.decider import NoisyCounts
from fedanon.dp.evaluate import accuracy, make_classifier
from fedanon.dp.randomness import RandomSource
from fedanon.dp.run import DPRun, anonymize_tables
from fedanon.evaluation.experiments import PRUNED_ALPHA

RUNS = 10
FAMILY = ("marital-status", "relationship")


def _tree(**kw: Any) -> Callable[[], Any]:
    from sklearn.tree import DecisionTreeClassifier

    return lambda: DecisionTreeClassifier(criterion="entropy", random_state=0, **kw)


CLASSIFIERS: dict[str, Callable[[], Any]] = {
    "current (min_impurity_decrease 3e-4)": make_classifier,
    "unpruned": _tree(),
    "min_impurity_decrease 1e-3": _tree(min_impurity_decrease=1e-3),
    "min_impurity_decrease 3e-3": _tree(min_impurity_decrease=3e-3),
    "min_samples_leaf 50": _tree(min_samples_leaf=50),
    "min_weight_fraction_leaf 0.005": _tree(min_weight_fraction_leaf=0.005),
}


def releases(s: E.Setting, score: str, eps: str, h: int) -> list[DPRun]:
    eps_index = E.FULL.epsilons.index(eps) if eps in E.FULL.epsilons else 3
    si, ei = E.FULL.scores.index(score), eps_index
    out = []
    for r in range(RUNS):
        seed = ((si * 10 + ei) * 100 + h) * 1000 + r  # as run_dp_experiment
        params = replace(s.spec.params, score=score, epsilon=Fraction(eps), specializations=h)
        spec = replace(s.spec, params=params)
        out.append(anonymize_tables(spec, s.schema, [s.train], RandomSource(seed)))
    return out


def line(name: str, values: list[float]) -> None:
    print(f"  {name:<40} {100 * np.mean(values):6.2f} ± {100 * np.std(values):4.2f}")


def arx_spec(folder: Path) -> Path:
    """examples/adult/dp.toml with the ARX hierarchies (the LKC specs') instead of the
    authors' taxonomies, written into ``folder`` next to a link to the taxonomies."""
    text = E.DEFAULT_SPEC.read_text()
    text = re.sub(r"diffgen-(marital-status|relationship)\.txt", r"\1.txt", text)
    text = re.sub(r"diffgen-([a-z-]+)\.txt", r"adult_hierarchy_\1.csv", text)
    (folder / "taxonomies").symlink_to(E.DEFAULT_SPEC.parent / "taxonomies")
    path = folder / "dp-arx.toml"
    path.write_text(text)
    return path


def setting(n: int) -> None:
    """CA of Max, epsilon = 1, h = 10 over n seeds per evaluation setting."""
    with tempfile.TemporaryDirectory() as tmp:
        specs = {"authors' taxonomies": E.DEFAULT_SPEC, "ARX hierarchies": arx_spec(Path(tmp))}
        for split, train_rows in (("adult.data/adult.test", E.ADULT_TRAIN_ROWS), ("2/3-1/3", None)):
            for tax, path in specs.items():
                s = E.load_setting(Spec.from_toml(path), E.DEFAULT_DATA, train_rows=train_rows)
                for nb in ("half", "rest"):
                    cas = []
                    for seed in range(n):
                        params = replace(
                            s.spec.params,
                            score="max",
                            epsilon=Fraction(1),
                            specializations=10,
                            noise_budget=nb,
                        )
                        r = anonymize_tables(
                            replace(s.spec, params=params),
                            s.schema,
                            [s.train],
                            RandomSource(50_000 + seed),
                        )
                        cas.append(
                            accuracy(
                                r.decider, r.counts, s.test_leaves, s.test_cls, make_classifier
                            )
                        )
                    se = 100 * np.std(cas) / np.sqrt(n)
                    print(
                        f"  {split:<22} {tax:<20} noise {nb}: CA {100 * np.mean(cas):6.2f} "
                        f"± {100 * np.std(cas):4.2f} (s.e. {se:4.2f}, {n} seeds)  "
                        f"BA {100 * s.BA:.2f}  LA {100 * s.LA:.2f}",
                        flush=True,
                    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--setting", type=int, metavar="SEEDS", help="compare evaluation settings")
    args = ap.parse_args()
    if args.setting:
        setting(args.setting)
        return
    s = E.load_setting(
        Spec.from_toml(E.DEFAULT_SPEC), E.DEFAULT_DATA, train_rows=E.ADULT_TRAIN_ROWS
    )
    print(f"BA {100 * s.BA:.2f}  LA {100 * s.LA:.2f}  (target CA >= BA - 3.5)")
    runs = releases(s, "max", "1", 10)
    print("Max, epsilon = 1, h = 10, classifier on the released counts:")
    for name, make in CLASSIFIERS.items():
        line(name, [accuracy(r.decider, r.counts, s.test_leaves, s.test_cls, make) for r in runs])
    print("counts thresholded (weights max(count - t, 0), post-processing):")
    for t in (1, 2, 3, 5):
        cas = []
        for r in runs:
            c = NoisyCounts(r.counts.nodes, np.maximum(r.counts.counts - t, 0), 0)
            cas.append(accuracy(r.decider, c, s.test_leaves, s.test_cls, make_classifier))
        line(f"t = {t}", cas)
    print("by whether marital-status or relationship was selected:")
    cas = [accuracy(r.decider, r.counts, s.test_leaves, s.test_cls, make_classifier) for r in runs]
    picked = [any(x.attribute in FAMILY for x in r.decider.selections) for r in runs]
    for flag in (True, False):
        sel = [c for c, p in zip(cas, picked, strict=True) if p is flag]
        if sel:
            line(f"{'selected' if flag else 'not selected'} ({len(sel)} runs)", sel)
    for r in runs[:3]:
        print("   selections:", [x.attribute for x in r.decider.selections])
    print("near-noiseless ceiling (epsilon = 100: selections ~ argmax, same algorithm):")
    for score in ("max", "infogain"):
        rs = releases(s, score, "100", 10)
        cas = [
            accuracy(r.decider, r.counts, s.test_leaves, s.test_cls, make_classifier) for r in rs
        ]
        line(f"{score}, h = 10", cas)
    print(f"(PRUNED_ALPHA = {PRUNED_ALPHA})")


if __name__ == "__main__":
    main()
