"""``fedanon audit``: re-check the privacy model of a spec on any released table.

Exit codes: 0 the model holds, 3 it is violated, 2 bad input (including a spec whose model
cannot be checked on a table: DP, or a plug-in model that states no LKC-privacy it amounts
to), 1 internal error.  A plug-in model with an LKC equivalent (k-anonymity: L = |QID|,
C = 1) is recounted as that LKC-privacy.  The table's columns must be those the spec
releases (:mod:`fedanon.privacy.columns`): an identifier or undeclared column is a violation
(exit 3, named), a missing one bad input (exit 2).  Only QID labels of groups, their sizes and
confidences and column names are printed, escaped like log lines; never a record or a
non-QID cell.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fedanon.errors import SpecError
from fedanon.model.peek import privacy_model_of

EXIT_VIOLATED = 3


def register(sub: Any) -> None:
    a = sub.add_parser(
        "audit",
        help="re-check a released table (ours or another tool's) against a spec's privacy model",
        description="Recount the privacy model of --spec on --released, independently of the "
        "engine. Exit 0: it holds; 3: it is violated; 2: bad input.",
    )
    a.add_argument("--spec", type=Path, required=True, help="run spec (TOML)")
    a.add_argument("--released", type=Path, required=True, help="released table (CSV, or .gz)")
    a.add_argument("--json", type=Path, help="also write the result as JSON here")
    a.add_argument("--sep", default=",", help="field separator of --released (ARX: ';')")
    a.add_argument("--top", type=int, default=10, help="worst groups shown per kind (10)")
    a.set_defaults(handler=_audit)


def _audit(args: argparse.Namespace) -> int:
    from fedanon.io.fsutil import check_outputs

    if args.top < 1:
        raise SpecError("--top must be at least 1", value=str(args.top))
    check_outputs({"--json": args.json}, [args.spec, args.released])
    model = privacy_model_of(args.spec)
    if model == "dp":
        result = _audit_dp_columns(args)  # returns only for a violation; else SpecError
    else:
        # lkc or a registered model (an unknown name: load_spec's "unknown privacy model")
        result = _audit_kkm(args) if model == "kkm" else _audit_lkc(args)
    if args.json is not None:
        from fedanon.io.fsutil import atomic_write

        atomic_write(args.json, lambda fh: json.dump(result, fh, indent=2))
    return 0 if result["ok"] else EXIT_VIOLATED


def _audit_lkc(args: argparse.Namespace) -> dict[str, Any]:
    from fedanon.model.spec import load_spec
    from fedanon.privacy.audit import audit_table, read_release, released_columns

    spec, _ = load_spec(args.spec)
    header, table = read_release(args.released, released_columns(spec), args.sep)
    # SpecError for a model without LKC terms; DataError for a missing column
    res = audit_table(
        table, spec, limit=args.top, header=header, source=str(args.released), sep=args.sep
    )
    model = spec.privacy.model
    if model != "lkc":
        shown = spec.privacy.describe()
        print(f"model {model!r} ({shown}) is audited as the LKC-privacy it amounts to:")
    print(res.summary())
    doc = res.as_dict()
    return doc if model == "lkc" else {**doc, "model": model, "audited_as": "lkc"}


def _audit_kkm(args: argparse.Namespace) -> dict[str, Any]:
    """(k, k^m)-anonymity: the kkm package's own recount (``fedanon.kkm.audit``)."""
    from fedanon.kkm.audit import audit_release, check_kkm_columns
    from fedanon.kkm.schema import build_kkm_schema
    from fedanon.kkm.spec import load_kkm_spec
    from fedanon.privacy.audit import read_release

    spec, reader = load_kkm_spec(args.spec)
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
        f"combination seen fewer than k times, {res.constraint_violations} generalized codes "
        "across utility constraints"
    )
    for line in res.columns.lines():
        print(line)
    if res.first_violation_row is not None:
        print(f"  first violating record: row {res.first_violation_row} of the release")
    return {"model": "kkm", **res.as_dict()}


def _audit_dp_columns(args: argparse.Namespace) -> dict[str, Any]:
    """A DiffGen release: only its columns can be checked (predictors, class, ``count``).
    A column it must not carry is a violation (the result, exit 3); otherwise SpecError
    (exit 2): epsilon-DP is a property of the mechanism, not of a table."""
    from fedanon.dp.model import NOT_AUDITABLE
    from fedanon.dp.release import COUNT
    from fedanon.dp.spec import load_dp_spec
    from fedanon.errors import DataError
    from fedanon.privacy.audit import read_release
    from fedanon.privacy.columns import check_columns

    def not_auditable(extra: str = "") -> SpecError:
        return SpecError(
            NOT_AUDITABLE + extra,
            file=str(args.spec),
            value="dp",
            expected='an LKC spec or [privacy] model = "kkm"',
        )

    spec, _ = load_dp_spec(args.spec)
    run = spec.run
    src = str(args.released)
    header, _ = read_release(args.released, [], args.sep, comments=True)  # no cell is kept
    try:
        cols = check_columns(
            header,
            [*(a.name for a in spec.predictors), spec.class_name],
            [a.name for a in run.attributes if a.role == "identifier"],
            optional=[COUNT],
            withheld=[a.name for a in run.attributes if a.role in ("sensitive", "other")],
            source=src,
            sep=args.sep,
        )
    except DataError as exc:
        raise not_auditable(f"; nor is this table a release of the spec: {exc}") from exc
    if cols.ok:
        raise not_auditable("; its columns are the ones DiffGen releases")
    print("differential privacy cannot be audited on a table, but this one VIOLATES the spec:")
    for line in cols.lines():
        print(line)
    return {
        "model": "dp",
        "ok": False,
        "audited": "columns only",
        "identifier_columns": list(cols.identifiers),
        "undeclared_columns": list(cols.undeclared),
        "withheld_columns": list(cols.withheld),
    }
