"""DiffGen, epsilon-differential privacy by generalization (``[privacy] model = "dp"``): the
method object of :mod:`fedanon.methods`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fedanon.dp.bounds import (
    EXPANDED_FLAG,
    MAX_EXPANDED_ROWS,
    MAX_TABLE_ROWS,
    TABLE_FLAG,
    positive_int,
)
from fedanon.dp.model import MODEL, NOT_AUDITABLE
from fedanon.errors import InputError
from fedanon.methods.base import Capabilities, Method, Option, positive_count, print_metrics

NAME = MODEL
EXPERIMENT = "dp"
DP_ONLY = "dp specs only: "


def bound_options(command: str, prefix: str = DP_ONLY) -> tuple[Option, ...]:
    """``--max-table-rows`` and ``--max-expanded-rows`` (:mod:`fedanon.dp.bounds`)."""
    return (
        Option(
            command,
            (TABLE_FLAG,),
            {
                "type": positive_int,
                "metavar": "N",
                "help": f"{prefix}refuse a count table (groups x class values) of more than N "
                f"rows, before allocating it (default {MAX_TABLE_ROWS:,}; ~300 bytes of memory "
                "a row)",
            },
        ),
        Option(
            command,
            (EXPANDED_FLAG,),
            {
                "type": positive_int,
                "metavar": "N",
                "help": f"{prefix}with --expand: refuse to write more than N rows (the noisy "
                f"total; default {MAX_EXPANDED_ROWS:,})",
            },
        ),
    )


def classifier_option(command: str) -> Option:
    from fedanon.evaluation.j48 import CLASSIFIERS

    return Option(
        command,
        ("--classifier",),
        {
            "choices": CLASSIFIERS,
            "help": "DiffGen: tree: sklearn's entropy tree (default); j48: C4.5 as in the "
            "DiffGen paper (Weka's J48, default pruning; needs `apt-get install weka`)",
        },
    )


class DiffGenMethod(Method):
    name = NAME
    title = "DiffGen"
    spec_phrase = "a differential-privacy spec"
    capabilities = Capabilities(federated=True, auditable=False, set_valued=True, evaluable=True)
    experiments = (EXPERIMENT,)
    deprecated = ("dp-anonymize", "dp-experiment")
    not_auditable = NOT_AUDITABLE
    options = (
        Option(
            "anonymize",
            ("--seed",),
            {"type": int, "help": DP_ONLY + "fixed seed (output NOT PRIVATE)"},
        ),
        Option(
            "anonymize",
            ("--expand",),
            {"action": "store_true", "help": DP_ONLY + "one row per record"},
        ),
        *bound_options("anonymize"),
        Option("evaluate", ("--train",), {"type": Path, "help": "dp: the raw CSV released"}),
        Option("evaluate", ("--test",), {"type": Path, "help": "dp: held-out raw CSV for CA"}),
        classifier_option("evaluate"),
        Option(
            "experiment",
            ("--runs",),
            {"type": positive_count, "help": "dp: runs per setting (default 10, quick 2)"},
        ),
        classifier_option("experiment"),
        Option("experiment", ("--spec",), {"type": Path, "help": "base spec"}),
        Option("experiment", ("--data",), {"type": Path, "help": "data"}),
        Option(
            "experiment", ("--rows",), {"type": positive_count, "help": "use only the first N rows"}
        ),
    )

    def check_spec(self, run_spec: Any) -> None:
        from fedanon.dp.spec import DPSpec

        DPSpec.of(run_spec)  # the score and the class values DiffGen needs

    def new_spelling(self, command: str, rest: list[str]) -> list[str]:
        if command == "dp-anonymize":
            return ["anonymize", *rest]
        if command == "dp-experiment":
            return ["experiment", EXPERIMENT, *rest]
        return super().new_spelling(command, rest)

    def anonymize(self, args: argparse.Namespace, spec: Any) -> int:
        if args.query is not None or args.table is not None or "://" in str(args.input):
            raise InputError(
                "a dp spec reads a CSV file (.gz ok), not a database",
                value=str(args.input),
                expected="--input FILE.csv without --query/--table",
            )
        if args.seed is not None and args.seed < 0:
            raise InputError(
                "the seed must be >= 0", value=str(args.seed), expected="--seed N >= 0"
            )
        from fedanon.dp.anonymize import anonymize_dp_file, summary_text

        max_table_rows, max_expanded_rows = bounds_of(args)
        rep = anonymize_dp_file(
            spec,
            Path(args.input),
            args.output,
            args.report,
            expand=bool(args.expand),
            seed=args.seed,
            progress=sys.stderr.isatty() and not args.quiet,
            max_table_rows=max_table_rows,
            max_expanded_rows=max_expanded_rows,
        )
        if not args.quiet:
            print(summary_text(rep, args.output, args.report))
        return 0

    def audit(self, args: argparse.Namespace, spec: Any) -> dict[str, Any]:
        from fedanon.dp.audit import audit_columns

        return audit_columns(args.spec, args.released, args.sep, spec.view)

    def evaluate(self, args: argparse.Namespace, spec: Any) -> int:
        from fedanon.dp.evaluate_release import evaluate_release, release_metrics_text
        from fedanon.evaluation.extra import require_eval_extra
        from fedanon.io.fsutil import check_outputs

        require_eval_extra("evaluate")
        if args.train is None or args.test is None or args.original is not None:
            raise InputError(
                "a DP release is not row-aligned with its original: evaluate it on held-out data",
                file=str(args.spec),
                expected="--train TRAIN.csv (the released raw data) --test TEST.csv, no --original",
            )
        check_outputs({"--json": args.json}, [args.spec, args.released, args.train, args.test])
        m = evaluate_release(spec, args.released, args.train, args.test, args.classifier or "tree")
        return print_metrics(release_metrics_text(m), m.as_dict(), args.json)

    def experiment_spec(self, args: argparse.Namespace) -> Path:
        from fedanon.dp.experiment import DEFAULT_SPEC

        return Path(args.spec or DEFAULT_SPEC)

    def run_experiment(self, args: argparse.Namespace, spec: Any) -> list[Path]:
        from fedanon.dp.experiment import run_dp_experiment
        from fedanon.evaluation.extra import PLOT_MODULES, require_eval_extra

        require_eval_extra("experiment", PLOT_MODULES)
        return run_dp_experiment(
            args.out,
            spec,
            quick=args.quick,
            runs=args.runs,
            data_path=args.data,
            rows=args.rows,
            classifier=getattr(args, "classifier", None) or "tree",
        )

    def api_anonymize(
        self, data: Any, run_spec: Any, reader: Any, seed: int | None, expand: bool
    ) -> tuple[Any, dict[str, Any], Any]:
        from fedanon.dp.api import run_dp
        from fedanon.dp.spec import DPSpec

        return run_dp(data, DPSpec.of(run_spec), reader, seed, expand)

    # -- federated: the noisy counts of the final groups, no record union ---------------

    leader_side = "fedanon.leader.counts:CountsLeader"

    def run_hash(self, spec: Any, files: dict[str, str]) -> bytes:
        from fedanon.dp.spec import DPSpec, dp_run_hash

        return dp_run_hash(DPSpec.of(spec), files)  # covers epsilon, h and the score

    def admit_model(self, policy: Any, model: str) -> None:
        """Nothing before the parse: :meth:`check_policy` names the epsilon asked for when
        the policy has no max_epsilon, then checks allowed_models."""
        del policy, model

    def check_policy(self, policy: Any, spec: Any) -> None:
        from fedanon.dp.policy import check_dp_policy
        from fedanon.dp.spec import DPSpec

        check_dp_policy(policy, DPSpec.of(spec))

    def policy_default(self, policy: Any) -> bool:
        return policy.max_epsilon is not None

    def policy_incomplete(self, policy: Any) -> str | None:
        if policy.max_epsilon is None:
            return f'"{NAME}" only together with max_epsilon'
        return None

    def local_policy(self, spec: Any) -> Any:
        from fedanon.dp.policy import dp_local_policy
        from fedanon.dp.spec import DPSpec

        return dp_local_policy(DPSpec.of(spec))

    def schema(self, spec: Any, reader: Any) -> Any:
        from fedanon.dp.spec import DPSpec

        dp = DPSpec.of(spec)
        if dp.set_attr is None:
            return super().schema(spec, reader)
        from fedanon.dp.setanonymize import codes_schema

        return codes_schema(dp, reader)  # the item taxonomy shipped and bound too

    def party_table(self, spec: Any, schema: Any, table: Any, source: Any) -> Any:
        from fedanon.dp.spec import DPSpec

        dp = DPSpec.of(spec)
        if dp.set_attr is None:
            return table
        from fedanon.dp.setfed import read_codes

        return read_codes(dp, schema, table, source)

    def new_party(self, spec: Any, schema: Any, table: Any) -> Any:
        from fedanon.dp.spec import DPSpec

        dp = DPSpec.of(spec)
        if dp.set_attr is not None:  # diagnosis codes: table is read_codes's
            from fedanon.dp.setfed import CodesParty

            return CodesParty(dp, schema, table)
        from fedanon.dp.party import DPParty

        return DPParty(schema, table, max_selections=dp.params.specializations)

    def party_params(self, spec: Any) -> Any:
        from fedanon.dp.spec import DPSpec

        return DPSpec.of(spec).params

    def accepted_terms(self, spec: Any, policy: Any) -> tuple[str, str, str]:
        from fedanon.dp.spec import DPSpec

        p = DPSpec.of(spec).params
        cls = spec.class_attr.name if spec.class_attr is not None else ""
        model = f"model={NAME} epsilon={float(p.epsilon):g} h={p.specializations} score={p.score}"
        return model, cls, "binds=[nothing: a DP run releases no sensitive column]"


def bounds_of(args: argparse.Namespace) -> tuple[int, int]:
    table = getattr(args, "max_table_rows", None)
    expanded = getattr(args, "max_expanded_rows", None)
    return (
        MAX_TABLE_ROWS if table is None else table,
        MAX_EXPANDED_ROWS if expanded is None else expanded,
    )


METHOD = DiffGenMethod()
