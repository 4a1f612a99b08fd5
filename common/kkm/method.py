"""(k, k^m)-anonymity by ArtUC (``[privacy] model = "kkm"``): the method object of
:mod:`fedanon.methods`.  It has no federated variant (:data:`EXPLANATION` says why)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fedanon.kkm.spec import MODEL
from fedanon.methods.base import Capabilities, Method, Option, print_metrics

EXPERIMENT_PREFIX = "kkm-"
GRIDS = ("k", "m", "delta", "constraints", "size", "all")
QUERIES = 100

EXPLANATION = (
    '[privacy] model = "kkm" ((k, k^m)-anonymity, ArtUC) cannot run federated: ArtUC builds '
    "clusters of individual records (each record joins the cluster whose generalized "
    "demographics it widens least, clusters are merged by the information loss of their "
    "codes), so every step needs the records themselves, not sums of counts.  The federation "
    "protocol only adds up local statistics (a secure sum over the hospitals), which keeps each "
    "hospital's records at home; ArtUC does not decompose into such sums.  Run "
    "`fedanon anonymize` on one hospital's data instead"
)


class KkmMethod(Method):
    name = MODEL
    title = "(k, k^m)-anonymity"
    spec_phrase = 'a (k, k^m) spec ([privacy] model = "kkm")'
    capabilities = Capabilities(
        federated=False, auditable=True, set_valued=True, evaluable=True, python_api=False
    )
    experiments = tuple(EXPERIMENT_PREFIX + g for g in GRIDS)
    not_federated = EXPLANATION
    deprecated = ("kkm-audit", "kkm-evaluate", "kkm-experiment")
    options = (
        Option(
            "evaluate",
            ("--run-report",),
            {"type": Path, "help": "kkm: the anonymize report (rows left out of the release)"},
        ),
        Option(
            "evaluate",
            ("--queries",),
            {"type": int, "help": f"kkm: ARE queries per workload (default {QUERIES})"},
        ),
    )

    def parse_view(self, text: str, source: str) -> Any:
        from fedanon.kkm.spec import parse_kkm_spec

        return parse_kkm_spec(text, source)

    def spec_view(self, spec: Any) -> Any:
        from fedanon.errors import SpecError
        from fedanon.kkm.section import Kkm

        if not isinstance(spec.privacy, Kkm):
            raise SpecError(
                "a (k, k^m) spec takes its parameters as fedanon.kkm.section.Kkm",
                file=spec.source,
                value=type(spec.privacy).__name__,
            )
        if spec.score is not None:
            raise SpecError(
                "(k, k^m)-anonymity has no [utility] score (NCP and UL are fixed)",
                file=spec.source,
                value=str(spec.score),
                expected="score = None",
            )
        return spec.privacy.view(spec.attributes, spec.source)

    def spec_parts(self, view: Any) -> tuple[Any, list[dict[str, Any]], str | None]:
        from fedanon.kkm.section import attribute_fields, section_of

        return section_of(view), [attribute_fields(a) for a in view.attributes], None

    def default_score(self, model: str) -> str | None:
        del model
        return None

    def new_spelling(self, command: str, rest: list[str]) -> list[str]:
        if command == "kkm-audit":
            return ["audit", *rest]
        if command == "kkm-evaluate":  # its --report was the anonymize report
            return ["evaluate", *(_run_report(w) for w in rest)]
        if command == "kkm-experiment":
            words, prev = list(rest), ""
            for i, w in enumerate(words):
                if not w.startswith("-") and prev != "--out":
                    words[i] = EXPERIMENT_PREFIX + w
                    return ["experiment", *words]
                prev = w
            return ["experiment", *words]
        return super().new_spelling(command, rest)

    def anonymize(self, args: argparse.Namespace, spec: Any) -> int:
        from fedanon.kkm.run import anonymize_kkm_file, summary_text

        rep = anonymize_kkm_file(spec, Path(args.input), args.output, args.report)
        if not getattr(args, "quiet", False):
            print(summary_text(rep, args.output, args.report))
        return 0

    def audit(self, args: argparse.Namespace, one: Any) -> dict[str, Any]:
        from fedanon.kkm.audit import audit_release, check_kkm_columns
        from fedanon.kkm.schema import build_kkm_schema
        from fedanon.privacy.audit import read_release

        spec, reader = one.view, one.file_bytes_reader()
        schema = build_kkm_schema(spec, reader)
        names = [a.name for a in (*spec.qids, spec.set_attr)]
        header, frame = read_release(args.released, names, args.sep)
        src = str(args.released)
        check_kkm_columns(spec, header, src, args.sep)  # DataError for a missing column, first
        data = {n: [str(v) for v in frame[n]] for n in names}
        res = audit_release(spec, data, schema, header=header, source=src, sep=args.sep)
        verdict = "holds" if res.ok else "VIOLATED"
        print(
            f"(k, k^m)-anonymity {verdict}: k={res.k} m={res.m} on {res.records} records\n"
            f"  min support {res.min_support} (k = {res.k}), {res.violations} records with a "
            f"combination seen fewer than k times, {res.constraint_violations} generalized "
            "codes across utility constraints"
        )
        for line in res.columns.lines():
            print(line)
        if res.first_violation_row is not None:
            print(f"  first violating record: row {res.first_violation_row} of the release")
        return {"model": MODEL, **res.as_dict()}

    def evaluate(self, args: argparse.Namespace, spec: Any) -> int:
        from fedanon.errors import InputError
        from fedanon.io.fsutil import check_outputs
        from fedanon.kkm.evaluate import evaluate_files

        if args.original is None:
            raise InputError(
                "a (k, k^m) release is evaluated against its original",
                file=str(args.spec),
                expected="--original RAW.csv",
            )
        reads = [args.spec, args.original, args.released]
        check_outputs(
            {"--json": args.json}, [*reads, *([args.run_report] if args.run_report else [])]
        )
        queries = QUERIES if args.queries is None else args.queries
        m = evaluate_files(spec, args.original, args.released, args.run_report, queries)
        return print_metrics(json.dumps(m, indent=2), m, args.json)

    def experiment_spec(self, args: argparse.Namespace) -> Path:
        from fedanon.kkm.experiments import SPEC

        return SPEC

    def run_experiment(self, args: argparse.Namespace, spec: Any) -> list[Path]:
        from fedanon.evaluation.extra import require_eval_extra
        from fedanon.kkm.experiments import run_experiments

        require_eval_extra("experiment", ("matplotlib.pyplot",))
        name = args.name.removeprefix(EXPERIMENT_PREFIX)
        return run_experiments(name, args.out, spec.view, args.quick)


def _run_report(word: str) -> str:
    return "--run-report" + word[len("--report") :] if word.split("=")[0] == "--report" else word


METHOD = KkmMethod()
