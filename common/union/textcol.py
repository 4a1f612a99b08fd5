"""The text fields of peeled records: gathered per length and factorized, values kept in Arrow.

The field bytes of all records with the same length are gathered at once (a sliding-window
view, no per-byte index arrays) and factorized -- by Arrow's hash table over the bytes from
:data:`ARROW_FROM` values of one length, else by a uint64 key and a sort, checked byte for
byte -- and the distinct values are validated as UTF-8 by one Arrow cast.  They stay an
Arrow string array: the leader merges, checks and sorts them there and makes Python strings
only of the final distinct values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fedanon.arrays import IntArray, U8Array, U64Array
from fedanon.pandasgate import allow_pandas

__all__ = ["ARROW_FROM", "MalformedRecord", "TextColumn", "import_pandas", "text_column"]

_MULT = np.asarray(
    [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93],
    dtype=np.uint64,
)  # odd multipliers of the (verified, so not security-relevant) grouping hash

PANDAS_FROM = 1 << 18
"""Values per factorization from which pandas' hash table is used instead of a sort."""

ARROW_FROM = 1 << 14
"""Values of one length from which Arrow's hash table over the field bytes factorizes them
(exact, in first-appearance order) instead of a uint64 key and a sort."""


class MalformedRecord(ValueError):
    """A byte row is not a valid record encoding."""


@dataclass(frozen=True, eq=False)
class TextColumn:
    """Text values of some records: record ``i`` has ``values[codes[i]]`` (an Arrow string
    array of distinct values)."""

    values: Any
    codes: IntArray


def empty_text() -> TextColumn:
    import pyarrow as pa

    return TextColumn(pa.array([], pa.string()), np.zeros(0, dtype=np.int64))


def text_column(rows: U8Array, start: IntArray, length: IntArray) -> TextColumn:
    """The field of ``length`` bytes at ``start`` of every row, factorized."""
    import pyarrow as pa

    n = start.shape[0]
    codes = np.zeros(n, dtype=np.int64)
    if n == 0:
        return empty_text()
    small = length.astype(np.uint16) if int(length.max()) < 1 << 16 else length
    order = np.argsort(small, kind="stable")  # radix sort for uint16
    sizes = np.bincount(length)
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    chunks: list[Any] = []
    count = 0
    for size in np.flatnonzero(sizes):
        which = order[bounds[size] : bounds[size + 1]]
        if size == 0:
            codes[which] = count
            chunks.append(pa.array([""], pa.string()))
            count += 1
            continue
        field = sliding_window_view(rows, int(size), axis=1)[which, start[which]]
        if which.size >= ARROW_FROM:
            local, distinct = _factorize_arrow(field)
        else:
            local, first = _factorize_rows(field)
            distinct = _utf8(_fixed(field[first]))
        codes[which] = local + count
        chunks.append(distinct)
        count += len(distinct)
    return TextColumn(pa.concat_arrays(chunks), codes)


def _fixed(field: U8Array) -> Any:
    """A (k, size) byte matrix as an Arrow ``fixed_size_binary(size)`` array (no copy when
    it is contiguous)."""
    import pyarrow as pa

    k, size = field.shape
    data = pa.py_buffer(np.ascontiguousarray(field))
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(size), k, [None, data])


def _utf8(values: Any) -> Any:
    """Arrow binary values as an Arrow string array; :class:`MalformedRecord` if one is not
    UTF-8."""
    import pyarrow as pa

    try:
        return values.cast(pa.binary()).cast(pa.string())
    except pa.ArrowInvalid:
        raise MalformedRecord("a field is not valid UTF-8") from None


def _factorize_arrow(field: U8Array) -> tuple[IntArray, Any]:
    """Codes of equal rows (first appearance order, as pandas' factorize) and the distinct
    rows as strings: Arrow's hash table over the bytes themselves (exact, no pandas)."""
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(_fixed(field))
    local = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return local, _utf8(enc.dictionary)


def _factorize_rows(field: U8Array) -> tuple[IntArray, IntArray]:
    """Codes of equal rows of a (k, size) byte matrix and the first row of each code."""
    k, size = field.shape
    words = -(-size // 8)
    padded = np.zeros((k, 8 * words), dtype=np.uint8)
    padded[:, :size] = field
    lanes = padded.view("<u8")
    key = lanes[:, 0].copy()
    for j in range(1, words):
        key = key * _MULT[j % 4] + lanes[:, j]
    local = _factorize_u64(key)
    first = np.zeros(int(local.max()) + 1, dtype=np.int64)
    first[local[::-1]] = np.arange(k - 1, -1, -1)
    if words > 1 and not (lanes == lanes[first[local]]).all():  # a hash collision
        _, first, local = np.unique(lanes, axis=0, return_index=True, return_inverse=True)
        local = local.reshape(-1).astype(np.int64)
    return local, first.astype(np.int64)


def import_pandas() -> Any:
    """pandas, also where a local federation refuses it to Arrow: lifts any import finder
    that says ``refuses_pandas`` (:mod:`fedanon.leader.forked`) before importing it."""
    allow_pandas()
    import pandas as pd

    return pd


def _factorize_u64(key: U64Array) -> IntArray:
    """Dense codes of equal keys: pandas' hash table for large inputs (worth its 0.6 s
    import), a sort otherwise."""
    if key.size >= PANDAS_FROM:
        pd = import_pandas()
        return np.asarray(pd.factorize(key)[0], dtype=np.int64)
    return np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
