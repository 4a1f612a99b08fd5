"""Reading set-valued columns from any source (CSV / gzip, Parquet, PostgreSQL) in batches.

:func:`read_set_columns` is what a method calls with plain descriptors
(:class:`fedanon.io.setvalued.SetColumnSpec`); :func:`SetColumns` folds the set columns of
batches a caller already reads (a method that also reads relational columns in the same pass).
Over the memory budget (:mod:`fedanon.io.spill`) the per-row arrays go out of core.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from fedanon.io.batches import Batch, Batches
from fedanon.io.setvalued import SetColumnSpec, SetEncoder, SetValues
from fedanon.io.sources import DataSource, RowsRead, open_batches
from fedanon.io.spill import Spill, budget_from_env, choose, parse_budget

__all__ = ["SetColumnSpec", "SetColumns", "SetValues", "read_set_column", "read_set_columns"]


class SetColumns:
    """The encoders of several set columns, fed batch by batch."""

    def __init__(self, specs: Sequence[SetColumnSpec], memory_budget: str | None = None):
        self.encoders = {s.name: SetEncoder(s) for s in specs}
        self._budget = budget_from_env() if memory_budget is None else parse_budget(memory_budget)
        self.spill: Spill | None = None
        self.rows = 0

    def add(self, b: Batches, batch: Batch) -> None:
        for name, enc in self.encoders.items():
            enc.add(b, batch.start, batch.columns[name])
        self.rows += batch.rows
        if self.spill is None and (spill := choose(self.rows, self._budget)) is not None:
            self.to_disk(spill)

    def to_disk(self, spill: Spill) -> None:
        self.spill = spill
        for enc in self.encoders.values():
            enc.to_disk(spill)

    def finish(self) -> dict[str, SetValues]:
        return {name: enc.finish() for name, enc in self.encoders.items()}


def read_set_columns(
    source: DataSource,
    specs: Sequence[SetColumnSpec],
    declared: Collection[str] | None = None,
    progress: RowsRead | None = None,
    memory_budget: str | None = None,
) -> dict[str, SetValues]:
    """The set columns ``specs`` of ``source``, encoded (only those columns are decoded).
    ``declared``: the spec's column names, checked against the header (None: not checked)."""
    b = open_batches(source, declared, [s.name for s in specs])
    try:
        missing = [s.name for s in specs if s.name not in b.header]
        if missing:
            from fedanon.errors import DataError

            raise DataError(f"declared column {missing[0]!r} is missing", file=b.source, line=1)
        cols = SetColumns(specs, memory_budget)
        for batch in b.batches:
            cols.add(b, batch)
            if progress is not None:
                progress(cols.rows)
        return cols.finish()
    finally:
        b.close()


def read_set_column(source: DataSource, spec: SetColumnSpec, **kw: Any) -> SetValues:
    """One set column of ``source`` (see :func:`read_set_columns`)."""
    return read_set_columns(source, [spec], **kw)[spec.name]
