"""The sketch union, party side: released records -> length histogram -> IBLT sketch.

After the last round every party encodes its released records -- final group id plus the
value of every released non-QID column, in spec order (:mod:`fedanon.union.records`) -- once,
and takes part in two ring secure sums:

1. :data:`Phase.UNION_LENGTHS <fedanon.tds.state.Phase>`: its records per length class and,
   as one more element, how many of its records are distinct (:data:`LENGTHS_SIZE`, fixed);
   the leader learns the totals -- N, how many records of which length the union holds,
   and the sum over parties of their distinct counts, an upper bound on the union's
   distinct records -- and sizes the sketch from them;
2. :data:`Phase.UNION_SKETCH <fedanon.tds.state.Phase>`: the IBLT sketch of its records with the
   layout and key the leader sent it directly (an Instruction, :class:`SketchShare.keep`),
   never along the ring.  A retry (the leader's peeling failed) comes with a new round
   number, a grown layout and a fresh key.  A large union comes as several such sums, one
   per part of a split (:mod:`fedanon.union.parts`), each with its own round number.

The QID columns need no bytes in the sketch: the leader knows every final group's
generalized values.  Nothing here sees the network; :class:`fedanon.union.localparty.LocalParty`
delegates its union phases to :class:`SketchShare`.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from fedanon.arrays import IntArray, ObjArray
from fedanon.errors import ProtocolError
from fedanon.io.table import EncodedTable
from fedanon.model.spec import RunSpec
from fedanon.tds.state import Phase, SharedState
from fedanon.tds.tips import Tips
from fedanon.union import (
    CLASS_BOUNDS,
    CodedColumn,
    RecordSet,
    SketchParams,
    encode_records,
    sketch,
)
from fedanon.union.parts import PartSketcher

KEEP_PARAMS = 4  # sketch attempts whose parameters a party keeps
LENGTHS_SIZE = CLASS_BOUNDS.size + 1  # records per length class, then distinct records

__all__ = [
    "LENGTHS_SIZE",
    "SketchShare",
    "lengths_digest",
    "lengths_vector",
    "released_fields",
    "released_known",
]


def released_fields(spec: RunSpec) -> list[str]:
    """The released non-QID columns (class, sensitive, other), spec order: a record's fields."""
    return [a.name for a in spec.attributes if a.role in ("class", "sensitive", "other")]


def released_known(spec: RunSpec) -> tuple[tuple[str, ...], ...]:
    """Every released field's declared values (none: empty), spec order: their first short
    forms in the records' encoding (:mod:`fedanon.union.records`), on both sides."""
    return tuple(
        tuple(a.values or ()) for a in spec.attributes if a.role in ("class", "sensitive", "other")
    )


def lengths_digest(n_fields: int) -> bytes:
    """Names the layout of the length histogram (fixed by the protocol)."""
    h = hashlib.sha256(b"fedanon-union-lengths-v3\0")
    h.update(f"{n_fields};{CLASS_BOUNDS.size};distinct".encode())
    h.update(CLASS_BOUNDS.tobytes())
    return h.digest()


def lengths_vector(records: RecordSet) -> IntArray:
    """A party's vector of the lengths sum: records per length class, then its number of
    distinct records."""
    hist = records.histogram()
    return np.append(hist, np.int64(records.distinct()[0].size)).astype(np.int64)


def encode_released(
    spec: RunSpec, state: SharedState, tips: Tips, table: EncodedTable
) -> RecordSet:
    """This party's released records: final group id + released non-QID values."""
    group = tips.partition_of_rows(state)
    names = released_fields(spec)
    cols = [_coded(table.kept[n]) for n in names]
    return encode_records(group, cols, names, released_known(spec))


def _coded(column: Any) -> CodedColumn | ObjArray:
    """A kept column as :func:`encode_records` takes it: dictionary-coded as it is (fast),
    else as an object array of strings."""
    if hasattr(column, "codes") and hasattr(column, "values"):
        coded: CodedColumn = column
        return coded
    return np.asarray(column, dtype=object)


class SketchShare:
    """A party's side of the sketch union (one per
    :class:`~fedanon.union.localparty.LocalParty`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: RecordSet | None = None
        self._params: OrderedDict[int, SketchParams] = OrderedDict()
        self._parts: PartSketcher | None = None  # a split union's hashed records

    def keep(self, round_: int, params: SketchParams) -> None:
        """The leader's layout and key for the sketch summed in round ``round_``."""
        with self._lock:
            old = self._params.get(round_)
            if old is not None and old != params:
                raise ProtocolError(f"round {round_} already has other union sketch parameters")
            self._params[round_] = params
            while len(self._params) > KEEP_PARAMS:
                self._params.popitem(last=False)

    def stats(
        self,
        phase: Phase,
        round_: int,
        size: int,
        digest: bytes,
        state: SharedState,
        encode: Callable[[], RecordSet],
    ) -> IntArray:
        """This party's vector for a union phase (``encode`` gives its records, once)."""
        if not state.ended:
            raise ProtocolError("the union started before the final instruction")
        if phase == Phase.UNION_LENGTHS:
            if round_ != state.round:
                raise ProtocolError(f"union lengths asked for round {round_}, not {state.round}")
            if (size, digest) != (LENGTHS_SIZE, lengths_digest(self._n_fields(encode))):
                raise ProtocolError(
                    "union length histogram layout differs between leader and party"
                )
            return lengths_vector(self._encoded(encode))
        if phase != Phase.UNION_SKETCH:
            raise ProtocolError(f"{phase.name} is no sketch union phase")
        with self._lock:
            params = self._params.get(round_)
        if params is None or round_ <= state.round:
            raise ProtocolError(f"no union sketch parameters for round {round_}")
        layout = params.layout
        records = self._encoded(encode)
        if (size, digest) != (layout.size, params.digest) or layout.n_fields != records.n_fields:
            raise ProtocolError("union sketch layout differs between leader and party")
        if params.split is None:
            return sketch(records, layout, params.key).view(np.int64)
        with self._lock:
            if self._parts is None or self._parts.records is not records:
                self._parts = PartSketcher(records)
            parts = self._parts
        return parts.sketch(params).view(np.int64)

    def _encoded(self, encode: Callable[[], RecordSet]) -> RecordSet:
        with self._lock:
            if self._records is None:
                self._records = encode()
            return self._records

    def _n_fields(self, encode: Callable[[], RecordSet]) -> int:
        return self._encoded(encode).n_fields
