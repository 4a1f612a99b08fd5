"""Running the engine in-process for tests (the CLI is exercised separately)."""

from __future__ import annotations

from pathlib import Path

from fedanon.io.release import output_columns, write_table
from fedanon.io.table import build_schema, encode_table
from fedanon.model.spec import load_spec
from fedanon.tds.decide import Decider
from fedanon.tds.engine import LocalFederation, RunResult, run
from fedanon.union.localparty import LocalParty


def anonymize(
    spec_path: Path, data: Path, out: Path, parties: list[Path] | None = None
) -> tuple[RunResult, list[LocalParty]]:
    """Centralized run (one party) or an in-process plain-sum federation of several tables."""
    spec, reader = load_spec(spec_path)
    schema = build_schema(spec, reader)
    tables = [encode_table(schema, p) for p in (parties or [data])]
    locals_ = [LocalParty(schema, t) for t in tables]
    labels = tables[0].class_labels
    dec = Decider(spec, schema.new_trees(), len(labels))
    result = run(dec, LocalFederation(locals_))
    cols = output_columns(spec, tables[0].columns)
    merged: dict[str, list[str]] = {c: [] for c in cols}
    for lp in locals_:
        part = lp.released_columns()
        for c in cols:
            merged[c].extend(part[c])
    write_table(out, cols, merged)
    return result, locals_
