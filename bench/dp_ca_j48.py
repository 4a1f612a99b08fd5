"""DiffGen on Adult evaluated with the seed's classifier, C4.5 (Weka J48), next to the
project's sklearn entropy tree on the very same releases (paired): Max, epsilon = 1, h = 10,
seeds 50000.. as ``bench/dp_ca_probe.py --setting`` (whose CART line this reproduces).

    apt-get install weka
    .venv/bin/python bench/dp_ca_j48.py --seeds 100            # ~2.5 min on one core
    .venv/bin/python bench/dp_ca_j48.py --seeds 30 --eps 0.1 --h 4 6 8 10 12 14 16

Fixed seeds: NOT PRIVATE releases (a measurement).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from fractions import Fraction

import numpy as np

from fedanon.apispec import Spec
from fedanon.dp import experiment as E
from fedanon.dp.evaluate import accuracy, make_classifier
from fedanon.dp.randomness import RandomSource
from fedanon.dp.run import anonymize_tables


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--eps", default="1")
    ap.add_argument("--h", type=int, nargs="+", default=[10])
    ap.add_argument("--score", default="max")
    args = ap.parse_args()
    s = E.load_setting(
        Spec.from_toml(E.DEFAULT_SPEC), E.DEFAULT_DATA, train_rows=E.ADULT_TRAIN_ROWS
    )
    sj = E.load_setting(
        Spec.from_toml(E.DEFAULT_SPEC),
        E.DEFAULT_DATA,
        train_rows=E.ADULT_TRAIN_ROWS,
        classifier="j48",
    )
    print(f"BA: tree {100 * s.BA:.2f}  J48 {100 * sj.BA:.2f}   LA {100 * s.LA:.2f}", flush=True)
    for h in args.h:
        t0 = time.perf_counter()
        ca: dict[str, list[float]] = {"tree": [], "j48": []}
        params = replace(
            s.spec.params, score=args.score, epsilon=Fraction(args.eps), specializations=h
        )
        spec = replace(s.spec, params=params)
        for seed in range(args.seeds):
            r = anonymize_tables(spec, s.schema, [s.train], RandomSource(50_000 + seed))
            for name in ca:
                ca[name].append(
                    accuracy(r.decider, r.counts, s.test_leaves, s.test_cls, make_classifier, name)
                )
        n = args.seeds
        d = np.asarray(ca["j48"]) - np.asarray(ca["tree"])
        for name, ba in (("tree", s.BA), ("j48", sj.BA)):
            v = 100 * np.asarray(ca[name])
            print(
                f"{args.score} eps={args.eps} h={h:2d} {name:<4}: CA {v.mean():6.2f} ± "
                f"{v.std():4.2f} (s.e. {v.std() / np.sqrt(n):4.2f}, min {v.min():.2f}, "
                f"{n} seeds)  BA {100 * ba:.2f}  BA-CA {100 * ba - v.mean():.2f}",
                flush=True,
            )
        print(
            f"  J48 - tree, paired: {100 * d.mean():+.2f} (s.e. {100 * d.std() / np.sqrt(n):.2f});"
            f" {time.perf_counter() - t0:.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
