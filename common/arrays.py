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
    """``arr`` itself when it has at least ``n`` rows; else a copy with ``max(n, 2 * rows)``
    rows (grow by doubling: n appends cost O(n) in total), the new rows set to ``fill``."""
    cap = arr.shape[0]
    if n <= cap:
        return arr
    out = np.full((max(n, cap * 2), *arr.shape[1:]), fill, dtype=arr.dtype)
    out[:cap] = arr
    return out
