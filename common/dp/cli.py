"""`fedanon dp-anonymize` and `fedanon dp-experiment` (registered by fedanon.cli.main)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("the seed must be >= 0")
    return value


def register(sub: Any) -> None:
    a = sub.add_parser(
        "dp-anonymize",
        help="epsilon-differentially private release of one table (DiffGen)",
        description="Release noisy counts of generalized groups (spec: [privacy] model = 'dp').",
    )
    a.add_argument("--spec", type=Path, required=True, help="DP run spec (TOML)")
    a.add_argument("--input", type=Path, required=True, help="input CSV (.gz ok)")
    a.add_argument(
        "--output",
        type=Path,
        required=True,
        help="released table: CSV, .gz or .parquet by the name (written atomically)",
    )
    a.add_argument("--report", type=Path, help="JSON report (confidential: exact scores)")
    a.add_argument(
        "--expand", action="store_true", help="one row per counted record, no count column"
    )
    a.add_argument(
        "--seed",
        type=_seed,
        help="fixed seed for tests and experiments: the output is then NOT PRIVATE",
    )
    a.add_argument("--quiet", action="store_true", help="no summary")
    add_bound_options(a)
    a.set_defaults(handler=_anonymize)

    x = sub.add_parser(
        "dp-experiment",
        help="the seed's DiffGen evaluation on Adult: CA vs h and epsilon, CSV + PNG",
    )
    x.add_argument("--out", type=Path, required=True, help="output folder")
    x.add_argument("--quick", action="store_true", help="small grid, 2 runs (a smoke test)")
    x.add_argument("--runs", type=int, help="runs per setting (default 10, quick 2)")
    x.add_argument("--spec", type=Path, help="DP spec (default examples/adult/dp.toml)")
    x.add_argument("--data", type=Path, help="data (default examples/adult/adult.csv.gz)")
    x.add_argument("--rows", type=int, help="use only the first N rows (smoke tests)")
    add_classifier_option(x)
    x.set_defaults(handler=_experiment)


def add_bound_options(parser: Any, prefix: str = "") -> None:
    """``--max-table-rows`` and ``--max-expanded-rows`` (:mod:`fedanon.dp.bounds`); defaults
    None so that a non-DP spec can refuse them when given."""
    from fedanon.dp.bounds import (
        EXPANDED_FLAG,
        MAX_EXPANDED_ROWS,
        MAX_TABLE_ROWS,
        TABLE_FLAG,
        positive_int,
    )

    parser.add_argument(
        TABLE_FLAG,
        type=positive_int,
        metavar="N",
        help=f"{prefix}refuse a count table (groups x class values) of more than N rows, "
        f"before allocating it (default {MAX_TABLE_ROWS:,}; ~300 bytes of memory a row)",
    )
    parser.add_argument(
        EXPANDED_FLAG,
        type=positive_int,
        metavar="N",
        help=f"{prefix}with --expand: refuse to write more than N rows (the noisy total; "
        f"default {MAX_EXPANDED_ROWS:,})",
    )


def bounds_of(args: argparse.Namespace) -> tuple[int, int]:
    from fedanon.dp.bounds import MAX_EXPANDED_ROWS, MAX_TABLE_ROWS

    table = getattr(args, "max_table_rows", None)
    expanded = getattr(args, "max_expanded_rows", None)
    return (
        MAX_TABLE_ROWS if table is None else table,
        MAX_EXPANDED_ROWS if expanded is None else expanded,
    )


def add_classifier_option(parser: Any) -> None:
    """``--classifier tree|j48`` of the DP evaluations (CA, BA)."""
    from fedanon.evaluation.j48 import CLASSIFIERS

    parser.add_argument(
        "--classifier",
        choices=CLASSIFIERS,
        default="tree",
        help="tree: sklearn's entropy tree (default); j48: C4.5 as in the DiffGen paper "
        "(Weka's J48, default pruning; needs `apt-get install weka`)",
    )


def anonymize_if_dp(args: argparse.Namespace) -> int | None:
    """`fedanon anonymize` with a ``[privacy] model = "dp"`` spec: the same release as
    `fedanon dp-anonymize`; None for any other spec (refusing the dp-only --seed/--expand)."""
    from fedanon.dp.spec import is_dp_spec
    from fedanon.errors import InputError

    if not is_dp_spec(args.spec):
        dp_only = (
            ("--seed", args.seed is not None),
            ("--expand", args.expand),
            ("--max-table-rows", getattr(args, "max_table_rows", None) is not None),
            ("--max-expanded-rows", getattr(args, "max_expanded_rows", None) is not None),
        )
        for flag, given in dp_only:
            if given:
                raise InputError(
                    f"{flag} applies only to a differential-privacy spec",
                    file=str(args.spec),
                    expected='[privacy] model = "dp" in the spec, or no ' + flag,
                )
        return None
    if args.query is not None or args.table is not None or "://" in args.input:
        raise InputError(
            "a dp spec reads a CSV file (.gz ok), not a database",
            value=str(args.input),
            expected="--input FILE.csv without --query/--table",
        )
    if args.seed is not None and args.seed < 0:
        raise InputError("the seed must be >= 0", value=str(args.seed), expected="--seed N >= 0")
    args.input = Path(args.input)
    return _anonymize(args)


def _anonymize(args: argparse.Namespace) -> int:
    from fedanon.dp.anonymize import anonymize_dp_file, summary_text

    max_table_rows, max_expanded_rows = bounds_of(args)
    rep = anonymize_dp_file(
        args.spec,
        args.input,
        args.output,
        args.report,
        expand=args.expand,
        seed=args.seed,
        progress=sys.stderr.isatty() and not args.quiet,
        max_table_rows=max_table_rows,
        max_expanded_rows=max_expanded_rows,
    )
    if not args.quiet:
        print(summary_text(rep, args.output, args.report))
    return 0


def run_experiment_args(args: argparse.Namespace) -> int:
    """`fedanon experiment dp` (an alias of `fedanon dp-experiment`)."""
    return _experiment(args)


def _experiment(args: argparse.Namespace) -> int:
    from fedanon.dp.experiment import run_dp_experiment

    written = run_dp_experiment(
        args.out,
        quick=args.quick,
        runs=args.runs,
        spec_path=args.spec,
        data_path=args.data,
        rows=args.rows,
        classifier=getattr(args, "classifier", "tree"),
    )
    for p in written:
        print(p)
    return 0


def evaluate_release_args(args: argparse.Namespace) -> int:
    """`fedanon evaluate --spec DP.toml --released R.csv --train TRAIN.csv --test TEST.csv`."""
    import json

    from fedanon.dp.evaluate_release import evaluate_release, release_metrics_text
    from fedanon.errors import InputError
    from fedanon.io.fsutil import atomic_write, check_outputs

    if args.train is None or args.test is None or args.original is not None:
        raise InputError(
            "a DP release is not row-aligned with its original: evaluate it on held-out data",
            file=str(args.spec),
            expected="--train TRAIN.csv (the released raw data) --test TEST.csv, no --original",
        )
    check_outputs({"--json": args.json}, [args.spec, args.released, args.train, args.test])
    m = evaluate_release(
        args.spec, args.released, args.train, args.test, getattr(args, "classifier", "tree")
    )
    print(release_metrics_text(m))
    if args.json is not None:
        atomic_write(args.json, lambda fh: json.dump(m.as_dict(), fh, indent=2))
    return 0
