"""Re-identification risk under the prosecutor model, from the RELEASED table alone.

An attacker knows that their target is in the release and knows the target's quasi-identifier
values; the target's record is then one of the records of its equivalence group (identical
released values on every QID), so the risk of a correct match is 1 / (size of the group).
Computed here independently of the anonymizer's own figures: grouping the released labels.

* highest risk: 1 / (smallest group);
* average risk over records: sum over records of 1/size = number of groups / records;
* share of records in groups smaller than 2K (groups that a little more coarsening, or a
  few records less, would bring below K).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.errors import DataError

Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Groups:
    """The equivalence groups of a table: ``of_row[i]`` is row i's group, ``sizes[g]`` the
    records of group g (weights summed: a DP count table's rows carry their counts)."""

    of_row: Int64Array
    sizes: Int64Array
    first_row: Int64Array  # a row of each group (its labels are the group's)

    @property
    def records(self) -> int:
        return int(self.sizes.sum())


def combine(codes: Sequence[npt.NDArray[np.integer[Any]]]) -> tuple[Int64Array, Int64Array]:
    """One int64 key per row for the tuple of ``codes`` (each a column of small codes):
    mixed radix while it fits, re-ranked when it would overflow.  Returns (key of each row
    as a dense rank, first row of each key)."""
    if not codes:
        raise DataError("no column to group by")
    n = len(codes[0])
    key = np.zeros(n, dtype=np.int64)
    span = 1
    for c in codes:
        card = int(c.max()) + 1 if n else 1
        if span * card >= 1 << 62:
            _, key = np.unique(key, return_inverse=True)
            key = key.astype(np.int64).reshape(-1)
            span = int(key.max()) + 1
        key = key * card + c.astype(np.int64)
        span *= card
    if span <= 4 * n + 1024:  # dense: rank the keys present, no sort of the rows
        present = np.zeros(span, dtype=bool)
        present[key] = True
        rank = np.cumsum(present, dtype=np.int64) - 1
        inverse = rank[key]
        first = np.empty(int(rank[-1]) + 1, dtype=np.int64)
        first[inverse[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)  # the first row wins
        return inverse, first
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return inverse.astype(np.int64).reshape(-1), first.astype(np.int64)


def groups_of(
    codes: Sequence[npt.NDArray[np.integer[Any]]],
    weights: npt.NDArray[np.integer[Any]] | None = None,
) -> Groups:
    """The equivalence groups of the rows over the given coded columns; groups of weight 0
    (a DP count row rounded to zero) are no group at all."""
    of_row, first = combine(codes)
    w = None if weights is None else np.asarray(weights, dtype=np.int64)
    sizes = np.bincount(of_row, weights=w, minlength=len(first))
    sizes = np.rint(sizes).astype(np.int64)
    keep = sizes > 0
    if not keep.all():
        remap = np.cumsum(keep) - 1
        of_row = np.where(keep[of_row], remap[of_row], -1)
        sizes, first = sizes[keep], first[keep]
    if sizes.size == 0:
        raise DataError("the released table holds no record")
    return Groups(of_row, sizes, first)


@dataclass(frozen=True)
class Risk:
    records: int
    groups: int
    min_group: int
    max_group: int
    median_group: float
    highest: float  # 1 / min_group
    average: float  # groups / records
    k: int | None
    below_2k: float | None  # share of records in groups smaller than 2k (None without k)
    below_k: float | None  # share of records in groups smaller than k
    unique: int  # records alone in their group
    discernibility: int  # sum of size^2 (the discernibility metric DM)
    dr: float  # DM / records^2 (the paper's discernibility ratio)

    def __post_init__(self) -> None:
        if self.records <= 0 or self.groups <= 0 or self.min_group <= 0:
            raise ValueError("a risk needs at least one non-empty group")


def prosecutor_risk(groups: Groups, k: int | None) -> Risk:
    s = groups.sizes
    n = int(s.sum())
    sq = float(np.dot(s.astype(np.float64), s.astype(np.float64)))
    return Risk(
        records=n,
        groups=int(s.size),
        min_group=int(s.min()),
        max_group=int(s.max()),
        median_group=float(np.median(s)),
        highest=1.0 / float(s.min()),
        average=float(s.size) / float(n),
        k=k,
        below_2k=None if k is None else float(s[s < 2 * k].sum()) / n,
        below_k=None if k is None else float(s[s < k].sum()) / n,
        unique=int(s[s == 1].sum()),
        discernibility=int(sq),
        dr=sq / (float(n) * float(n)),
    )


def size_histogram(sizes: Int64Array, bins: int = 24) -> tuple[Int64Array, Int64Array, Int64Array]:
    """Group sizes binned on a logarithmic scale: (bin lower edges, groups per bin, records
    per bin).  Edges are integers; a bin holds sizes in [edge_i, edge_i+1)."""
    top = int(sizes.max())
    edges = np.unique(np.floor(np.geomspace(1, top + 1, num=bins + 1)).astype(np.int64))
    if edges[-1] <= top:
        edges = np.append(edges, top + 1)
    idx = np.searchsorted(edges, sizes, side="right") - 1
    groups = np.bincount(idx, minlength=len(edges) - 1)[: len(edges) - 1]
    records = np.bincount(idx, weights=sizes, minlength=len(edges) - 1)[: len(edges) - 1]
    return edges, groups.astype(np.int64), np.rint(records).astype(np.int64)
