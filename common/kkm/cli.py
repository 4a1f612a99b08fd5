"""``fedanon generate-rt`` (registered by ``fedanon.cli.main``): a synthetic RT-dataset.  The
method's other commands are ``fedanon anonymize`` / ``audit`` / ``evaluate`` / ``experiment
kkm-*`` through its method object (:mod:`fedanon.kkm.method`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    g = sub.add_parser(
        "generate-rt",
        help="synthetic RT-dataset: Adult demographics + ICD-9-CM diagnosis codes",
    )
    g.add_argument("--n", type=int, required=True, help="number of patients")
    g.add_argument("--seed", type=int, default=1, help="random seed (same seed, same file)")
    g.add_argument("--out", type=Path, required=True, help="output CSV")
    g.add_argument("--adult", type=Path, help="Adult data (default examples/adult/adult.csv.gz)")
    g.add_argument("--constraints-out", type=Path, help="also write utility constraints (TOML)")
    g.add_argument(
        "--level",
        default="chapter",
        choices=("chapter", "section", "3digit"),
        help="codes per constraint (an ICD-9-CM level)",
    )
    g.add_argument("--age-width", type=int, default=12, help="width of the constraints' age bands")
    g.set_defaults(handler=_generate)


def _generate(args: argparse.Namespace) -> int:
    from fedanon.io.fsutil import atomic_write, check_outputs, check_table_name
    from fedanon.io.release import write_table
    from fedanon.kkm.generator import ADULT, constraint_rows, constraints_toml, generate, rt_columns

    # before any work: folders that exist, regular files, distinct, never the adult input
    check_outputs(
        {"--out": args.out, "--constraints-out": args.constraints_out},
        [args.adult] if args.adult else [],
    )
    check_table_name("--out", args.out)
    data = generate(args.n, args.seed, args.adult or ADULT)
    rows = None
    if args.constraints_out is not None:
        rows = constraint_rows(args.level, args.age_width)
    write_table(args.out, list(data.header), dict(rt_columns(data)))  # CSV, .gz or Parquet
    print(f"wrote {data.n} patients -> {args.out}")
    if rows is not None:
        atomic_write(args.constraints_out, lambda fh: fh.write(constraints_toml(rows)))
        print(f"wrote {len(rows)} utility constraints -> {args.constraints_out}")
    return 0
