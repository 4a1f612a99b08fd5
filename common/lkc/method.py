"""LKC-privacy and the plug-in privacy models it runs (``[privacy] model = "lkc"``, the
default, or a registered model's name): the method object of :mod:`fedanon.methods`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fedanon.errors import InputError
from fedanon.methods.base import (
    Capabilities,
    Method,
    Option,
    non_negative_number,
    positive_count,
    print_metrics,
)
from fedanon.model.peek import DEFAULT_MODEL

NAME = DEFAULT_MODEL  # [privacy] without model


class LKCMethod(Method):
    name = NAME
    title = "LKC-privacy"
    spec_phrase = "an LKC spec"
    capabilities = Capabilities(
        federated=True, auditable=True, set_valued=False, batched_rounds=True, evaluable=True
    )
    experiments = ("ce-vs-k", "ce-vs-c", "dr", "distributed-vs-naive", "scalability", "all")
    options = (
        Option(
            "anonymize",
            ("--memory-budget",),
            {
                "help": 'LKC runs: keep the per-row codes out of core above this size ("16GB"; '
                '"auto", the default: half the available memory; "off": never), as '
                "FEDANON_MEMORY_BUDGET"
            },
        ),
        Option(
            "evaluate",
            ("--ccp-alpha",),
            {
                "type": non_negative_number,
                "help": "LKC releases: cost-complexity pruning of the trees (0 = unpruned, "
                "default; 3e-4 ~ C4.5)",
            },
        ),
        Option(
            "experiment",
            ("--spec",),
            {"type": Path, "help": "base spec (default: the bundled examples/adult/run.toml)"},
        ),
        Option(
            "experiment",
            ("--data",),
            {"type": Path, "help": "data (default: the bundled adult.csv.gz)"},
        ),
        Option(
            "experiment",
            ("--rows",),
            {"type": positive_count, "help": "use only the first N rows (smoke)"},
        ),
    )

    def anonymize(self, args: argparse.Namespace, spec: Any) -> int:
        from fedanon.centralized import anonymize_file, summary_text
        from fedanon.io.sources import parse_source

        source = parse_source(args.input, args.query, args.table)
        rep, _ = anonymize_file(spec, source, args.output, args.report, True, args.memory_budget)
        if not args.quiet:
            print(summary_text(rep, args.output, args.report))
        return 0

    def audit(self, args: argparse.Namespace, one: Any) -> dict[str, Any]:
        from fedanon.privacy.audit import audit_table, read_release, released_columns

        spec = one.run_spec
        header, table = read_release(args.released, released_columns(spec), args.sep)
        # SpecError for a model without LKC terms; DataError for a missing column
        res = audit_table(
            table, spec, limit=args.top, header=header, source=str(args.released), sep=args.sep
        )
        model = spec.privacy.model
        if model != NAME:
            shown = spec.privacy.describe()
            print(f"model {model!r} ({shown}) is audited as the LKC-privacy it amounts to:")
        print(res.summary())
        doc = res.as_dict()
        return doc if model == NAME else {**doc, "model": model, "audited_as": NAME}

    def evaluate(self, args: argparse.Namespace, spec: Any) -> int:
        from fedanon.evaluation.extra import require_eval_extra
        from fedanon.io.fsutil import check_outputs

        require_eval_extra("evaluate")
        if args.original is None:
            raise InputError(
                "an LKC release is evaluated against its original",
                file=str(args.spec),
                expected="--original RAW.csv",
            )
        check_outputs({"--json": args.json}, [args.spec, args.original, args.released])
        from fedanon.evaluation import evaluate

        alpha = 0.0 if args.ccp_alpha is None else args.ccp_alpha
        m = evaluate.evaluate_files(spec.run_spec, args.original, args.released, alpha)
        return print_metrics(evaluate.metrics_text(m), m.as_dict(), args.json)

    def experiment_spec(self, args: argparse.Namespace) -> Path:
        from fedanon.evaluation.experiments import DEFAULT_SPEC

        return Path(args.spec or DEFAULT_SPEC)

    def run_experiment(self, args: argparse.Namespace, spec: Any) -> list[Path]:
        from fedanon.evaluation.experiments import run_experiments
        from fedanon.evaluation.extra import PLOT_MODULES, require_eval_extra

        require_eval_extra("experiment", PLOT_MODULES)
        return run_experiments(
            args.name, args.out, spec, quick=args.quick, data_path=args.data, rows=args.rows
        )

    def api_anonymize(
        self, data: Any, run_spec: Any, reader: Any, seed: int | None, expand: bool
    ) -> tuple[Any, dict[str, Any], Any]:
        from fedanon.lkc.api import lkc_anonymize

        frame, rep = lkc_anonymize(data, run_spec, reader, seed, expand)
        return frame, rep, None

    def api_audit(self, table: Any, run_spec: Any, sep: str, limit: int) -> Any:
        from fedanon.lkc.api import lkc_audit

        return lkc_audit(table, run_spec, sep=sep, limit=limit)

    # -- federated: the records of the final groups by a secure union -------------------

    leader_side = "fedanon.leader.records:RecordsLeader"

    def check_policy(self, policy: Any, spec: Any) -> None:
        from fedanon.lkc.policy import check_lkc_policy

        check_lkc_policy(policy, spec)

    def policy_default(self, policy: Any) -> bool:
        return True

    def local_policy(self, spec: Any) -> Any:
        from fedanon.lkc.policy import lkc_local_policy

        return lkc_local_policy(spec)

    def new_party(self, spec: Any, schema: Any, table: Any) -> Any:
        from fedanon.union.localparty import LocalParty

        return LocalParty(schema, table)

    def check_own_data(self, policy: Any, spec: Any, table: Any) -> None:
        from fedanon.lkc.owncheck import check_own_sensitive

        check_own_sensitive(policy, spec, table)  # the policy's sensitive values bind something

    def accepted_terms(self, spec: Any, policy: Any) -> tuple[str, str, str]:
        from fedanon.lkc.accepted import lkc_accepted_terms

        return lkc_accepted_terms(spec, policy)


METHOD = LKCMethod()
