"""A dictionary's encoded values as one byte matrix: the party's side of the record encoding.

A :class:`Packed` holds every distinct value's bytes (:mod:`fedanon.union.records`: a
varint tag, or a tag and UTF-8 text) zero padded in the rows of one uint8 matrix, with their
lengths.  Numbers and declared values -- most values of a released table -- are encoded
for the whole dictionary at once (Arrow finds the canonical decimal integers, numpy writes
the varints); only text values are encoded one by one.  Joining dictionaries of consecutive
fields (:func:`merge`) and reading the values as 8-byte words (:func:`words`) need no Python
object per value either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from fedanon.arrays import IntArray, U8Array, U64Array
from fedanon.errors import DataError

__all__ = [
    "CANONICAL",
    "MAX_SHORT_INT",
    "Packed",
    "encode_column",
    "merge",
    "pack",
    "short_int",
    "varint",
    "varints",
    "words",
]

VECTOR_FROM = 256
"""Distinct values from which a column's numbers are found by Arrow instead of one by one."""
CANONICAL = r"^(0|[1-9][0-9]{0,17})$"  # the decimal integers with a short form (RE2)
MAX_SHORT_INT = 10**18
"""Canonical decimal integers below this take a short form (the tag stays below 2^63)."""


def varint(value: int) -> bytes:
    """Unsigned LEB128: 7 bits per byte, low bits first, high bit set on all but the last."""
    if value < 0:
        raise ValueError(f"varint of negative {value}")
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def short_int(value: str) -> int | None:
    """The integer a canonical decimal string stands for (ASCII digits, no sign, no leading
    zero, below :data:`MAX_SHORT_INT`), else None."""
    if not 0 < len(value) <= 18 or not (value.isascii() and value.isdigit()):
        return None
    return int(value) if value[0] != "0" or len(value) == 1 else None


@dataclass(frozen=True, eq=False)
class Packed:
    """Value ``i`` is ``data[i, : length[i]]`` (zero padded)."""

    length: IntArray
    data: U8Array

    @property
    def size(self) -> int:
        return int(self.length.shape[0])


def pack(items: Sequence[bytes]) -> Packed:
    """Byte strings as one zero-padded matrix."""
    length = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    span = max(1, int(length.max(initial=0)))
    blob = b"".join(v.ljust(span, b"\0") for v in items)
    return Packed(length, np.frombuffer(blob, dtype=np.uint8).reshape(len(items), span).copy())


def varints(values: IntArray) -> Packed:
    """The unsigned LEB128 encodings of non-negative int64 values, all at once."""
    v = values.astype(np.uint64)
    count = np.ones(v.shape[0], dtype=np.int64)
    rest = v >> np.uint64(7)
    while rest.any():
        count += rest > 0
        rest >>= np.uint64(7)
    span = max(1, int(count.max(initial=1)))
    data = np.zeros((v.shape[0], span), dtype=np.uint8)
    for j in range(span):
        byte = (v >> np.uint64(7 * j)) & np.uint64(0x7F)
        byte |= np.where(count > j + 1, np.uint64(0x80), np.uint64(0))
        data[:, j] = np.where(count > j, byte, np.uint64(0)).astype(np.uint8)
    return Packed(count, data)


def _text(value: str, name: str) -> bytes:
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError:
        raise DataError("a released value is not valid Unicode", column=name) from None
    return varint(2 * len(data)) + data


def encode_column(values: Sequence[object], name: str, known: tuple[str, ...]) -> Packed:
    """Every distinct value of one field encoded (``known``: the field's declared values
    without repeats, :func:`~fedanon.union.records.known_values`)."""
    for value in values:
        if not isinstance(value, str):
            raise DataError(f"a released value is a {type(value).__name__}", column=name)
    items = cast(list[str], list(values))
    index = {v: i for i, v in enumerate(known)}
    tag = np.full(len(items), -1, dtype=np.int64)  # -1: text
    if len(items) >= VECTOR_FROM:
        number = _numbers(items)
        if number is not None:
            at = np.flatnonzero(number >= 0)
            tag[at] = 2 * (len(index) + number[at]) + 1
    if index:
        for i, value in enumerate(items):
            j = index.get(value)
            if j is not None:
                tag[i] = 2 * j + 1
    text = np.flatnonzero(tag < 0)
    if len(items) < VECTOR_FROM or text.size:
        for i in text.tolist():
            v = short_int(items[i])
            if v is not None:
                tag[i] = 2 * (len(index) + v) + 1
        text = np.flatnonzero(tag < 0)
    short = np.flatnonzero(tag >= 0)
    if not text.size:
        return varints(tag)
    texts = pack([_text(items[i], name) for i in text.tolist()])
    tags = varints(tag[short])
    span = max(texts.data.shape[1], tags.data.shape[1])
    data = np.zeros((len(items), span), dtype=np.uint8)
    length = np.zeros(len(items), dtype=np.int64)
    data[text, : texts.data.shape[1]] = texts.data
    data[short, : tags.data.shape[1]] = tags.data
    length[text] = texts.length
    length[short] = tags.length
    return Packed(length, data)


def _numbers(items: list[str]) -> IntArray | None:
    """Each value's integer if it is a canonical decimal integer below 10^18, else -1 (None:
    Arrow refused the strings, e.g. a lone surrogate: they are checked one by one)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        arr = pa.array(items, type=pa.string())
    except (pa.ArrowException, UnicodeError):
        return None
    hit = pc.match_substring_regex(arr, CANONICAL)
    out = np.full(len(items), -1, dtype=np.int64)
    at = np.flatnonzero(hit.to_numpy(zero_copy_only=False))
    if at.size:
        picked = arr.take(pa.array(at))
        out[at] = pc.cast(picked, pa.int64()).to_numpy(zero_copy_only=False)
    return out


def merge(a: Packed, b: Packed) -> Packed:
    """Every value of ``a`` followed by every value of ``b`` (value ``i * b.size + j`` is
    ``a[i] + b[j]``)."""
    ia = np.repeat(np.arange(a.size), b.size)
    ib = np.tile(np.arange(b.size), a.size)
    span_a, span_b = a.data.shape[1], b.data.shape[1]
    data = np.zeros((ia.size, span_a + span_b), dtype=np.uint8)
    data[:, :span_a] = a.data[ia]
    start = a.length[ia]
    for s in np.unique(start).tolist():  # a's lengths: a handful
        rows = np.flatnonzero(start == s)
        data[rows, s : s + span_b] = b.data[ib[rows]]
    return Packed(start + b.length[ib], data)


def words(p: Packed) -> U64Array:
    """The values as little-endian uint64 words, shape (size, ceil(span / 8))."""
    span = p.data.shape[1]
    width = 8 * max(1, -(-span // 8))
    padded = np.zeros((p.size, width), dtype=np.uint8)
    padded[:, :span] = p.data
    return padded.view("<u8")
