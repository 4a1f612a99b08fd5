"""The LKC family's leader side of a federated run (``leader_side`` of :mod:`fedanon.lkc.method`).

The top-down specialization rounds over the secure sum (the argmax selector, the records
releaser: :class:`fedanon.tds.decide.Decider`), the safety recount of every final group, then
the released records by a secure union (:mod:`fedanon.leader.union`: counts or sketch by
secure sum, or the mix-net of :mod:`fedanon.leader.mixunion`).  The rest of the run (connect,
Prepare, the sums, Finish, the one publisher) is :mod:`fedanon.leader.run`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fedanon.errors import RunAborted
from fedanon.io.fsutil import Pending
from fedanon.io.release import output_columns, table_file
from fedanon.io.table import Schema
from fedanon.io.tablewrite import ColumnData
from fedanon.leader.mixunion import pad_size, secure_union
from fedanon.leader.mpccheck import FederatedCoalitionCheck
from fedanon.leader.ring import RingFederation
from fedanon.leader.run import RunContext
from fedanon.leader.union import SumUnion, sum_union
from fedanon.leader.union import check_option as check_union_option
from fedanon.leader.union import choose as choose_union
from fedanon.model.checks import check_class_values
from fedanon.model.spec import RunSpec
from fedanon.tds.decide import Decider
from fedanon.tds.engine import Federation, Progress, RunResult, run
from fedanon.tds.report import report


class RecordsLeader:
    """The rounds by argmax, then the final groups' records by a secure union."""

    def __init__(self, spec: RunSpec, union: str, source: str, seed: int | None) -> None:
        del seed  # refused before (the option belongs to other methods)
        check_class_values(spec)
        check_union_option(union, spec, source)
        self.spec = spec
        self.union = union
        self.source = source
        self.decider: Decider | None = None
        self.result: RunResult | None = None
        self.done: SumUnion | None = None
        self.data: Mapping[str, ColumnData] = {}
        self.pad = 0
        self.coalition: FederatedCoalitionCheck | None = None

    def check_schema(self, schema: Schema) -> None:
        del schema

    def rounds(self, ctx: RunContext, fed: Federation, progress: Progress | None) -> None:
        spec = self.spec
        n_class = len(spec.class_attr.values or ()) if spec.class_attr is not None else 1
        if spec.m > 0:  # m-privacy: the hospitals' MPC checks each candidate taken
            assert isinstance(fed, RingFederation)
            self.coalition = FederatedCoalitionCheck(
                spec, ctx.run_id, ctx.links, fed, ctx.traffic, ctx.pool, ctx.deadline
            )
        self.decider = Decider(
            spec, ctx.schema.new_trees(), max(n_class, 1), coalition=self.coalition
        )
        self.result = run(self.decider, fed, progress)
        self.decider.verify()  # every L-subset group recounted before anything is released
        ctx.rounds = self.result.rounds

    def release(self, ctx: RunContext, fed: Any) -> None:
        """The secure union of the final groups' records."""
        spec, decider = self.spec, self.decider
        assert decider is not None
        method = choose_union(self.union, spec, decider, self.source)
        if method == "mixnet":
            fed.flush()  # the final decision reaches every party before the mix-net starts
            self.pad = pad_size(spec, decider.state.trees, ctx.cfg.max_field_bytes)
            records = secure_union(
                ctx.run_id,
                ctx.links,
                ctx.cfg.name,
                ctx.tls_key,
                ctx.tls.cert,
                ctx.tls.ca,
                self.pad,
                ctx.traffic,
                ctx.pool,
                ctx.deadline,
                ctx.keys,
            )
            self.data = _columns(output_columns(spec), records)
            if len(records) != int(decider.final_totals()[1].sum()):
                raise RunAborted("union: the number of records disagrees with the groups' sizes")
            self.done = SumUnion("mixnet")
        else:
            self.done = sum_union(method, spec, decider, fed, len(ctx.links))
            self.data = self.done.data

    def report(self, ctx: RunContext, federation: dict[str, Any]) -> dict[str, Any]:
        assert self.result is not None and self.done is not None
        federation["count_sums"] = self.result.count_sums  # < rounds when a sum decided several
        federation["pad_size"] = self.pad
        federation["union"] = self.done.report(ctx.traffic, federation["seconds"]["union"])
        rep = report(self.spec, self.result, {"federation": federation})
        if self.coalition is not None:
            rep["m_privacy"] = self.coalition.summary()
        return rep

    def table(self, output: Path) -> Pending:
        return table_file(output, output_columns(self.spec), self.data)

    @property
    def records(self) -> int:
        cols = output_columns(self.spec)
        return len(self.data[cols[0]])

    @staticmethod
    def summary(rep: dict[str, Any], output: Path, report_path: Path | None) -> str:
        del report_path
        fed = rep["federation"]
        sec = fed["seconds"]
        return (
            f"released {rep['records']} records in {rep['groups']} groups -> {output}\n"
            f"  {len(rep['specializations'])} specializations over {fed['rounds']} rounds, "
            f"{len(fed['parties'])} parties\n"
            f"  bytes sent {fed['bytes_total']['sent']}, received "
            f"{fed['bytes_total']['received']}\n"
            f"  time {sec['total']:.2f}s at the leader: network {sec['network']:.2f}s, "
            f"crypto (leader) {sec['crypto_leader']:.2f}s, "
            f"compute (leader) {sec['compute_leader']:.2f}s"
            + (
                f"; daemon start-up {sec['daemon_startup']:.2f}s before that"
                if "daemon_startup" in sec
                else ""
            )
            + "\n"
            + _union_line(fed.get("union"))
        )


def _union_line(union: Any) -> str:
    """Which union ran, its bytes at the leader and its seconds."""
    if not isinstance(union, dict):
        return f"  union {union}"
    b = union["bytes"]
    return (
        f"  union {union['method']}: {union['seconds']:.2f}s, "
        f"bytes sent {b['sent']}, received {b['received']}"
    )


def _columns(cols: list[str], records: Sequence[Sequence[str]]) -> dict[str, list[str]]:
    if any(len(r) != len(cols) for r in records):
        raise RunAborted("union: a record has the wrong number of fields")
    return {c: [r[i] for r in records] for i, c in enumerate(cols)}
