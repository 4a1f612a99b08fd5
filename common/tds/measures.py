"""Scores of a specialization (Sec. 3.2) and the choice of numeric split points.

InfoGain (Eq. 2-3) is computed from class counts of T[v] by child.  The discernibility
score is read as the *reduction* of the discernibility cost sum |T[qid]|^2 that the
specialization achieves over the partitions on Link_v: sum_p |p|^2 - sum_p sum_c |p_c|^2.
(Eq. 4 as printed sums |T[qid_v]|^2 over groups containing v, which would favour the value
whose groups are largest, i.e. the most costly; maximizing the reduction is what "minimize the
discernibility cost" means.)  All inputs are integers; ties are broken by the caller.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fedanon.arrays import FloatArray, IntArray


def entropy_rows(counts: npt.NDArray[np.int64]) -> FloatArray:
    """Entropy (bits) of each row of a (rows, classes) count matrix; 0 for empty rows."""
    c = counts.astype(np.float64)
    n = c.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n > 0, c / n, 0.0)
        logs = np.where(p > 0, np.log2(np.where(p > 0, p, 1.0)), 0.0)
    return np.asarray(-(p * logs).sum(axis=-1), dtype=np.float64)


def info_gain(child_class: IntArray) -> float:
    """InfoGain(v) from a (children, classes) count matrix of T[v]."""
    total = child_class.sum(axis=0)
    n = int(total.sum())
    if n == 0:
        return 0.0
    sizes = child_class.sum(axis=1).astype(np.float64)
    e_parent = float(entropy_rows(total[None, :])[0])
    e_children = entropy_rows(child_class)
    gain = e_parent - float((sizes / n * e_children).sum())
    return gain if gain > 0 else 0.0


def best_split_infogain(bin_class: IntArray) -> int | None:
    """Split position s (first bin of the right child) maximizing InfoGain over a
    (bins, classes) histogram; only points between the first and last occupied bin are
    admissible; ties go to the smallest s.  None when no point separates the records."""
    occupied = np.flatnonzero(bin_class.sum(axis=1) > 0)
    if occupied.size < 2:
        return None
    lo, hi = int(occupied[0]), int(occupied[-1])
    cum = np.cumsum(bin_class, axis=0)
    total = cum[-1]
    left = cum[lo:hi]  # left part for s = lo+1 .. hi
    right = total[None, :] - left
    n = float(total.sum())
    nl = left.sum(axis=1).astype(np.float64)
    nr = right.sum(axis=1).astype(np.float64)
    cond = (nl * entropy_rows(left) + nr * entropy_rows(right)) / n
    gain = float(entropy_rows(total[None, :])[0]) - cond
    return lo + 1 + int(np.argmax(gain))


def best_split_discernibility(part_bin: IntArray) -> int | None:
    """Split position minimizing sum_p |left_p|^2 + |right_p|^2 over a (partitions, bins)
    histogram; same admissibility and tie rule as :func:`best_split_infogain`."""
    occupied = np.flatnonzero(part_bin.sum(axis=0) > 0)
    if occupied.size < 2:
        return None
    lo, hi = int(occupied[0]), int(occupied[-1])
    cum = np.cumsum(part_bin, axis=1)
    total = cum[:, -1:]
    left = cum[:, lo:hi]
    right = total - left
    cost = (left * left + right * right).sum(axis=0)
    return lo + 1 + int(np.argmin(cost))


def max_of_children(child_class: IntArray) -> int:
    """Max(v) of DiffGen: the sum over the children of their largest class count (the records
    a majority-class guess per child gets right), from a (children, classes) count matrix."""
    return int(child_class.max(axis=1).sum()) if child_class.size else 0


def max_of_splits(bin_class: IntArray) -> IntArray:
    """Max of every split point of a (bins, classes) histogram: entry s - 1 is the split whose
    right child starts at bin s (s = 1 .. bins - 1)."""
    cum = np.cumsum(bin_class, axis=0)
    left = cum[:-1]
    right = cum[-1][None, :] - left
    return np.asarray(left.max(axis=1) + right.max(axis=1), dtype=np.int64)


def best_split_max(bin_class: IntArray) -> int | None:
    """Split position maximizing :func:`max_of_splits`; same admissibility and tie rule as
    :func:`best_split_infogain`."""
    occupied = np.flatnonzero(bin_class.sum(axis=1) > 0)
    if occupied.size < 2:
        return None
    lo, hi = int(occupied[0]), int(occupied[-1])
    scores = max_of_splits(bin_class)[lo:hi]  # splits before bin lo+1 .. hi
    return lo + 1 + int(np.argmax(scores))
