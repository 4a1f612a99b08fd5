"""`fedanon evaluate` and `fedanon experiment` (registered by fedanon.cli.main)."""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedanon.dp.cli import add_classifier_option
from fedanon.errors import InputError
from fedanon.io.fsutil import atomic_write, check_outputs

EVAL_EXTRA = "fedanon[eval]"
EVAL_MODULES = ("sklearn.tree", "sklearn.model_selection", "scipy.sparse")
EXPERIMENTS = ("ce-vs-k", "ce-vs-c", "dr", "distributed-vs-naive", "scalability", "all", "dp")


def register(sub: Any) -> None:
    e = sub.add_parser(
        "evaluate", help="utility of a released table: CE, BE, UE (decision tree) and DR"
    )
    e.add_argument("--spec", type=Path, required=True, help="the run spec used to anonymize")
    e.add_argument("--original", type=Path, help="raw input CSV (.gz ok)")
    e.add_argument("--released", type=Path, required=True, help="released CSV, input row order")
    e.add_argument("--train", type=Path, help="dp specs: the raw CSV that was released")
    e.add_argument("--test", type=Path, help="dp specs: held-out raw CSV to measure CA on")
    e.add_argument("--json", type=Path, help="write the metrics as JSON here")
    e.add_argument(
        "--ccp-alpha",
        type=float,
        default=0.0,
        help="cost-complexity pruning of the trees (0 = unpruned, default; 3e-4 ~ C4.5)",
    )
    add_classifier_option(e)
    e.set_defaults(handler=_evaluate)

    x = sub.add_parser(
        "experiment", help="the paper's experiments on Adult (Sec. 6): CSV + PNG per figure"
    )
    x.add_argument("name", choices=EXPERIMENTS)
    x.add_argument("--out", type=Path, required=True, help="output folder")
    x.add_argument("--quick", action="store_true", help="reduced grid (a few minutes)")
    x.add_argument(
        "--spec", type=Path, help="base spec (default: the bundled examples/adult/run.toml)"
    )
    x.add_argument("--data", type=Path, help="data (default: the bundled adult.csv.gz)")
    x.add_argument("--rows", type=int, help="use only the first N rows (smoke tests)")
    x.add_argument("--runs", type=int, help="dp only: runs per setting (default 10, quick 2)")
    add_classifier_option(x)
    x.set_defaults(handler=_experiment)


def require_eval_extra(command: str, modules: Sequence[str]) -> None:
    """The optional libraries a command needs are importable; else say how to install them."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise InputError(
                f"`fedanon {command}` needs {name.split('.')[0]} (optional extra 'eval', "
                f"not installed: {exc})",
                expected=f"pip install '{EVAL_EXTRA}'",
            ) from None


def _evaluate(args: argparse.Namespace) -> int:
    require_eval_extra("evaluate", EVAL_MODULES)
    from fedanon.dp.spec import is_dp_spec

    if is_dp_spec(args.spec):  # a DiffGen release: not row-aligned, CA/BA/LA (common/dp)
        from fedanon.dp.cli import evaluate_release_args

        return evaluate_release_args(args)
    if args.classifier != "tree":
        raise InputError(
            "--classifier j48 applies only to DiffGen releases ([privacy] model = 'dp' specs)",
            file=str(args.spec),
        )
    if args.original is None or args.train is not None or args.test is not None:
        raise InputError(
            "an LKC release is evaluated against its original",
            file=str(args.spec),
            expected="--original RAW.csv (--train/--test are for [privacy] model = 'dp' specs)",
        )
    check_outputs({"--json": args.json}, [args.spec, args.original, args.released])
    from fedanon.evaluation import evaluate

    m = evaluate.evaluate_files(args.spec, args.original, args.released, args.ccp_alpha)
    print(evaluate.metrics_text(m))
    if args.json is not None:
        atomic_write(args.json, lambda fh: json.dump(m.as_dict(), fh, indent=2))
    return 0


def _experiment(args: argparse.Namespace) -> int:
    require_eval_extra("experiment", (*EVAL_MODULES, "matplotlib.pyplot"))
    if args.name == "dp":  # DiffGen (common/dp): the same as `fedanon dp-experiment`
        from fedanon.dp.cli import run_experiment_args

        return run_experiment_args(args)
    if args.runs is not None:
        raise InputError("--runs applies only to `fedanon experiment dp`", value=str(args.runs))
    if args.classifier != "tree":
        raise InputError("--classifier j48 applies only to `fedanon experiment dp`")
    from fedanon.evaluation.experiments import run_experiments

    written = run_experiments(
        args.name,
        args.out,
        quick=args.quick,
        spec_path=args.spec,
        data_path=args.data,
        rows=args.rows,
    )
    for p in written:
        print(p)
    return 0
