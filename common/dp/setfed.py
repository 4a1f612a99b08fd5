"""DiffGen with diagnosis codes over the federation's daemons (docs/dp-diagnosis-codes.md,
"Federated run").

What runs where:

* at a hospital (``fedanon.party.prepare`` through :mod:`fedanon.dp.method`): the spec's
  schema is :func:`fedanon.dp.setanonymize.codes_schema`; once the hospital's policy accepted
  the run, its relational columns are read as for relational DiffGen and its set column by
  the one set-valued reader (:func:`read_codes`); :class:`CodesParty` answers the sums with
  :class:`fedanon.dp.setparty.SetParty`'s statistics and applies the leader's decisions after
  its own checks (at most h selections, no count table larger than it allows, no record
  union, the final counts only once the leader ended the selections);
* at the leader (``fedanon.leader.counts`` through the same method): :class:`CodesLeader`
  runs :class:`fedanon.dp.setrun.SetLeader` over the secure sum (pairwise or ring) and
  publishes what the centralized run publishes: with the same seed, the same bytes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedanon.arrays import IntArray
from fedanon.dp.bounds import MAX_TABLE_ROWS, TABLE_FLAG
from fedanon.dp.randomness import NOT_PRIVATE, RandomSource
from fedanon.dp.setanonymize import release_file, report, set_tree
from fedanon.dp.setparty import SetParty, SetRecords
from fedanon.dp.setrun import SetLeader, SetRun, new_state
from fedanon.dp.spec import DPSpec
from fedanon.errors import InputError, ProtocolError
from fedanon.io.fsutil import Pending
from fedanon.io.setread import read_set_column
from fedanon.io.table import EncodedTable, Schema
from fedanon.tds.engine import Federation
from fedanon.tds.state import Phase, Update

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CodesTable:
    """A hospital's table of a codes run: the relational columns as encoded for relational
    DiffGen, and the items of the set-valued predictor (CSR)."""

    table: EncodedTable
    indptr: IntArray
    items: IntArray

    @property
    def n_rows(self) -> int:
        return self.table.n_rows


def read_codes(spec: DPSpec, schema: Schema, table: EncodedTable, source: Any) -> CodesTable:
    """The set column of ``source`` (the same data source ``table`` was read from)."""
    sets = read_set_column(source, set_tree(spec, schema).column_spec())
    if sets.n != table.n_rows:
        raise InputError(
            f"the set column has {sets.n} rows, the table {table.n_rows}",
            expected="one set-valued cell per row",
        )
    return CodesTable(table, sets.indptr, sets.items)


class CodesParty:
    """A hospital's party of a codes run (the daemon's :class:`fedanon.party.run.PartyRun`
    drives it as an engine party: ``state``, ``table``, ``stats``, ``apply``,
    ``keep_segment``)."""

    def __init__(
        self, spec: DPSpec, schema: Schema, codes: CodesTable, max_table_rows: int = MAX_TABLE_ROWS
    ) -> None:
        self.table = codes.table
        self.max_selections = spec.params.specializations
        self.max_table_rows = max_table_rows
        self.state = new_state(spec, schema.new_trees(), set_tree(spec, schema))
        t = codes.table
        rec = SetRecords(t.qid_leaves, t.cls, codes.indptr, codes.items)
        self.party = SetParty(self.state, rec)

    def stats(self, phase: Phase, round_: int, size: int, digest: bytes) -> IntArray:
        if (phase == Phase.UNION) != self.state.ended:
            raise ProtocolError(
                "the final counts are given once the leader ended the selections, and only then"
            )
        return self.party.stats(phase, round_, size, digest)

    def apply(self, update: Update) -> None:
        st = self.state
        if update.best is not None:
            if st.round >= self.max_selections:
                raise ProtocolError(
                    f"selection {st.round + 1} of a DP run with h = {self.max_selections}"
                )
            if update.best not in st.candidates():
                raise ProtocolError(f"{update.best} is not a candidate")
            rows = st.groups_after(*update.best) * st.n_class
            if rows > self.max_table_rows:
                raise ProtocolError(
                    f"the selection could make {rows:,} count rows, more than the "
                    f"{self.max_table_rows:,} this party allows ({TABLE_FLAG})"
                )
        self.party.apply(update)

    def keep_segment(self) -> None:
        return None


class CodesLeader:
    """The leader's rounds of a codes run over any federation, then its release."""

    def __init__(self, spec: DPSpec, seed: int | None) -> None:
        self.spec = spec
        self.seed = seed
        self.result: SetRun | None = None

    def run(self, schema: Schema, fed: Federation) -> SetRun:
        t0 = time.perf_counter()
        rng = RandomSource(self.seed)
        if not rng.private:
            log.warning("%s %d: the release is NOT differentially private", NOT_PRIVATE, self.seed)
        state = new_state(self.spec, schema.new_trees(), set_tree(self.spec, schema))
        leader = SetLeader(self.spec, state, rng)
        release = leader.run(fed)
        self.result = SetRun(self.spec, leader, release, time.perf_counter() - t0)
        return self.result

    @property
    def rounds(self) -> int:
        assert self.result is not None
        return self.result.leader.state.round

    def report(self) -> dict[str, Any]:
        assert self.result is not None
        rep = report(self.result)
        rep["release"]["rows_written"] = int(self.result.release.counts.size)
        return rep

    def table(self, output: Path) -> Pending:
        """The noisy table, columns in spec order (as the centralized run of a table whose
        header is in spec order)."""
        assert self.result is not None
        return release_file(output, self.result, None)[0]

    @property
    def records(self) -> int:
        assert self.result is not None
        return int(self.result.release.counts.sum())
