"""Running DiffGen: the engine's round loop with DiffGen's selector and releaser, then the
releaser's one more sum for the final counts, then noise.

:func:`run_dp` is the whole leader side, centralized and federated alike; it needs only a
:class:`fedanon.tds.engine.Federation` (a plain in-process sum here, the secure sum over party
daemons in a federated run).

Wiring into the daemons (done in :mod:`fedanon.leader.dp_run` and :mod:`fedanon.party.prepare`):

* leader: ``one = fedanon.Spec.from_toml(path)``; ``spec = DPSpec.of(one.view)``,
  ``schema = build_schema(spec.run, one.taxonomy_reader())``;
  bind the run to ``dp_run_hash(spec, schema.files)``; ``decider = new_decider(spec, schema,
  RandomSource(seed))``; ``counts = run_dp(decider, ring_federation)``; then
  ``write_release`` / ``report`` on ``DPRun(spec, decider, counts, seconds)``.
* party: :class:`fedanon.dp.party.DPParty`, the engine's party
  (:class:`fedanon.tds.party.EngineParty`) of a ``DPState`` with DiffGen's count release:
  statistics per phase: SPLIT as in an LKC run (``split_stats`` on ``state.split_layout()``),
  COUNTS ``dp_count_stats(state, tips, cls, state.count_layout())``, UNION ``final_stats(state,
  tips, cls, size, digest)``; updates as in an LKC run (``state.apply`` then ``tips.apply``),
  after the release's own checks (every child created, at most h selections).  A party's
  policy refuses a spec whose epsilon exceeds its ``max_epsilon`` (or any DP spec without one).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from fedanon.dp.bounds import MAX_TABLE_ROWS, TABLE_FLAG, BoundAdvice, check_spec_size
from fedanon.dp.decider import DPDecider, NoisyCounts
from fedanon.dp.party import DPParty
from fedanon.dp.randomness import RandomSource
from fedanon.dp.spec import DPSpec
from fedanon.io.table import EncodedTable, Schema
from fedanon.tds.engine import Federation, LocalFederation, Progress, run


@dataclass(frozen=True)
class DPRun:
    spec: DPSpec
    decider: DPDecider
    counts: NoisyCounts
    seconds: float


def new_decider(
    spec: DPSpec,
    schema: Schema,
    rng: RandomSource,
    max_table_rows: int = MAX_TABLE_ROWS,
    federated: bool = False,
) -> DPDecider:
    """The leader's decider; refuses (exit 2) a spec whose every run would make a count
    table of more than ``max_table_rows`` rows (:mod:`fedanon.dp.bounds`).  ``federated``:
    the refusals name the leader and suggest no flag (federate has none)."""
    trees = schema.new_trees()
    n_class = len(spec.class_values)
    bound = (
        BoundAdvice("the leader", None, spec.source)
        if federated
        else BoundAdvice(source=spec.source)
    )
    h = spec.params.specializations
    check_spec_size(trees, h, n_class, max_table_rows, spec.source, bound.flag)
    return DPDecider(spec, trees, n_class, rng, max_table_rows, bound)


def check_table_size(
    spec: DPSpec, schema: Schema, max_table_rows: int = MAX_TABLE_ROWS, federated: bool = False
) -> None:
    """The spec-only check of :func:`fedanon.dp.bounds.check_spec_size`, before any data is
    read (:func:`new_decider` makes it again)."""
    h, n_class = spec.params.specializations, len(spec.class_values)
    flag = None if federated else TABLE_FLAG
    check_spec_size(schema.new_trees(), h, n_class, max_table_rows, spec.source, flag)


def run_dp(decider: DPDecider, fed: Federation, progress: Progress | None = None) -> NoisyCounts:
    """Algorithm 1: h rounds of the engine's loop, then the releaser's final counts by one
    more sum (Phase.UNION with the DP layout) and the noise."""
    run(decider.engine, fed, progress)
    return decider.releaser.release(decider.state, fed)


def anonymize_tables(
    spec: DPSpec,
    schema: Schema,
    tables: Sequence[EncodedTable],
    rng: RandomSource,
    progress: Progress | None = None,
    max_table_rows: int = MAX_TABLE_ROWS,
) -> DPRun:
    """Centralized (one table) or an in-process federation of several parties' tables."""
    t0 = time.perf_counter()
    decider = new_decider(spec, schema, rng, max_table_rows)
    parties = [DPParty(schema, t, max_table_rows=max_table_rows) for t in tables]
    counts = run_dp(decider, LocalFederation(parties), progress)
    return DPRun(spec, decider, counts, time.perf_counter() - t0)
