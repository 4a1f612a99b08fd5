"""The canonical order of released records: a function of the released multiset only.

Records come out of the union in the order of (group id, length class of the record's text
encoding, the text encoding's bytes), where the text encoding is the group id's varint,
then per field its UTF-8 length as a varint and its bytes
(:func:`~fedanon.union.records.text_encoding`).  It depends neither on the parties, nor on
the key, nor on the peeling order, nor on the encoding the sketch carries.

The leader never builds those bytes: the field values of :func:`~fedanon.union.decode.field_values`
come in the order of their text encodings, and the text encodings are prefix-free, so
comparing two records' bytes is comparing their field codes one after the other; the length
class is summed from every value's text-encoding length.  One sort of integer keys
(:func:`lex_order`) replaces a sort of a million byte strings.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedanon.arrays import BoolArray, IntArray
from fedanon.union.records import class_of

__all__ = ["lex_order", "text_classes"]

_LIMIT = 1 << 62


def text_classes(group: IntArray, sizes: Sequence[IntArray]) -> IntArray:
    """Length class of each record's text encoding: the group id's varint plus ``sizes``
    (every field's text-encoding length, per record)."""
    total = np.ones(group.shape[0], dtype=np.int64)
    top = int(group.max()) if group.size else 0
    for bits in range(7, 63, 7):
        if top < 1 << bits:  # no group id has this many bits
            break
        total += group >= (1 << bits)
    for size in sizes:
        total += size
    return class_of(total)


def _dense(key: IntArray) -> tuple[IntArray, int]:
    """(dense codes of ``key`` in its order, how many distinct)."""
    if not key.size:
        return key, 1
    if int(key.min()) >= 0 and int(key.max()) <= 4 * key.size + 1024:
        present = np.bincount(key) > 0
        return (np.cumsum(present) - 1)[key], int(np.count_nonzero(present))
    order = np.argsort(key)  # any order among equal keys: they get one code
    ranked = key[order]
    step = np.empty(key.size, dtype=np.int64)
    step[0] = 0
    np.not_equal(ranked[1:], ranked[:-1], out=step[1:], casting="unsafe")
    np.cumsum(step, out=step)
    dense = np.empty(key.size, dtype=np.int64)
    dense[order] = step
    return dense, int(step[-1]) + 1


def lex_order(keys: Sequence[IntArray]) -> tuple[IntArray, BoolArray]:
    """(the permutation sorting records by ``keys`` lexicographically -- the first key
    first; equal records in any order --, which sorted records differ from their
    predecessor).  Keys are non-negative int64.

    The leading keys are packed into one int64 as long as they fit and sorted at once; only
    the records that tie on them (few: the packed keys are the group, the length class and
    the first fields) are sorted again by the rest, recursively."""
    key, card = _dense(keys[0])
    used = 1
    for k in keys[1:]:
        width = int(k.max()) + 1 if k.size else 1
        if card * width >= _LIMIT and used == 1:  # one key more at least: renumbered
            k, width = _dense(k)
        if card * width >= _LIMIT:
            break
        key = key * width + k
        card *= width
        used += 1
    rest = keys[used:]
    order = np.argsort(key)
    ranked = key[order]
    new = np.ones(ranked.size, dtype=bool)
    new[1:] = ranked[1:] != ranked[:-1]
    if not rest or new.all():
        return order, new
    # the runs of equal packed keys, sorted by the rest of the keys in place
    run = np.cumsum(new) - 1
    size = np.bincount(run)
    tied = np.flatnonzero(size[run] > 1)
    members = order[tied]
    sub, sub_new = lex_order([run[tied], *(k[members] for k in rest)])
    order[tied] = members[sub]
    new[tied] = sub_new
    return order, new
