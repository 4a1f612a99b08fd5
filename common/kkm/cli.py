"""Sub-commands of the kkm package (registered by ``fedanon.cli.main``): ``generate-rt``,
``kkm-audit``, ``kkm-evaluate``, ``kkm-experiment``; and :func:`anonymize_kkm`, to which
``fedanon anonymize`` hands a spec with ``[privacy] model = "kkm"``."""

from __future__ import annotations

import argparse
import json
import sys
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

    a = sub.add_parser("kkm-audit", help="recount (k, k^m)-anonymity of a released RT table")
    a.add_argument("--spec", type=Path, required=True, help="the kkm spec of the release")
    a.add_argument("--released", type=Path, required=True, help="released CSV")
    a.add_argument("--json", type=Path, help="write the result as JSON here")
    a.set_defaults(handler=_audit)

    e = sub.add_parser("kkm-evaluate", help="NCP, UL and ARE of a released RT table")
    e.add_argument("--spec", type=Path, required=True)
    e.add_argument("--original", type=Path, required=True, help="the input CSV")
    e.add_argument("--released", type=Path, required=True, help="released CSV (input order)")
    e.add_argument("--report", type=Path, help="anonymize report (rows left out of the release)")
    e.add_argument("--queries", type=int, default=100, help="queries per workload")
    e.add_argument("--json", type=Path)
    e.set_defaults(handler=_evaluate)

    x = sub.add_parser("kkm-experiment", help="ArtUC experiments (seed Sec. 5): CSV + PNG")
    x.add_argument("name", choices=("k", "m", "delta", "constraints", "size", "all"))
    x.add_argument("--out", type=Path, required=True, help="output folder")
    x.add_argument("--quick", action="store_true", help="small grid (a minute or two)")
    x.set_defaults(handler=_experiment)


def anonymize_kkm(args: argparse.Namespace) -> int:
    """``fedanon anonymize`` with a kkm spec (same arguments)."""
    from fedanon.kkm.run import anonymize_kkm_file, summary_text

    rep = anonymize_kkm_file(args.spec, args.input, args.output, args.report)
    if not getattr(args, "quiet", False):
        print(summary_text(rep, args.output, args.report))
    return 0


def _generate(args: argparse.Namespace) -> int:
    from fedanon.io.fsutil import atomic_write
    from fedanon.kkm.generator import (
        ADULT,
        constraint_rows,
        constraints_toml,
        generate,
        to_csv_text,
    )

    data = generate(args.n, args.seed, args.adult or ADULT)
    rows = None
    if args.constraints_out is not None:
        rows = constraint_rows(args.level, args.age_width)
    atomic_write(args.out, lambda fh: fh.write(to_csv_text(data)))
    print(f"wrote {data.n} patients -> {args.out}")
    if rows is not None:
        atomic_write(args.constraints_out, lambda fh: fh.write(constraints_toml(rows)))
        print(f"wrote {len(rows)} utility constraints -> {args.constraints_out}")
    return 0


def _audit(args: argparse.Namespace) -> int:
    from fedanon.kkm.audit import audit_release
    from fedanon.kkm.io import read_rows
    from fedanon.kkm.schema import build_kkm_schema
    from fedanon.kkm.spec import load_kkm_spec

    spec, reader = load_kkm_spec(args.spec)
    schema = build_kkm_schema(spec, reader)
    header, rows, _ = read_rows(args.released)
    data = {h: [r[i] for r in rows] for i, h in enumerate(header)}
    # the column rule (fedanon.privacy.columns): DataError for a missing or repeated column
    res = audit_release(spec, data, schema, header=header, source=str(args.released))
    verdict = "OK" if res.ok else "VIOLATED"
    print(
        f"(k, k^m) with k={res.k}, m={res.m}: {verdict} — {res.records} records, smallest "
        f"support {res.min_support}, {res.violations} records below k, "
        f"{res.constraint_violations} generalized codes across utility constraints"
    )
    for line in res.columns.lines():
        print(line)
    if args.json is not None:
        from fedanon.io.fsutil import atomic_write

        atomic_write(args.json, lambda fh: json.dump(res.as_dict(), fh, indent=2))
    return 0 if res.ok else 1


def _evaluate(args: argparse.Namespace) -> int:
    from fedanon.kkm.evaluate import evaluate_files

    m = evaluate_files(args.spec, args.original, args.released, args.report, args.queries)
    print(json.dumps(m, indent=2))
    if args.json is not None:
        from fedanon.io.fsutil import atomic_write

        atomic_write(args.json, lambda fh: json.dump(m, fh, indent=2))
    return 0


def _experiment(args: argparse.Namespace) -> int:
    from fedanon.kkm.experiments import run_experiments

    for path in run_experiments(args.name, args.out, quick=args.quick):
        print(path)
    sys.stdout.flush()
    return 0
