"""The secure-sum union: the released table as counts per distinct released record.

When every released non-QID column (class, sensitive, other) has declared values, a released
record is (final partition, one value per such column), a domain every party can lay out
from the shared state.  Each party counts its records per domain element; the ring secure sum
gives the leader exactly the released table's counts and nothing else: no batch sizes, no
ownership, no duplicates to link.  Otherwise the mix-net union is used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedanon.arrays import IntArray
from fedanon.io.columns import Column, smallest_uint
from fedanon.io.table import EncodedTable
from fedanon.model.spec import RunSpec
from fedanon.tds.state import SharedState
from fedanon.tds.tips import Tips

MAX_DOMAIN = 1 << 22  # elements (32 MiB of uint64 per message) before falling back


@dataclass(frozen=True, eq=False)
class CountDomain:
    columns: tuple[str, ...]  # kept columns, spec order
    values: tuple[tuple[str, ...], ...]
    parts: IntArray  # final partitions, ascending id
    size: int
    digest: bytes

    @property
    def combos(self) -> int:
        return int(np.prod([len(v) for v in self.values], dtype=np.int64))


def count_domain(spec: RunSpec, state: SharedState) -> CountDomain | None:
    """The layout of the union vector, or None when a released column is free text or the
    domain is too large."""
    kept = [a for a in spec.attributes if a.role in ("class", "sensitive", "other")]
    if any(a.values is None for a in kept):
        return None
    values = tuple(tuple(a.values or ()) for a in kept)
    parts = state.alive_ids()
    combos = int(np.prod([len(v) for v in values], dtype=np.int64))
    size = parts.size * combos
    if size > MAX_DOMAIN:
        return None
    h = hashlib.sha256(b"union")
    h.update(parts.tobytes())
    for a, v in zip(kept, values, strict=True):
        h.update(a.name.encode() + b"\0" + "\0".join(v).encode() + b"\1")
    return CountDomain(tuple(a.name for a in kept), values, parts, size, h.digest())


def local_counts(
    domain: CountDomain, state: SharedState, tips: Tips, table: EncodedTable
) -> IntArray:
    rows, which = tips.rows_of(domain.parts)
    idx = which * domain.combos
    stride = domain.combos
    for name, vals in zip(domain.columns, domain.values, strict=True):
        stride //= len(vals)
        idx = idx + table.kept_codes[name][rows] * stride
    return np.bincount(idx, minlength=domain.size).astype(np.int64)


def coded_column(values: Sequence[str], codes: IntArray) -> Column:
    """A released column from its distinct values and a code per row, the codes in the
    smallest type (as the centralized release's)."""
    return Column(values, codes.astype(smallest_uint(max(len(values) - 1, 0)), copy=False))


def expand_columns(
    domain: CountDomain, spec: RunSpec, state: SharedState, counts: IntArray
) -> dict[str, Column]:
    """Released columns by name, every domain element repeated by its count, as distinct
    values + codes (what the release writer takes: no Python string per row)."""
    nz = np.flatnonzero(counts)
    reps = counts[nz]
    part_pos, combo = np.divmod(nz, domain.combos)
    out: dict[str, Column] = {}
    for a, attr in enumerate(spec.qids):
        node = state.pvals[domain.parts[part_pos], a]
        out[attr.name] = coded_column(state.trees[a].labels, np.repeat(node, reps))
    stride = domain.combos
    for name, vals in zip(domain.columns, domain.values, strict=True):
        stride //= len(vals)
        code = (combo // stride) % len(vals)
        out[name] = coded_column(vals, np.repeat(code, reps))
    return out


def expand(
    domain: CountDomain, spec: RunSpec, state: SharedState, counts: IntArray
) -> dict[str, list[str]]:
    """Released columns by name: every domain element repeated by its count."""
    return {k: c.tolist() for k, c in expand_columns(domain, spec, state, counts).items()}
