"""``fedanon audit``: re-check the privacy model of a spec on any released table.

Exit codes: 0 the model holds, 3 it is violated, 2 bad input (including a spec whose model
cannot be checked on a table: DP, or a plug-in model that states no LKC-privacy it amounts
to), 1 internal error.  The spec's method recounts (:meth:`fedanon.methods.base.Method.audit`):
LKC-privacy and a plug-in model with an LKC equivalent (k-anonymity: L = |QID|, C = 1), or
(k, k^m)-anonymity; a DiffGen release has only its columns checked.  The table's columns must
be those the spec releases (:mod:`fedanon.privacy.columns`): an identifier or undeclared column
is a violation (exit 3, named), a missing one bad input (exit 2).  Only QID labels of groups,
their sizes and confidences and column names are printed, escaped like log lines; never a
record or a non-QID cell.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fedanon.errors import SpecError
from fedanon.process import EXIT_OK, EXIT_VIOLATED

__all__ = ["EXIT_VIOLATED", "register"]


def register(sub: Any) -> None:
    a = sub.add_parser(
        "audit",
        help="re-check a released table (ours or another tool's) against a spec's privacy model",
        description="Recount the privacy model of --spec on --released, independently of the "
        "engine. Exit 0: it holds; 3: it is violated; 2: bad input.",
    )
    a.add_argument("--spec", type=Path, required=True, help="run spec (TOML)")
    a.add_argument(
        "--released", type=Path, required=True, help="released table (CSV, .gz, Parquet)"
    )
    a.add_argument("--json", type=Path, help="also write the result as JSON here")
    a.add_argument("--sep", default=",", help="field separator of --released (ARX: ';')")
    a.add_argument("--top", type=int, default=10, help="worst groups shown per kind (10)")
    a.set_defaults(handler=_audit)


def _audit(args: argparse.Namespace) -> int:
    from fedanon.apispec import Spec
    from fedanon.io.fsutil import atomic_write, check_outputs

    if args.top < 1:
        raise SpecError("--top must be at least 1", value=str(args.top))
    check_outputs({"--json": args.json}, [args.spec, args.released])
    # the one spec; an unknown model name: the LKC family's reader says "unknown privacy model"
    spec = Spec.from_toml(args.spec)
    result = spec.method.audit(args, spec)
    if args.json is not None:
        atomic_write(args.json, lambda fh: json.dump(result, fh, indent=2))
    return EXIT_OK if result["ok"] else EXIT_VIOLATED
