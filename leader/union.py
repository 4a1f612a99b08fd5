"""The secure union after the last round: which one runs, and the two by ring secure sum.

* ``counts`` (:mod:`fedanon.union.count_union`): every released non-QID column declares its
  values; one secure sum of the record counts per (final group, declared values).  The
  smallest vector when the domain is small.
* ``sketch`` (:mod:`fedanon.union`, :mod:`fedanon.union.sketch_union`): any released values.  Two
  secure sums: the records per length class and the parties' distinct records (the leader
  learns N, the length histogram and the sum of the parties' distinct counts), then an
  IBLT sketch of the records with a layout the leader plans from them and a fresh key it
  sends every party directly; the leader peels the sum.  A peeling failure (about 0.1 %
  per table) is retried with a grown table and a new key.  A union of many distinct
  records is summed in parts (:mod:`fedanon.leader.unionparts`): the leader peels one part
  while the next is summed.
* ``mixnet`` (:mod:`fedanon.leader.mixunion`): only when asked for (``union = "mixnet"``).

``auto`` (the default) is ``counts`` when it applies, else ``sketch``.  Both sum-based
unions check the recovered records against the final groups' sizes from the statistics
rounds and return the rows in a canonical order (group id ascending, then the records'
values), a function of the released multiset only.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from fedanon import union as sk
from fedanon.arrays import IntArray
from fedanon.errors import ConfigError, RunAborted
from fedanon.io.columns import Column
from fedanon.leader.config import UNION_CHOICES
from fedanon.leader.links import Traffic
from fedanon.leader.unionparts import split_union
from fedanon.model.spec import RunSpec
from fedanon.tds.decide import Decider
from fedanon.tds.state import Phase, SharedState, Update
from fedanon.union.count_union import CountDomain, coded_column, count_domain, expand_columns
from fedanon.union.parts import parts_for
from fedanon.union.sketch_union import (
    LENGTHS_SIZE,
    lengths_digest,
    released_fields,
    released_known,
)

log = logging.getLogger(__name__)
STEP = "union"  # the report's name for the union's bytes
MAX_ATTEMPTS = 4  # sketch sums before giving up (each failure about 0.1-0.3 %)
CHOICES = UNION_CHOICES
COUNTS_PER_RECORD = 4  # auto: the counts vector's elements per record at most
# The sketch is sized for D = the sum of the parties' distinct counts (an upper bound on
# the union's distinct records: it always fits).  Parties sharing records make D up to n
# times too large; then, when the union may still hold few distinct records (D / n, a
# lower bound, at most this many per final group) and that small size is at most an
# eighth of D, a small sketch is tried first.  A table of distinct records (D / n large)
# never pays for a doomed small sketch.
DISTINCT_PER_GROUP = 8

__all__ = [
    "CHOICES",
    "MAX_ATTEMPTS",
    "SumUnion",
    "UnionSums",
    "check_option",
    "choose",
    "sum_union",
]


class UnionSums(Protocol):
    """What the union needs from the ring: a secure sum and a broadcast (labelled)."""

    def sum(
        self, phase: Phase, round_: int, size: int, digest: bytes, step: str | None = None
    ) -> IntArray: ...

    def broadcast(self, update: Update, step: str | None = None) -> None: ...


@dataclass
class SumUnion:
    """The released columns by name, and what the union cost."""

    method: str
    data: dict[str, Column] = field(default_factory=dict)  # distinct values + codes
    sums: int = 0
    attempts: int = 0  # sketch sums (1 unless a peeling failed; one per part at least)
    parts: int = 1  # sketch sums a large union is split into (fedanon.union.parts)
    vector_bytes: int = 0  # bytes of the largest union vector
    seconds: dict[str, float] = field(default_factory=dict)

    def report(self, traffic: Traffic, seconds: float) -> dict[str, Any]:
        """The report's ``federation.union``: which union ran, its bytes at the leader (the
        ``union`` step of ``traffic``), its seconds, and for the sums how many and how big."""
        rep: dict[str, Any] = {
            "method": self.method,
            "seconds": round(seconds, 4),
            "bytes": {
                "sent": traffic.sent.get(STEP, 0),
                "received": traffic.received.get(STEP, 0),
            },
        }
        if self.method != "mixnet":
            rep["sums"] = self.sums
            rep["vector_bytes"] = self.vector_bytes
            rep["seconds_split"] = {k: round(v, 4) for k, v in self.seconds.items()}
        if self.method == "sketch":
            rep["attempts"] = self.attempts
            rep["parts"] = self.parts
        return rep


def check_option(option: str, spec: RunSpec, source: str = "<config>") -> None:
    """Refuse, before any party is contacted, a union option the spec cannot satisfy."""
    if option not in CHOICES:
        raise ConfigError(f"union must be one of {', '.join(CHOICES)}", file=source, value=option)
    free = [
        a.name
        for a in spec.attributes
        if a.role in ("class", "sensitive", "other") and a.values is None
    ]
    if option == "counts" and free:
        raise ConfigError(
            f'union = "counts" needs every released non-QID column to declare its values: '
            f'released column {free[0]!r} declares none; use union = "sketch" (or the default)',
            file=source,
        )


def choose(option: str, spec: RunSpec, decider: Decider, source: str = "<config>") -> str:
    """The union that runs: ``option`` (a :data:`CHOICES` value) made concrete.

    ``auto`` takes ``counts`` when it applies and its vector (8 bytes per group and
    combination of declared values) is at most :data:`COUNTS_PER_RECORD` elements per
    record -- below the sketch's own floor of about 30 bytes per record -- else ``sketch``.
    """
    if option not in CHOICES:
        raise ConfigError(f"union must be one of {', '.join(CHOICES)}", file=source, value=option)
    if option in ("sketch", "mixnet"):
        return option
    domain = count_domain(spec, decider.state)
    if domain is not None and option == "counts":
        return "counts"
    if domain is not None:
        n_records = int(_group_sizes(decider)[1].sum())
        return "counts" if domain.size <= COUNTS_PER_RECORD * max(n_records, 1) else "sketch"
    if option == "counts":
        free = [
            a.name
            for a in spec.attributes
            if a.role in ("class", "sensitive", "other") and a.values is None
        ]
        why = (
            f"released column {free[0]!r} declares no values"
            if free
            else "the released records' domain is too large"
        )
        raise ConfigError(
            f'union = "counts" needs every released non-QID column to declare its values: {why}; '
            'use union = "sketch" (or the default)',
            file=source,
        )
    return "sketch"


def sum_union(
    method: str, spec: RunSpec, decider: Decider, fed: UnionSums, parties: int
) -> SumUnion:
    """Run the ``counts`` or ``sketch`` union over ``fed`` (``parties`` of them); raises
    :class:`RunAborted` when the parties' records disagree with the statistics rounds."""
    if method == "counts":
        domain = count_domain(spec, decider.state)
        if domain is None:
            raise RunAborted("union: the counts domain vanished")  # choose() checked it
        return _counts(domain, spec, decider, fed)
    if method == "sketch":
        return _sketch(spec, decider, fed, parties)
    raise ValueError(f"not a sum-based union: {method}")


def _group_sizes(decider: Decider) -> tuple[IntArray, IntArray]:
    """(alive group ids ascending, records per group) from the statistics rounds."""
    _, totals = decider.final_totals()
    return decider.state.alive_ids(), totals.sum(axis=1).astype(np.int64)


def _counts(domain: CountDomain, spec: RunSpec, decider: Decider, fed: UnionSums) -> SumUnion:
    out = SumUnion("counts", sums=1, vector_bytes=8 * domain.size)
    t0 = time.perf_counter()
    counts = fed.sum(Phase.UNION, decider.state.round, domain.size, domain.digest, step=STEP)
    t1 = time.perf_counter()
    _, sizes = _group_sizes(decider)
    per_group = counts.reshape(domain.parts.size, domain.combos).sum(axis=1)
    if (counts < 0).any() or not np.array_equal(per_group, sizes):
        raise RunAborted("union: the record counts disagree with the groups' sizes")
    out.data = expand_columns(domain, spec, decider.state, counts)
    out.seconds = {"sums": t1 - t0, "decode": time.perf_counter() - t1}
    return out


def first_sketch(
    hist: IntArray, distinct: int, n_fields: int, groups: int, parties: int
) -> tuple[sk.Layout, sk.Layout | None]:
    """(the layout that always fits: every table sized for at most ``distinct`` records,
    a small layout to try first or None) -- see :data:`DISTINCT_PER_GROUP`.  Both with
    lanes as wide as the most copies of one record allow (``N - D + parties``)."""
    # a record's copies at party i are at most N_i - d_i + 1: in the union N - D + n
    most = max(1, int(hist.sum()) - distinct + parties)
    full = sk.plan(hist, n_fields, distinct=distinct, multiplicity=most)
    cap = DISTINCT_PER_GROUP * groups
    maybe_few = -(-distinct // max(parties, 1)) <= cap  # D / n <= union's distinct <= D
    small = None
    if maybe_few and cap * 8 <= distinct:
        small = sk.plan(hist, n_fields, distinct=cap, multiplicity=most)
    return full, small


def _sketch(spec: RunSpec, decider: Decider, fed: UnionSums, parties: int) -> SumUnion:
    st = decider.state
    fields = released_fields(spec)
    ids, sizes = _group_sizes(decider)
    n_records = int(sizes.sum())
    out = SumUnion("sketch")
    t0 = time.perf_counter()
    vec = fed.sum(
        Phase.UNION_LENGTHS, st.round, LENGTHS_SIZE, lengths_digest(len(fields)), step=STEP
    )
    out.sums += 1
    hist, distinct = vec[:-1], int(vec[-1])
    if (hist < 0).any() or int(hist.sum()) != n_records:
        raise RunAborted(
            f"union: the parties hold {int(hist.sum())} released records by their length "
            f"histograms, the groups {n_records}"
        )
    if not (min(n_records, 1) <= distinct <= n_records):
        raise RunAborted(f"union: {distinct} distinct records among {n_records}")
    t_sums = t_lengths = time.perf_counter() - t0
    t_peel = 0.0
    result = None
    full, small = (
        first_sketch(hist, distinct, len(fields), int(ids.size), parties)
        if n_records
        else (None, None)
    )
    split = parts_for(distinct) if full is not None and small is None else 1
    if full is not None and split > 1:  # peel each part while the next is summed
        got = split_union(
            fed, st.round + 1, full, distinct, split, released_known(spec), STEP, MAX_ATTEMPTS
        )
        result, out.sums, out.attempts = got.records, out.sums + got.sums, got.sums
        out.vector_bytes, out.parts = got.vector_bytes, split
        t_sums, t_peel = t_sums + got.seconds["sums"], got.seconds["peel"] + got.seconds["merge"]
    elif full is not None:
        cap = DISTINCT_PER_GROUP * int(ids.size)
        layout = small or full
        for attempt in range(MAX_ATTEMPTS + (small is not None)):
            round_ = st.round + 1 + attempt  # a new (round, phase) per attempt: never a repeat
            key = sk.new_key()
            params = sk.SketchParams(layout, key)
            fed.broadcast(Update(round=round_, union=params), step=STEP)
            t1 = time.perf_counter()
            vec = fed.sum(Phase.UNION_SKETCH, round_, layout.size, params.digest, step=STEP)
            t2 = time.perf_counter()
            t_sums += t2 - t1
            out.sums += 1
            out.attempts += 1
            out.vector_bytes = max(out.vector_bytes, layout.nbytes)
            try:
                result = sk.peel(layout, key, vec, in_place=True, known=released_known(spec))
            except sk.PeelingFailed:
                if layout is small:  # more distinct records than the small table holds
                    log.info("union: more than %d distinct records; full-size sketch", cap)
                    layout = full
                else:
                    log.warning("union: the sketch did not peel (attempt %d); retrying", attempt)
                    layout = layout.grown()
                continue
            finally:
                del vec
                t_peel += time.perf_counter() - t2
            break
        if result is None:
            raise RunAborted(f"union: the sketch did not peel in {MAX_ATTEMPTS} attempts")
    t3 = time.perf_counter()
    out.data = _released(spec, st, ids, sizes, result)
    out.seconds = {
        "lengths": t_lengths,  # the lengths sum (the parties encode their records)
        "sums": t_sums,  # every sum, the lengths sum included (waited for, with parts)
        "peel": t_peel,
        "decode": time.perf_counter() - t3,
    }
    return out


def _released(
    spec: RunSpec, st: SharedState, ids: IntArray, sizes: IntArray, result: sk.PeeledRecords | None
) -> dict[str, Column]:
    """Check the peeled records against the groups and lay them out as released columns
    (distinct values + codes)."""
    fields = released_fields(spec)
    if result is None:
        group = np.zeros(0, dtype=np.int64)
        count = np.zeros(0, dtype=np.int64)
        coded: tuple[sk.Coded, ...] = tuple(
            sk.Coded((), np.zeros(0, dtype=np.int64)) for _ in fields
        )
    else:
        group, count, coded = result.group, result.count, result.columns
    pos = _group_index(ids, group)
    once = bool((count == 1).all())  # distinct records (the usual case): nothing to repeat
    if once:
        got = np.bincount(pos, minlength=ids.size)
    else:
        got = np.bincount(pos, weights=count, minlength=ids.size).astype(np.int64)
    if not np.array_equal(got, sizes):
        raise RunAborted("union: the recovered records disagree with the groups' sizes")
    data: dict[str, Column] = {}

    def _repeat(codes: IntArray, count: IntArray) -> IntArray:
        return codes if once else np.repeat(codes, count)

    for a, attr in enumerate(spec.qids):
        node = np.take(np.ascontiguousarray(st.pvals[:, a]), group)
        data[attr.name] = coded_column(st.trees[a].labels, _repeat(node, count))
    for name, col in zip(fields, coded, strict=True):
        data[name] = coded_column(col.values, _repeat(col.codes, count))
    return data


def _group_index(ids: IntArray, group: IntArray) -> IntArray:
    """Every record's index among the alive groups ``ids`` (ascending); :class:`RunAborted`
    for a record naming a group that does not exist."""
    if not group.size:
        return np.zeros(0, dtype=np.int64)
    top = int(ids[-1]) if ids.size else -1
    if int(group.min()) < 0 or int(group.max()) > top:
        raise RunAborted("union: a recovered record names a group that does not exist")
    if top <= 4 * group.size + 1024:  # a lookup table: one gather from a small array
        table = np.full(top + 1, -1, dtype=np.int64)
        table[ids] = np.arange(ids.size)
        pos = table[group]
        if (pos < 0).any():
            raise RunAborted("union: a recovered record names a group that does not exist")
        return pos
    pos = np.searchsorted(ids, group)
    if int(pos.max()) >= ids.size or not np.array_equal(ids[pos], group):
        raise RunAborted("union: a recovered record names a group that does not exist")
    return pos
