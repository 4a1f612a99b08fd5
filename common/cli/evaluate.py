"""`fedanon evaluate` and `fedanon experiment` (registered by fedanon.cli.main), for every
method: the spec (evaluate) or the experiment's name says which
(:mod:`fedanon.methods.registry`); a method's own options are refused for the others."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    from fedanon.methods import registry

    e = sub.add_parser(
        "evaluate",
        help="utility of a released table (LKC: CE, BE, UE and DR; DiffGen: CA, BA, LA on "
        "held-out data; (k, k^m): NCP, UL, ARE)",
    )
    e.add_argument("--spec", type=Path, required=True, help="the run spec used to anonymize")
    e.add_argument("--original", type=Path, help="raw input CSV (.gz ok)")
    e.add_argument("--released", type=Path, required=True, help="released CSV, input row order")
    e.add_argument("--json", type=Path, help="write the metrics as JSON here")
    registry.add_options(e, "evaluate")
    e.set_defaults(handler=_evaluate)

    x = sub.add_parser(
        "experiment",
        help="the papers' experiments (LKC on Adult, Sec. 6; DiffGen: dp; ArtUC: kkm-*): "
        "CSV + PNG per figure",
    )
    x.add_argument("name", choices=registry.experiment_names())
    x.add_argument("--out", type=Path, required=True, help="output folder")
    x.add_argument(
        "--quick", action="store_true", help="reduced grid (seconds: see docs/results.md)"
    )
    registry.add_options(x, "experiment")
    x.set_defaults(handler=_experiment)


def _evaluate(args: argparse.Namespace) -> int:
    from fedanon.apispec import Spec
    from fedanon.methods import registry

    method = registry.of_spec_lenient(args.spec)
    registry.check_options(method, args, "evaluate", args.spec)
    spec = Spec.from_toml(args.spec)  # the one spec, parsed once
    return spec.method.evaluate(args, spec)


def _experiment(args: argparse.Namespace) -> int:
    from fedanon.apispec import Spec
    from fedanon.methods import registry

    method = registry.of_experiment(args.name)
    registry.check_options(method, args, "experiment")
    spec = Spec.from_toml(method.experiment_spec(args))
    try:
        return method.experiment(args, spec)
    except OSError as exc:  # --out: a denied folder, a full disk, a file in the way: exit 2
        from fedanon.io.fsutil import output_error

        if exc.filename is None or not Path(exc.filename).is_relative_to(args.out):
            raise
        raise output_error(Path(exc.filename), exc) from exc
