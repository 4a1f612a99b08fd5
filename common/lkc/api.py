"""The LKC family's runs of the Python API (:mod:`fedanon.api`): the centralized algorithm of
``fedanon anonymize`` on a DataFrame or a file (schema, encoding, round loop, safety recount,
report), and the independent recount of a released table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fedanon.errors import SpecError
from fedanon.io.frames import encode_frame
from fedanon.io.release import output_columns
from fedanon.io.table import build_schema, encode_table
from fedanon.methods import registry
from fedanon.model.spec import RunSpec
from fedanon.privacy.audit import AuditResult, audit_table, released_columns, released_frame
from fedanon.tds.decide import Decider
from fedanon.tds.engine import LocalFederation, run
from fedanon.tds.report import report
from fedanon.union.localparty import LocalParty


def lkc_anonymize(
    data: pd.DataFrame | Path,
    rs: RunSpec,
    reader: Callable[[str], str],
    seed: int | None,
    expand: bool,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The release and its report (``seed`` / ``expand``: refused, nothing to draw)."""
    for name, given in (("seed", seed is not None), ("expand", expand)):
        if given:
            owners = registry.owners("anonymize", f"--{name}")
            models = " or ".join(f'[privacy] model = "{o.name}"' for o in owners)
            raise SpecError(
                f"{name} applies only to {' or '.join(o.spec_phrase for o in owners)}",
                file=rs.source,
                expected=f"{models}, or no {name}",
            )
    schema = build_schema(rs, reader)
    if isinstance(data, pd.DataFrame):
        table = encode_frame(schema, data)
    else:  # the CLI's reader: CSV (gzip or not) or Parquet, told apart as --input does
        table = encode_table(schema, data)
    party = LocalParty(schema, table)
    decider = Decider(rs, schema.new_trees(), len(table.class_labels))
    result = run(decider, LocalFederation([party]))
    decider.verify()  # every L-subset group recounted before anything is returned
    released = party.released_columns()
    columns = output_columns(rs, table.columns)
    frame = pd.DataFrame({c: np.asarray(released[c], dtype=object) for c in columns})
    return frame, report(rs, result)


def lkc_audit(
    table: pd.DataFrame | Path, rs: RunSpec, *, sep: str = ",", limit: int = 10
) -> AuditResult:
    """Recount LKC-privacy (or the LKC-privacy a plug-in model amounts to) of a table."""
    header, frame = released_frame(table, released_columns(rs), sep)
    name = None if isinstance(table, pd.DataFrame) else str(table)
    return audit_table(frame, rs, limit=limit, header=header, source=name, sep=sep)
