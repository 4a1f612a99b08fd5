"""``fedanon generate-cohort`` (registered by ``fedanon.cli.main``): the synthetic cohort of
DiffGen over diagnosis codes (:mod:`fedanon.dp.cohort`; its generating model is written in
docs/dp-diagnosis-codes.md).  DiffGen's other commands are ``fedanon anonymize`` /
``evaluate`` / ``experiment dp`` through its method object (:mod:`fedanon.dp.method`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fedanon.dp.bounds import positive_int


def register(sub: Any) -> None:
    g = sub.add_parser(
        "generate-cohort",
        help="synthetic cohort for DiffGen: sex, age, ICD-9-CM diagnosis codes, an outcome "
        "that depends on both (writes DIR/cohort.csv, DIR/cohort.toml, DIR/sex.txt)",
    )
    g.add_argument("--rows", type=positive_int, default=30_000, help="patients (default 30000)")
    g.add_argument("--seed", type=int, default=1, help="random seed (same seed, same file)")
    g.add_argument("--out", type=Path, required=True, help="output directory")
    g.add_argument("--epsilon", type=float, default=1.0, help="the spec's epsilon (default 1)")
    g.add_argument(
        "--specializations", type=positive_int, default=10, help="the spec's h (default 10)"
    )
    g.set_defaults(handler=_generate)


def _generate(args: argparse.Namespace) -> int:
    from fedanon.dp.cohort import write
    from fedanon.errors import InputError

    if not 0 < args.epsilon < float("inf"):  # inf: a spec every command then refuses
        raise InputError(
            "epsilon must be a finite number > 0",
            value=str(args.epsilon),
            expected="--epsilon 1.0",
        )
    out: Path = args.out
    taken = [p for p in ("cohort.csv", "cohort.toml", "sex.txt") if (out / p).exists()]
    if taken:
        raise InputError(
            f"{out / taken[0]} exists: generate-cohort never overwrites a file",
            value=str(out),
            expected="a new or empty output directory",
        )
    path = write(out, args.rows, args.seed, args.epsilon, args.specializations)
    print(f"wrote {args.rows} patients -> {path} (spec {out / 'cohort.toml'})")
    return 0
