"""Decoding peeled byte rows back to group ids and dictionary-coded columns.

Rows come from the peeled sketch, so they are validated strictly: canonical varints, no
truncation, zero padding, valid UTF-8, no text for a value that has a short form, short
forms in range; any violation is :class:`MalformedRecord`.

Decoding is vectorised per column (:func:`read_rows`): every field's tag is read for all
records at once; short forms stay integers (a declared value's index or a number), text
fields are factorized by length (:mod:`fedanon.union.textcol`, values in Arrow).
:func:`field_values` then turns one field of one or more tables into :class:`Coded`
(distinct values + codes): only the distinct values become Python strings, so a million
records cost a few thousand strings, not millions, and the values come in the order of
their text encodings (the canonical order's, :mod:`fedanon.union.canon`), so the codes
compare as the values do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedanon.arrays import IntArray, U8Array
from fedanon.union.packed import CANONICAL, varints
from fedanon.union.records import (
    MAX_GROUP,
    MAX_SHORT_INT,
    known_values,
    short_int,
    text_encoding,
)
from fedanon.union.textcol import (
    ARROW_FROM,
    MalformedRecord,
    TextColumn,
    empty_text,
    import_pandas,
    text_column,
)

__all__ = [
    "ARROW_FROM",
    "Coded",
    "MalformedRecord",
    "RawField",
    "decode_rows",
    "field_values",
    "import_pandas",
    "read_rows",
]

_POW10 = np.asarray([10**k for k in range(1, 19)], dtype=np.int64)


@dataclass(frozen=True)
class Coded:
    """A dictionary-coded column of strings: record ``i`` has ``values[codes[i]]``."""

    values: tuple[str, ...]
    codes: IntArray

    def strings(self) -> list[str]:
        out: list[str] = np.asarray(self.values, dtype=object)[self.codes].tolist()
        return out


def _read_varints(flat: U8Array, at: IntArray, limit: int) -> tuple[IntArray, IntArray]:
    """Read one varint per record at flat byte index ``at`` (``flat``: the rows, row after
    row, then at least 9 zero bytes, so that a read past a row's end stays in the array;
    the caller checks every record ends within its row); returns (value, index after it)."""
    byte = flat[at]
    value = (byte & 0x7F).astype(np.int64)
    after = at + 1
    more = np.flatnonzero(byte >= 0x80)  # values >= 128
    for step in range(1, 9):  # 9 x 7 bits hold any value below 2^63
        if not more.size:
            break
        byte = flat[at[more] + step]
        if not byte.all():
            raise MalformedRecord("a varint is not canonical")
        value[more] |= (byte & 0x7F).astype(np.int64) << (7 * step)
        after[more] += 1
        more = more[byte >= 0x80]
    if more.size or (value.size and int(value.max()) > limit):
        raise MalformedRecord("a varint is too large")
    return value, after


@dataclass(frozen=True, eq=False)
class RawField:
    """One field of one table's records as read: per record its short form's index
    (``-1``: text), and the text values (codes for the text records, in record order)."""

    short: IntArray
    text: TextColumn


def read_rows(rows: U8Array, n_fields: int) -> tuple[IntArray, list[RawField]]:
    """Read byte rows (one record per row, zero padded): (group ids, fields)."""
    n, width = rows.shape
    size = n * width
    flat = np.zeros(size + 16, dtype=np.uint8)  # 16 zero bytes: see _read_varints
    flat[:size] = rows.reshape(-1)
    start = np.arange(0, size, width, dtype=np.int64)  # every row's first byte
    gid, at = _read_varints(flat, start, MAX_GROUP)
    fields: list[RawField] = []
    for _ in range(n_fields):
        if n and int(at.max()) > size:  # a record read past the last row: truncated
            raise MalformedRecord("a record is truncated in a field")
        tag, after = _read_varints(flat, at, MAX_GROUP)
        short = tag >> 1
        text = np.flatnonzero((tag & 1) == 0)
        if not text.size:  # short forms only (declared values, numbers)
            at = after
            fields.append(RawField(short, empty_text()))
            continue
        length = np.zeros(n, dtype=np.int64)
        length[text] = short[text]
        short[text] = -1
        at = after + length
        if int(at.max()) > size:
            raise MalformedRecord("a record is truncated in a field")
        pos = after - start
        if text.size == n:
            coded = text_column(rows, pos, length)
        elif text.size:
            coded = text_column(rows[text], pos[text], length[text])
        fields.append(RawField(short, coded))
    end = at - start
    if n and int(end.max()) > width:
        raise MalformedRecord("a record is truncated in a field")
    used = np.char.str_len(np.ascontiguousarray(rows).view(f"S{width}").ravel())
    if n and (used > end).any():  # str_len: up to the last non-zero byte
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
    texts, text_codes = _merged_text(parts, known)
    size = np.empty(ids.size + len(texts), dtype=np.int64)
    size[:n_known] = [len(text_encoding(known[i])) for i in ids[:n_known].tolist()]
    size[n_known : ids.size] = 2 + np.searchsorted(_POW10, numbers, side="right")
    if not n_known and not len(texts):  # numbers alone are in order (fewer digits first)
        return Coded(tuple(numbers.astype(str).tolist()), dense), size
    import pyarrow as pa

    head = [known[i] for i in ids[:n_known].tolist()] + numbers.astype(str).tolist()
    values = pa.concat_arrays([pa.array(head, pa.string()), texts])
    length = _utf8_length(values)
    size[ids.size :] = varints(length[ids.size :]).length + length[ids.size :]
    order = _text_order(values, length)
    rank = np.empty(len(values), dtype=np.int64)
    rank[order] = np.arange(len(values))
    ordered = tuple(values.take(pa.array(order)).to_pylist())
    if at is None:
        return Coded(ordered, rank[dense]), size[order]
    codes = np.empty(short.size, dtype=np.int64)
    codes[at] = rank[dense]
    codes[text] = rank[ids.size + text_codes]
    return Coded(ordered, codes), size[order]


def _utf8_length(values: Any) -> IntArray:
    import pyarrow.compute as pc

    return np.asarray(pc.binary_length(values).to_numpy(zero_copy_only=False), dtype=np.int64)


def _text_order(values: Any, length: IntArray) -> IntArray:
    """The permutation sorting Arrow strings by their text encodings: by the varint of the
    UTF-8 ``length`` (its bytes, left-aligned in a uint64: varints are prefix-free), then
    by the UTF-8 bytes (Arrow's sort of strings)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    prefix = varints(length)
    key = np.zeros(len(values), dtype=np.uint64)
    for j in range(min(8, prefix.data.shape[1])):
        key |= prefix.data[:, j].astype(np.uint64) << np.uint64(56 - 8 * j)
    table = pa.table({"p": key, "v": values})
    order = pc.sort_indices(table, sort_keys=[("p", "ascending"), ("v", "ascending")])
    return np.asarray(order.to_numpy(zero_copy_only=False), dtype=np.int64)


def _dense_ids(ids: IntArray) -> tuple[IntArray, IntArray]:
    """(distinct ids ascending, each id's index among them)."""
    if not ids.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if int(ids.max()) <= 4 * ids.size + 1024:
        present = np.bincount(ids) > 0
        return np.flatnonzero(present), (np.cumsum(present) - 1)[ids]
    distinct, dense = np.unique(ids, return_inverse=True)
    return distinct.astype(np.int64), dense.reshape(-1).astype(np.int64)


def _merged_text(parts: list[RawField], known: tuple[str, ...]) -> tuple[Any, IntArray]:
    """The text values of every part, merged: (distinct values, an Arrow string array; the
    code of each text record); :class:`MalformedRecord` if a value has a short form (a
    declared value or a canonical number sent as text)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    with_text = [p for p in parts if len(p.text.values)]
    if not with_text:
        return empty_text().values, np.zeros(0, dtype=np.int64)
    if len(with_text) == 1:
        merged, codes = with_text[0].text.values, with_text[0].text.codes
    else:
        enc = pc.dictionary_encode(pa.concat_arrays([p.text.values for p in with_text]))
        remap = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        starts = np.cumsum([0, *(len(p.text.values) for p in with_text[:-1])]).tolist()
        codes = np.concatenate(
            [remap[lo + p.text.codes] for lo, p in zip(starts, with_text, strict=True)]
        )
        merged = enc.dictionary
    bad = pc.match_substring_regex(merged, CANONICAL)
    if known:
        bad = pc.or_(bad, pc.is_in(merged, value_set=pa.array(known, pa.string())))
    if pc.any(bad).as_py():
        raise MalformedRecord("a field was sent as text but has a short form")
    return merged, codes
