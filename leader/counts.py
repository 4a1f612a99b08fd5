"""DiffGen's leader side of a federated run (``leader_side`` of :mod:`fedanon.dp.method`).

The parties add their local count statistics by the secure sum; the leader sees the totals --
the same aggregate counts it sees in an LKC run -- runs the exponential mechanism on them and
broadcasts each selection.  After the h selections one more sum delivers the count of every
final group x class value (empty groups included); the leader adds the Laplace noise and
publishes the noisy count table.  There is no record union: no record leaves a hospital, and
a party of a DP run refuses the union RPCs.  The rest of the run (connect, Prepare, the sums,
Finish, the one publisher) is :mod:`fedanon.leader.run`'s.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fedanon.dp.randomness import NOT_PRIVATE, RandomSource
from fedanon.dp.release import release_file, report
from fedanon.dp.run import DPRun, check_table_size, new_decider, run_dp
from fedanon.dp.setfed import CodesLeader
from fedanon.dp.spec import DPSpec
from fedanon.errors import ConfigError
from fedanon.io.fsutil import Pending
from fedanon.io.table import Schema
from fedanon.leader.run import RunContext
from fedanon.model.spec import RunSpec
from fedanon.tds.engine import Federation, Progress

log = logging.getLogger(__name__)


def check_union(union: str, source: str) -> None:
    """A DP run integrates no records: any union but "auto" is refused before anyone is
    contacted."""
    if union != "auto":
        raise ConfigError(
            f"union = {union!r} does not apply to a DP run: it releases noisy counts of the "
            "final groups, no records are integrated (there is no record union)",
            file=source,
            value=union,
            expected='union = "auto" (or no union setting)',
        )


class CountsLeader:
    """The exponential mechanism over the summed counts, then the noisy final counts."""

    def __init__(self, spec: RunSpec, union: str, source: str, seed: int | None) -> None:
        check_union(union, source)
        self.spec = DPSpec.of(spec)
        self.seed = seed
        self.result: DPRun | None = None
        # diagnosis codes (a set-valued qid): fedanon.dp.setfed's rounds and release
        self.codes = CodesLeader(self.spec, seed) if self.spec.set_attr is not None else None

    def check_schema(self, schema: Schema) -> None:
        if self.codes is None:  # codes: every selection is bounded as in the centralized run
            check_table_size(self.spec, schema, federated=True)  # spec alone: before Prepare

    def rounds(self, ctx: RunContext, fed: Federation, progress: Progress | None) -> None:
        if self.codes is not None:
            self.codes.run(ctx.schema, fed)
            ctx.rounds = self.codes.rounds
            return
        rng = RandomSource(self.seed)
        if not rng.private:
            log.warning("%s %d: the release is NOT differentially private", NOT_PRIVATE, self.seed)
        decider = new_decider(self.spec, ctx.schema, rng, federated=True)
        counts = run_dp(decider, fed, progress)
        self.result = DPRun(self.spec, decider, counts, 0.0)
        ctx.rounds = decider.state.round

    def release(self, ctx: RunContext, fed: Federation) -> None:
        """Nothing after the rounds: the final counts came with them."""
        del ctx, fed

    def report(self, ctx: RunContext, federation: dict[str, Any]) -> dict[str, Any]:
        if self.codes is not None:
            rep = self.codes.report()
        else:
            assert self.result is not None
            rep = report(self.result)
            rep["release"]["rows_written"] = int(self.result.counts.counts.size)
        federation["union"] = "none: a DP run releases noisy counts of the final groups, no records"
        federation["leader_sees"] = (
            "exact aggregate counts (as in an LKC run); the noise is added here"
        )
        rep["federation"] = federation
        return rep

    def table(self, output: Path) -> Pending:
        """The noisy table (predictors and class in spec order, then count; CSV, .gz or
        Parquet by the name)."""
        if self.codes is not None:
            return self.codes.table(output)
        assert self.result is not None
        return release_file(output, self.result)[0]

    @property
    def records(self) -> int:
        if self.codes is not None:
            return self.codes.records
        assert self.result is not None
        return int(self.result.counts.counts.sum())

    @staticmethod
    def summary(rep: dict[str, Any], output: Path, report_path: Path | None) -> str:
        """The CLI's summary of a federated DP run."""
        from fedanon.dp.anonymize import summary_text

        fed = rep["federation"]
        sec = fed["seconds"]
        text = summary_text(rep, output, report_path)
        return (
            text + f"\n  federated over {len(fed['parties'])} parties, {fed['sums']} secure "
            f"sums; bytes sent {fed['bytes_total']['sent']}, received "
            f"{fed['bytes_total']['received']}; time {sec['total']:.2f}s at the leader "
            f"(network {sec['network']:.2f}s)"
            + (
                f"; daemon start-up {sec['daemon_startup']:.2f}s before that"
                if "daemon_startup" in sec
                else ""
            )
            + "\n  no record union: the release is the noisy count table"
        )
