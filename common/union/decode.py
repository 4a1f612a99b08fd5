"""Decoding peeled byte rows back to group ids and dictionary-coded columns.

Rows come from the peeled sketch, so they are validated strictly: canonical varints, no
truncation, zero padding, valid UTF-8, no text for a value that has a short form, short
forms in range; any violation is :class:`MalformedRecord`.

Decoding is vectorised per column (:func:`read_rows`): every field's tag is read for all
records at once; short forms stay integers (a declared value's index or a number), and the
text fields of all records with the same length are gathered at once (a sliding-window
view, no per-byte index arrays) and factorized.  :func:`field_values` then turns one
field of one or more tables into :class:`Coded` (distinct values + codes): only the
distinct values become Python strings, so a million records cost a few thousand strings,
not millions, and the values come in the order of their text encodings (the canonical
order's, :mod:`fedanon.union.canon`), so the codes compare as the values do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fedanon.arrays import IntArray, U8Array, U64Array
from fedanon.pandasgate import allow_pandas
from fedanon.union.records import (
    MAX_GROUP,
    MAX_SHORT_INT,
    known_values,
    short_int,
    text_encoding,
)

__all__ = ["Coded", "MalformedRecord", "RawField", "decode_rows", "field_values", "read_rows"]

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


_POW10 = np.asarray([10**k for k in range(1, 19)], dtype=np.int64)


@dataclass(frozen=True)
class Coded:
    """A dictionary-coded column of strings: record ``i`` has ``values[codes[i]]``."""

    values: tuple[str, ...]
    codes: IntArray

    def strings(self) -> list[str]:
        out: list[str] = np.asarray(self.values, dtype=object)[self.codes].tolist()
        return out


def _read_varints(rows: U8Array, pos: IntArray, limit: int) -> tuple[IntArray, IntArray]:
    """Read one varint per row at ``pos``; returns (value, position after it)."""
    n, width = rows.shape
    if n == 0:
        return pos.copy(), pos.copy()
    if int(pos.max()) >= width:
        raise MalformedRecord("a record is truncated in a varint")
    flat = np.ascontiguousarray(rows).reshape(-1)
    at = np.arange(0, n * width, width, dtype=np.int64)
    at += pos  # flat index of every row's next byte
    byte = flat[at].astype(np.int64)
    value = byte & 0x7F
    more = np.flatnonzero(byte >= 0x80)  # values >= 128
    for step in range(1, 9):  # 9 x 7 bits hold any value below 2^63
        if not more.size:
            break
        at[more] += 1
        if int((at[more] - more * width).max()) >= width:
            raise MalformedRecord("a record is truncated in a varint")
        byte = flat[at[more]].astype(np.int64)
        if not byte.all():
            raise MalformedRecord("a varint is not canonical")
        value[more] |= (byte & 0x7F) << (7 * step)
        more = more[byte >= 0x80]
    if more.size or int(value.max()) > limit:
        raise MalformedRecord("a varint is too large")
    at -= np.arange(0, n * width, width, dtype=np.int64)
    at += 1
    return value, at


@dataclass(frozen=True, eq=False)
class RawField:
    """One field of one table's records as read: per record its short form's index
    (``-1``: text), and the text values (codes for the text records, in record order)."""

    short: IntArray
    text: Coded


def read_rows(rows: U8Array, n_fields: int) -> tuple[IntArray, list[RawField]]:
    """Read byte rows (one record per row, zero padded): (group ids, fields)."""
    n, width = rows.shape
    gid, pos = _read_varints(rows, np.zeros(n, dtype=np.int64), MAX_GROUP)
    fields: list[RawField] = []
    for _ in range(n_fields):
        tag, after = _read_varints(rows, pos, MAX_GROUP)
        short = tag >> 1
        text = np.flatnonzero((tag & 1) == 0)
        length = np.zeros(n, dtype=np.int64)
        length[text] = short[text]
        short[text] = -1
        pos = after + length
        if n and int(pos.max()) > width:
            raise MalformedRecord("a record is truncated in a field")
        if text.size == n:
            coded = _column(rows, after, length)
        elif text.size:
            coded = _column(rows[text], after[text], length[text])
        else:
            coded = Coded((), np.zeros(0, dtype=np.int64))
        fields.append(RawField(short, coded))
    used = np.char.str_len(np.ascontiguousarray(rows).view(f"S{width}").ravel())
    if n and (used > pos).any():  # str_len: up to the last non-zero byte
        raise MalformedRecord("a record's padding is not zero")
    return gid, fields


def decode_rows(
    rows: U8Array, n_fields: int, known: tuple[tuple[str, ...], ...] | None = None
) -> tuple[IntArray, list[Coded]]:
    """Decode byte rows to (group ids, columns); ``known``: every field's declared values
    (none if not given), as the records were encoded with."""
    gid, fields = read_rows(rows, n_fields)
    cols = [field_values([f], known[i] if known else ())[0] for i, f in enumerate(fields)]
    return gid, cols


def field_values(parts: list[RawField], declared: tuple[str, ...]) -> tuple[Coded, IntArray]:
    """One field of the records of ``parts`` (concatenated) as :class:`Coded`, the values in
    the order of their text encodings, and every value's text-encoding length."""
    known = known_values(declared)
    short = np.concatenate([p.short for p in parts]) if len(parts) > 1 else parts[0].short
    text = short < 0
    at = np.flatnonzero(~text) if text.any() else None
    ids, dense = _dense_ids(short if at is None else short[at])
    n_known = int(np.searchsorted(ids, len(known)))
    numbers = ids[n_known:] - len(known)
    if numbers.size and int(numbers[-1]) >= MAX_SHORT_INT:
        raise MalformedRecord("a short form is out of range")
    clash = [v for v in map(short_int, known) if v is not None]
    if clash and np.isin(numbers, clash).any():
        raise MalformedRecord("a number was sent in the short form of a declared value")
    texts, text_codes = _merged_text(parts)
    if texts:
        declared_set = set(known)
        if any(t in declared_set or short_int(t) is not None for t in texts):
            raise MalformedRecord("a field was sent as text but has a short form")
    values = [known[i] for i in ids[:n_known].tolist()]
    values += numbers.astype(str).tolist()
    values += texts
    size = np.empty(len(values), dtype=np.int64)
    size[n_known : ids.size] = 2 + np.searchsorted(_POW10, numbers, side="right")
    others = [*range(n_known), *range(ids.size, len(values))]
    for i in others:
        size[i] = len(text_encoding(values[i]))
    if others:  # the numbers alone are in order already (fewer digits first)
        enc = np.asarray([text_encoding(v) for v in values], dtype=bytes)
        order = np.argsort(enc, kind="stable")
        rank = np.empty(len(values), dtype=np.int64)
        rank[order] = np.arange(len(values))
        values = [values[i] for i in order.tolist()]
        size = size[order]
    else:
        rank = np.arange(len(values), dtype=np.int64)
    if at is None:  # no text (the usual case): no scatter
        return Coded(tuple(values), rank[dense] if others else dense), size
    codes = np.empty(short.size, dtype=np.int64)
    codes[at] = rank[dense]
    codes[text] = rank[ids.size + text_codes]
    return Coded(tuple(values), codes), size


def _dense_ids(ids: IntArray) -> tuple[IntArray, IntArray]:
    """(distinct ids ascending, each id's index among them)."""
    if not ids.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if int(ids.max()) <= 4 * ids.size + 1024:
        present = np.bincount(ids) > 0
        return np.flatnonzero(present), (np.cumsum(present) - 1)[ids]
    distinct, dense = np.unique(ids, return_inverse=True)
    return distinct.astype(np.int64), dense.reshape(-1).astype(np.int64)


def _merged_text(parts: list[RawField]) -> tuple[list[str], IntArray]:
    """The text values of every part, merged: (distinct values, code of each text record)."""
    if len(parts) == 1:
        return list(parts[0].text.values), parts[0].text.codes
    index: dict[str, int] = {}
    codes = []
    for p in parts:
        remap = np.fromiter(
            (index.setdefault(v, len(index)) for v in p.text.values),
            dtype=np.int64,
            count=len(p.text.values),
        )
        codes.append(remap[p.text.codes])
    return list(index), np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)


def _column(rows: U8Array, start: IntArray, length: IntArray) -> Coded:
    n = start.shape[0]
    codes = np.zeros(n, dtype=np.int64)
    values: list[str] = []
    if n == 0:
        return Coded((), codes)
    small = length.astype(np.uint16) if int(length.max()) < 1 << 16 else length
    order = np.argsort(small, kind="stable")  # radix sort for uint16
    sizes = np.bincount(length)
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    for size in np.flatnonzero(sizes):
        which = order[bounds[size] : bounds[size + 1]]
        if size == 0:
            codes[which] = len(values)
            values.append("")
            continue
        field = sliding_window_view(rows, int(size), axis=1)[which, start[which]]
        if which.size >= ARROW_FROM:
            local, distinct = _factorize_arrow(field)
        else:
            local, first = _factorize_rows(field)
            distinct = _strings(field[first])
        codes[which] = local + len(values)
        values.extend(distinct)
    return Coded(tuple(values), codes)


def _fixed(field: U8Array) -> Any:
    """A (k, size) byte matrix as an Arrow ``fixed_size_binary(size)`` array (no copy when
    it is contiguous)."""
    import pyarrow as pa

    k, size = field.shape
    data = pa.py_buffer(np.ascontiguousarray(field))
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(size), k, [None, data])


def _utf8(values: Any) -> list[str]:
    """Arrow binary values as Python strings; :class:`MalformedRecord` if one is not UTF-8."""
    import pyarrow as pa

    try:
        out: list[str] = values.cast(pa.binary()).cast(pa.string()).to_pylist()
    except pa.ArrowInvalid:
        raise MalformedRecord("a field is not valid UTF-8") from None
    return out


def _strings(field: U8Array) -> list[str]:
    """Rows of a (k, size) byte matrix as strings, one C call (not one per row)."""
    return _utf8(_fixed(field)) if field.shape[0] else []


def _factorize_arrow(field: U8Array) -> tuple[IntArray, list[str]]:
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
