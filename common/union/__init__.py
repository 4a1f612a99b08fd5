"""Secure union of arbitrary released records by one ring secure sum (an IBLT sketch).

Every party encodes its released records, sketches them into a uint64 vector whose layout
the leader fixed, and adds it to the masked vector travelling round the ring (mod 2^64, as
:mod:`fedanon.security.securesum`); the leader unmasks the sum, which is the sketch of the union
multiset (the sketch is linear), and peels it.

How to call it (the integration)::

    from fedanon import union

    # leader: after the statistics rounds (N = the root count is known)
    # -- round 1: a small secure sum of length histograms
    # party:
    records = union.encode_records(group_ids, columns, names, known)  # known: declared values
    share = records.histogram()                          # int64[len(union.CLASS_BOUNDS)]
    # leader, with the unmasked sum of the shares:
    if summed_histogram.sum() != N: abort                # a party disagrees with the rounds
    layout = union.plan(summed_histogram, n_fields)
    key = union.new_key()                                # fresh 32 bytes for every attempt
    #   send SketchParams(layout, key) to every party directly (leader/union.py: an
    #   Instruction); params.digest names layout *and* key in the sum's header, so a party
    #   adds only to a vector that every party built with the same key
    # -- round 2: the union secure sum, vector length layout.size
    # party:
    vector = union.sketch(records, layout, key)          # uint64[layout.size]
    masked = add_share(masked, vector.view(np.int64))
    # leader:
    try:
        result = union.peel(layout, key, unmask(total, mask), in_place=True, known=known)
    except union.PeelingFailed:      # about 0.1 % per table: retry round 2 with
        layout, key = layout.grown(), union.new_key()    # a bigger table and a fresh key
    except union.CorruptSketch:      # a ProtocolError: the sum is no sketch of valid
        ...                          # records (tampered, or mixed layouts): abort the run
    group_ids, columns = result.expand()  # one entry per record, canonical order

``columns`` may be dictionary-coded (``values`` + ``codes``, e.g. :class:`fedanon.io.table.Column`:
fast) or sequences of ``str``.  ``result.group``, ``result.columns`` (:class:`Coded`) and
``result.count`` give the distinct records with their multiplicities without expanding.
The canonical order is group id ascending, then the length class and the bytes of the
records' text encoding (:mod:`fedanon.union.canon`): a function of the multiset only (not of
the parties, the key, the peeling order or the sketch's encoding).

What the leader learns: the multiset of released records (group id + released values, with
multiplicities), hence N, and the number of records per length class, which is a function
of that multiset.  Not learned: batch sizes or which party holds which record.  If a run is
aborted after round 1, the leader has learned only the length histogram.

Threat notes: parties see only masked vectors; as with every ring secure sum, a party's two
ring neighbours together can recover its vector (its sketch, which peels to its records).
Parties know the key (they need it to sketch); records are fixed before the key is drawn, so
cells and checksums behave as independent uniform values for honest data.  A party can add
records that are not in its table (like lying about its data); anything else it adds is
detected: a record is output only if its keyed checksum and cell match, the per-table
counts match the histogram, and the table is exactly zero at the end, so a corrupted sum
raises :class:`CorruptSketch` or :class:`PeelingFailed`, never yields a wrong record.

Sizes: the vector is ``8 * sum over tables of 3 m (W + 2)`` bytes, about
``8 * 1.23 * N * (record bytes / L + 2)``, L = 5..7 bytes per lane; numbers and declared
values take a byte or a few (:mod:`fedanon.union.records`): the 1M-row Adult blow-up with
every numeric column raw sums a vector of 0.45x its released CSV (text-only records: about
2x, ``bench/bench_iblt.py``).
"""

from __future__ import annotations

import secrets

from fedanon.union.decode import Coded
from fedanon.union.iblt import CorruptSketch, PeelingFailed, sketch
from fedanon.union.keyed import KEY_BYTES
from fedanon.union.layout import DEFAULT_FACTOR, Layout, Table, plan
from fedanon.union.params import SketchParams
from fedanon.union.records import (
    CLASS_BOUNDS,
    CodedColumn,
    RecordSet,
    encode_records,
    encode_value,
)
from fedanon.union.recover import PeeledRecords, peel

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
    "SketchParams",
    "Table",
    "encode_records",
    "encode_value",
    "new_key",
    "peel",
    "plan",
    "sketch",
]


def new_key() -> bytes:
    """A fresh per-attempt sketch key from the OS CSPRNG."""
    return secrets.token_bytes(KEY_BYTES)
