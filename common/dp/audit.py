"""``fedanon audit`` on a DiffGen release: only its columns can be checked (predictors, class,
``count``).  A column it must not carry is a violation (the result, exit 3); otherwise
SpecError (exit 2): epsilon-DP is a property of the mechanism, not of a table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedanon.dp.model import MODEL, NOT_AUDITABLE
from fedanon.dp.release import COUNT
from fedanon.dp.spec import DPSpec
from fedanon.errors import DataError, SpecError
from fedanon.model.spec import RunSpec


def not_auditable(spec: Path, extra: str = "") -> SpecError:
    return SpecError(
        NOT_AUDITABLE + extra,
        file=str(spec),
        value=MODEL,
        expected='an LKC spec or [privacy] model = "kkm"',
    )


def audit_columns(spec_path: Path, released: Path, sep: str, view: RunSpec) -> dict[str, Any]:
    """``view``: the spec at ``spec_path``, parsed (:attr:`fedanon.Spec.view`)."""
    from fedanon.privacy.audit import read_release
    from fedanon.privacy.columns import check_columns

    spec = DPSpec.of(view)
    run = spec.run
    src = str(released)
    header, _ = read_release(released, [], sep, comments=True)  # no cell is kept
    try:
        cols = check_columns(
            header,
            [*(a.name for a in spec.predictors), spec.class_name],
            [a.name for a in run.attributes if a.role == "identifier"],
            optional=[COUNT],
            withheld=[a.name for a in run.attributes if a.role in ("sensitive", "other")],
            source=src,
            sep=sep,
        )
    except DataError as exc:
        raise not_auditable(spec_path, f"; nor is this table a release of the spec: {exc}") from exc
    if cols.ok:
        raise not_auditable(spec_path, "; its columns are the ones DiffGen releases")
    print("differential privacy cannot be audited on a table, but this one VIOLATES the spec:")
    for line in cols.lines():
        print(line)
    return {
        "model": MODEL,
        "ok": False,
        "audited": "columns only",
        "identifier_columns": list(cols.identifiers),
        "undeclared_columns": list(cols.undeclared),
        "withheld_columns": list(cols.withheld),
    }
