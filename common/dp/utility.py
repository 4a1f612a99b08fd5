"""The two utility functions of DiffGen, as integers for the exponential mechanism.

The same functions are the registered utility scores ``"max"`` (:mod:`fedanon.scores.maxscore`,
:mod:`fedanon.tds.measures`) and ``"infogain"`` of a deterministic run.

* Max(v) = sum over the children c of v of max over classes of |T[c] with that class|
  (sensitivity 1: one record more or less changes one child's class count by one);
* InfoGain(v) = H(T[v]) - sum_c |T[c]| / |T[v]| H(T[c]) in bits, always in [0, log2 |classes|],
  hence sensitivity log2 |classes| (the seed's value).

The exponential mechanism samples exactly on integers, so InfoGain is used as
floor(InfoGain / log2|classes| * 2**20) with sensitivity 2**20 + 1: the floor of a quantity
that moves by at most 2**20 moves by at most 2**20, and the + 1 absorbs the floating-point
rounding of the entropies.  The selection probabilities equal the seed's
exp(eps' * InfoGain / (2 log2|classes|)) up to a relative change of the exponent of 2**-20.

Numeric split points are scored with the same function, the two children being the bins left
and right of the point.  Inputs are integer count matrices (children or bins x classes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fedanon.arrays import FloatArray, IntArray
from fedanon.dp.model import SCORES
from fedanon.tds.measures import entropy_rows, info_gain, max_of_children, max_of_splits

QUANTUM = 1 << 20


@dataclass(frozen=True)
class Utility:
    score: str
    n_class: int

    def __post_init__(self) -> None:
        if self.score not in SCORES:
            raise ValueError(f"unknown DP score {self.score!r}")
        if self.n_class < 2:
            raise ValueError("DiffGen needs at least two class values")

    @property
    def delta(self) -> float:
        """The seed's sensitivity of the score: 1 (Max) or log2 |classes| (InfoGain)."""
        return 1.0 if self.score == "max" else math.log2(self.n_class)

    @property
    def sensitivity(self) -> int:
        """Sensitivity of the integer utility handed to the exponential mechanism."""
        return 1 if self.score == "max" else QUANTUM + 1

    def _quantize(self, gain: FloatArray) -> IntArray:
        q = np.floor(np.clip(gain, 0.0, None) / self.delta * QUANTUM)
        return np.asarray(np.minimum(q, QUANTUM), dtype=np.int64)

    def of_children(self, child_class: IntArray) -> tuple[int, float]:
        """(integer utility, score as the seed defines it) of specializing v, from the
        (children, classes) counts of T[v]."""
        if self.score == "max":
            m = max_of_children(child_class)
            return m, float(m)
        g = info_gain(child_class)
        return int(self._quantize(np.array([g]))[0]), g

    def of_splits(self, bin_class: IntArray) -> tuple[IntArray, FloatArray]:
        """Integer utilities and scores of every split point of a numeric interval: entry
        s - 1 is the split whose right child starts at bin s (s = 1 .. bins - 1)."""
        if self.score == "max":
            m = max_of_splits(bin_class)
            return m, m.astype(np.float64)
        cum = np.cumsum(bin_class, axis=0)
        total = cum[-1]
        left = cum[:-1]
        right = total[None, :] - left
        n = float(total.sum())
        if n == 0:
            z = np.zeros(left.shape[0])
            return self._quantize(z), z
        nl = left.sum(axis=1).astype(np.float64)
        nr = right.sum(axis=1).astype(np.float64)
        cond = (nl * entropy_rows(left) + nr * entropy_rows(right)) / n
        gain = np.clip(float(entropy_rows(total[None, :])[0]) - cond, 0.0, None)
        return self._quantize(gain), np.asarray(gain, dtype=np.float64)
