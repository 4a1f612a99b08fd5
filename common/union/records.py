"""Released records as bytes: an unambiguous binary encoding, and length classes.

A released record is (final group id, one string per released non-QID column).  Its bytes
are the group id as an unsigned LEB128 varint, then for every field in column order one
varint *tag* -- ``2 i + 1`` for the field's ``i``-th *short form*, else ``2 * (UTF-8
length)`` followed by the UTF-8 bytes -- zero padded to the width of the record's table.
A field's short forms are its declared values without repeats (spec order, :func:`known_values`),
then every canonical decimal integer ``v`` below 10^18 (ASCII digits, no sign, no leading
zero) as ``len(declared) + v``: a raw number or a declared value costs one to four bytes,
not its text and a length.  Every value has exactly one encoding (a value with a short form
is never sent as text), the field count is fixed by the spec, so the encoding is
prefix-free and unambiguous for any strings (commas, quotes, newlines, NUL, non-ASCII,
empty strings, values of any length); decoding rejects non-canonical varints, truncation,
non-zero padding, invalid UTF-8 and text that has a short form (see
:mod:`fedanon.union.decode`).

The canonical order of released records (:mod:`fedanon.union.canon`) does not depend on
this encoding: it is that of their *text encoding* (:func:`text_encoding`: the group id's
varint, then per field the UTF-8 length as a varint and the bytes).

Records are grouped by their encoded length into fixed *length classes* (upper bounds grow
by about 1/8, so padding wastes about 6 % on average).  A party's histogram of records per
class is a fixed-length vector that the ring secure sum adds up; the leader learns only the
total per class, which is a function of the released table, and sizes one sketch table per
non-empty class from it.

Encoding is vectorised: each column is dictionary-coded, only its distinct values are
turned into bytes, consecutive columns of small combined cardinality are merged into one
dictionary, and padded rows are assembled by one ``bytes.join`` of object arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from fedanon.arrays import IntArray, ObjArray, U8Array, U64Array
from fedanon.errors import DataError
from fedanon.union.packed import (
    MAX_SHORT_INT,
    Packed,
    encode_column,
    merge,
    short_int,
    varint,
    varints,
    words,
)

__all__ = [
    "CLASS_BOUNDS",
    "MAX_GROUP",
    "MAX_RECORD_BYTES",
    "MAX_SHORT_INT",
    "CodedColumn",
    "RecordSet",
    "class_of",
    "encode_records",
    "encode_value",
    "known_values",
    "short_int",
    "text_encoding",
    "varint",
]

MAX_RECORD_BYTES = 1 << 26
"""Largest encoded record (64 MiB); larger records are an input error."""
MAX_GROUP = (1 << 63) - 1


def _class_bounds() -> IntArray:
    bounds = list(range(8, 65, 8))
    while bounds[-1] < MAX_RECORD_BYTES:
        bounds.append(min(MAX_RECORD_BYTES, max(bounds[-1] + 8, -(-bounds[-1] * 9 // 64) * 8)))
    return np.asarray(bounds, dtype=np.int64)


CLASS_BOUNDS: IntArray = _class_bounds()
"""Upper bound (bytes, inclusive) of every length class, ascending; fixed by the protocol."""


def known_values(declared: Sequence[str] | None) -> tuple[str, ...]:
    """A field's first short forms: its declared values without repeats, spec order."""
    return tuple(dict.fromkeys(declared or ()))


def encode_value(value: str, known: dict[str, int]) -> bytes:
    """One field's bytes; ``known`` maps the field's declared values to their indexes."""
    i = known.get(value)
    if i is None:
        v = short_int(value)
        if v is None:
            data = value.encode("utf-8")
            return varint(2 * len(data)) + data
        i = len(known) + v
    return varint(2 * i + 1)


def text_encoding(value: str) -> bytes:
    """A field's text encoding (the canonical order's): UTF-8 length as a varint, bytes."""
    data = value.encode("utf-8")
    return varint(len(data)) + data


def class_of(nbytes: IntArray) -> IntArray:
    """Length class of records of ``nbytes`` encoded bytes."""
    return np.searchsorted(CLASS_BOUNDS, nbytes, side="left").astype(np.int64)


class CodedColumn(Protocol):
    """A dictionary-coded column (e.g. :class:`fedanon.io.table.Column`): ``values[codes[i]]``."""

    @property
    def values(self) -> Sequence[str]: ...

    @property
    def codes(self) -> IntArray: ...


@dataclass(frozen=True, eq=False)
class RecordSet:
    """One party's released records, dictionary-coded and ready to be laid out as bytes.

    The encoding of record ``i`` is the concatenation over ``parts`` of the value
    ``codes[i]`` of the part's :class:`~fedanon.union.packed.Packed` dictionary: consecutive
    fields of small combined cardinality share one part, so assembling a row writes only a
    few values.
    """

    n_fields: int
    group: IntArray
    parts: tuple[tuple[IntArray, Packed], ...]
    nbytes: IntArray
    size_class: IntArray

    def __post_init__(self) -> None:
        n = self.group.shape[0]
        arrays = (self.nbytes, self.size_class, *(c for c, _ in self.parts))
        if any(a.shape != (n,) for a in arrays):
            raise ValueError("record set arrays disagree in shape")

    @property
    def n_records(self) -> int:
        return int(self.group.shape[0])

    def histogram(self) -> IntArray:
        """Records per length class: the vector for the first (small) secure sum."""
        return np.bincount(self.size_class, minlength=CLASS_BOUNDS.size).astype(np.int64)

    def distinct(self) -> tuple[IntArray, IntArray]:
        """(one record index per distinct record, its multiplicity): identical records --
        the same code in every part -- are sketched once, with their count.  Computed once
        (the length histogram's distinct count and the sketch both use it)."""
        got: tuple[IntArray, IntArray] | None = self.__dict__.get("_distinct")
        if got is None:
            got = self._distinct()
            object.__setattr__(self, "_distinct", got)
        return got

    def _distinct(self) -> tuple[IntArray, IntArray]:
        n = self.n_records
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        key = np.zeros(n, dtype=np.int64)
        stride = 1
        for codes, values in self.parts:
            card = max(int(values.size), 1)
            if stride * card >= 1 << 62:  # renumber the combinations so far densely (< n)
                _, dense = np.unique(key, return_inverse=True)
                key = dense.reshape(-1).astype(np.int64)
                stride = int(key.max()) + 1
            if stride * card >= 1 << 62:  # still too many combinations: compare rows
                stacked = np.stack([c.astype(np.int64) for c, _ in self.parts], axis=1)
                _, first, inverse = np.unique(
                    stacked, axis=0, return_index=True, return_inverse=True
                )
                break
            key += codes.astype(np.int64) * stride
            stride *= card
        else:  # one representative per distinct key (which one does not matter: equal rows)
            order = np.argsort(key)
            ranked = key[order]
            start = np.flatnonzero(np.concatenate(([True], ranked[1:] != ranked[:-1])))
            counts = np.diff(np.append(start, n))
            return order[start].astype(np.int64), counts.astype(np.int64)
        counts = np.bincount(inverse.reshape(-1), minlength=first.size)
        return first.astype(np.int64), counts.astype(np.int64)

    def rows(self, which: IntArray, width: int) -> U8Array:
        """Records ``which`` encoded and zero padded to ``width`` bytes, shape (len, width).

        Every part's values are 8-byte words (:meth:`_words`); a row is assembled by
        writing each part's words at the row's current offset through an unaligned uint64
        view of the output, part after part: bytes past a value's end are zeros that the
        next part overwrites or that stay as the padding."""
        k = int(which.shape[0])
        if k == 0:
            return np.zeros((0, width), dtype=np.uint8)
        if int(self.nbytes[which].max()) > width:
            raise ValueError("a record is longer than the row width")
        words = self._words()
        stride = width + 8 * max(w.shape[1] for _, w in words)
        out = np.zeros(k * stride + 8, dtype=np.uint8)
        at: U64Array = np.ndarray((out.size - 7,), dtype="<u8", buffer=out, strides=(1,))
        pos = np.arange(0, k * stride, stride, dtype=np.int64)
        for (codes, _), (length, word) in zip(self.parts, words, strict=True):
            code = codes[which]
            at[pos] = word[code, 0]
            size = length[code]
            for q in range(1, word.shape[1]):  # long values only: 8 more bytes each
                more = np.flatnonzero(size > 8 * q)
                if not more.size:
                    break
                at[pos[more] + 8 * q] = word[code[more], q]
            pos += size
        return np.ascontiguousarray(out[: k * stride].reshape(k, stride)[:, :width])

    def _words(self) -> list[tuple[IntArray, U64Array]]:
        """Per part: every value's byte length and its bytes as little-endian uint64 words
        (zero padded), computed once."""
        got: list[tuple[IntArray, U64Array]] | None = self.__dict__.get("_word_cache")
        if got is None:
            got = [(values.length, words(values)) for _, values in self.parts]
            object.__setattr__(self, "_word_cache", got)
        return got


def _dense(values: IntArray) -> tuple[IntArray, IntArray]:
    """(codes, distinct values ascending) of small non-negative integers or any int64."""
    if values.size and int(values.min()) >= 0 and int(values.max()) <= 4 * values.size + 1024:
        present = np.bincount(values) > 0
        remap = np.cumsum(present) - 1
        return remap[values].astype(np.int64), np.flatnonzero(present).astype(np.int64)
    distinct, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64).reshape(-1), distinct.astype(np.int64)


def _factorize(column: Sequence[str] | ObjArray) -> tuple[IntArray, list[object]]:
    """Codes by first appearance (a dict: no pandas import on the party)."""
    index: dict[object, int] = {}
    codes = np.fromiter(
        (index.setdefault(v, len(index)) for v in column), dtype=np.int64, count=len(column)
    )
    return codes, list(index)


def encode_records(
    group: Sequence[int] | IntArray,
    columns: Sequence[CodedColumn | Sequence[str] | ObjArray],
    names: Sequence[str] | None = None,
    known: Sequence[Sequence[str]] | None = None,
) -> RecordSet:
    """Encode released records: ``group[i]`` is record i's final group id (0 <= id < 2^63),
    column ``f`` gives record i's value of released column ``f``, either dictionary-coded
    (``values[codes[i]]``, e.g. :class:`fedanon.io.table.Column`: fast, no hashing of strings)
    or as a sequence of ``str`` (factorized with a dict first).  ``names`` only labels
    errors; ``known[f]``: the declared values of field ``f`` (its first short forms; the
    leader decodes with the same).  Raises :class:`~fedanon.errors.DataError` for a
    missing, non-string or non-UTF-8 value (None, NaN), or a record longer than
    :data:`MAX_RECORD_BYTES`."""
    gid = np.asarray(group, dtype=np.int64).reshape(-1)
    n = gid.shape[0]
    if n and (int(gid.min()) < 0):
        raise DataError("a group id is negative", expected="0 <= id < 2^63")
    gcodes, ids = _dense(gid)
    parts: list[tuple[IntArray, Packed]] = [(gcodes, varints(ids))]
    for f, column in enumerate(columns):
        name = names[f] if names is not None else f"#{f}"
        if hasattr(column, "codes") and hasattr(column, "values"):
            code = np.asarray(column.codes, dtype=np.int64)
            uniques: Sequence[object] = list(column.values)
            if code.size and (int(code.min()) < 0 or int(code.max()) >= len(uniques)):
                raise DataError("a dictionary code is out of range", column=name)
        else:
            code, uniques = _factorize(column)
        if code.shape != (n,):
            raise DataError(f"released column has {code.size} values for {n} records", column=name)
        declared = known_values(known[f] if known is not None else ())
        parts.append((code, encode_column(uniques, name, declared)))
    nbytes = np.zeros(n, dtype=np.int64)
    for code, enc in parts:
        nbytes += enc.length[code]
    if n and int(nbytes.max()) > MAX_RECORD_BYTES:
        raise DataError(
            f"an encoded record has {int(nbytes.max())} bytes",
            expected=f"at most {MAX_RECORD_BYTES} bytes per record",
        )
    grouped = _group_parts(parts, min(1 << 16, max(256, n // 4)))
    return RecordSet(len(columns), gid, grouped, nbytes, class_of(nbytes))


def _group_parts(
    parts: list[tuple[IntArray, Packed]], limit: int
) -> tuple[tuple[IntArray, Packed], ...]:
    """Merge consecutive parts while the product of their dictionary sizes is <= limit."""
    out: list[tuple[IntArray, Packed]] = []
    codes, values = parts[0]
    for code, enc in parts[1:]:
        if values.size * enc.size <= limit:
            codes = codes * enc.size + code
            values = merge(values, enc)
        else:
            out.append((codes, values))
            codes, values = code, enc
    out.append((codes, values))
    return tuple(out)
