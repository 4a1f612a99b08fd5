"""Secure union of arbitrary released records by one ring secure sum (an IBLT sketch).

Every party encodes its released records, sketches them into a uint64 vector whose layout
the leader fixed, and adds it to the masked vector travelling round the ring; the leader
unmasks the sum, which is the sketch of the union multiset, and peels it.  The leader learns
the multiset of released records (with multiplicities), the number of records per length
class and nothing else: no batch sizes, no ownership.

How to call it (the integration)::

    from common import union

    # leader: after the statistics rounds (N = the root count is known)
    #   round 1, a small secure sum of length histograms
    # party:
    records = union.encode_records(group_ids, [column_0, column_1, ...])  # str columns
    share = records.histogram()                   # int64, len(union.CLASS_BOUNDS)
    # leader:
    layout = union.plan(summed_histogram, n_fields)   # check summed_histogram.sum() == N
    key = union.new_key()                             # 32 bytes, fresh for every attempt
    #   send (layout, key) to every party (layout.digest names it in the sum messages)
    #   round 2, the union secure sum
    # party:
    vector = union.sketch(records, layout, key)   # uint64[layout.size]
    masked = add_share(masked, vector.view(np.int64))
    # leader:
    try:
        result = union.peel(layout, key, unmask(total, mask))
    except union.PeelingFailed:
        layout, key = layout.grown(), union.new_key()   # and run round 2 again
    except union.CorruptSketch:
        ...  # abort the run: some party sent a malformed vector
    group_ids, columns = result.expand()          # canonical order, one entry per record

``result.group``, ``result.columns`` and ``result.count`` give the distinct records and
their multiplicities without expanding.  Layout and key must be identical at every party;
the layout travels as its fields (:class:`Layout`, :class:`Table` are frozen dataclasses of
ints) and parties should check ``layout.digest``.
"""

from __future__ import annotations

import secrets

from common.union.decode import Coded
from common.union.iblt import CorruptSketch, PeelingFailed, sketch
from common.union.keyed import KEY_BYTES
from common.union.layout import DEFAULT_FACTOR, Layout, Table, plan
from common.union.records import CLASS_BOUNDS, CodedColumn, RecordSet, encode_records
from common.union.recover import PeeledRecords, peel

__all__ = [
    "CLASS_BOUNDS",
    "DEFAULT_FACTOR",
    "KEY_BYTES",
    "Coded",
    "CodedColumn",
    "CorruptSketch",
    "Layout",
    "PeeledRecords",
    "PeelingFailed",
    "RecordSet",
    "Table",
    "encode_records",
    "new_key",
    "peel",
    "plan",
    "sketch",
]


def new_key() -> bytes:
    """A fresh per-attempt sketch key from the OS CSPRNG."""
    return secrets.token_bytes(KEY_BYTES)
