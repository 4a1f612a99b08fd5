"""The numpy array types used across fedanon, named once.

Codes (generalized values, leaves, bins) use the smallest integer dtype that holds them; such
arrays are typed :data:`Codes`.  Counts and indices that can grow are int64 (:data:`IntArray`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
U64Array = npt.NDArray[np.uint64]
U8Array = npt.NDArray[np.uint8]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
ObjArray = npt.NDArray[np.object_]
Codes = npt.NDArray[Any]  # an integer dtype: the smallest that holds the codes

__all__ = [
    "BoolArray",
    "Codes",
    "FloatArray",
    "Int32Array",
    "IntArray",
    "ObjArray",
    "U8Array",
    "U64Array",
    "grown",
]


def grown(arr: npt.NDArray[Any], n: int, fill: Any = 0) -> npt.NDArray[Any]:
    """``arr`` itself when it has at least ``n`` rows; else a copy with ``max(n, min(2 *
    rows, n + n // 8))`` rows, the new rows set to ``fill``.  Geometric growth (n appends cost
    O(n) in total) whose spare rows stay within an eighth of the ``n`` asked for: a caller
    that bounded ``n`` (the DP row bound, fedanon.dp.bounds) is not handed an array twice
    that size (doubling 5.5 M partitions allocated 11 M rows under a 10 M bound)."""
    cap = arr.shape[0]
    if n <= cap:
        return arr
    out = np.full((max(n, min(cap * 2, n + n // 8)), *arr.shape[1:]), fill, dtype=arr.dtype)
    out[:cap] = arr
    return out
