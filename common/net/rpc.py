"""Helpers around the wire format: vector chunking, blob streams, deadlines.

Vectors (the secure-sum "Information" message) travel as a stream of
:class:`~fedanon.pb.fedanon.v1.party_pb2.VectorChunk`: the first chunk carries a
:class:`VectorHeader` and ``seq`` 0, every chunk carries at most :data:`CHUNK_BYTES` of
little-endian uint64 elements.  :func:`decode_vector` checks all of it and raises
:class:`~fedanon.errors.ProtocolError` on anything unexpected.

Every RPC gets a deadline: use :func:`call` (or pass ``timeout=`` yourself), with a
:class:`Deadline` when several RPCs share one budget.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from fedanon.errors import ProtocolError, RunAborted
from fedanon.net.meta import (
    KINDS,
    MD_KIND,
    MD_PARTY,
    MD_PHASE,
    MD_RULE,
    connect_soon,
    failure_metadata,
)
from fedanon.pb.fedanon.v1 import party_pb2 as pb

log = logging.getLogger(__name__)
__all__ = [  # the failure metadata and connect_soon live in fedanon.net.meta (no numpy)
    "KINDS",
    "MD_KIND",
    "MD_PARTY",
    "MD_PHASE",
    "MD_RULE",
    "connect_soon",
    "failure_metadata",
]

CHUNK_BYTES = 1 << 20  # data bytes per VectorChunk
ELEMENT = np.dtype("<u8")
MAX_VECTOR_LEN = 1 << 28  # elements (2 GiB); refuse to allocate more on a peer's word
MAX_CIPHERTEXTS = 1 << 24  # records in one mix batch

DEFAULT_TIMEOUT_S = 30.0  # unary control RPCs (Prepare, Instruct, UnionKey, Abort, Finish)
STREAM_TIMEOUT_S = 600.0  # streaming data RPCs (Relay, Collect, UnionBatch, Mix)

PHASES = frozenset(
    {pb.PHASE_SPLIT, pb.PHASE_COUNTS, pb.PHASE_UNION, pb.PHASE_UNION_LENGTHS, pb.PHASE_UNION_SKETCH}
)

R = TypeVar("R")


# ---------------------------------------------------------------------------- deadlines


class Deadline:
    """One time budget shared by several RPCs: ``stub.X(req, timeout=deadline.remaining())``."""

    def __init__(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError(f"deadline must be positive, got {seconds}")
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left; raises :class:`RunAborted` if the budget is spent."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise RunAborted(f"deadline of {self.seconds:g}s exceeded")
        return left

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self._end


def timeout_of(timeout: float | Deadline | None, default: float = DEFAULT_TIMEOUT_S) -> float:
    """A concrete ``timeout=`` value: ``default`` for None, what is left of a Deadline."""
    if timeout is None:
        return default
    if isinstance(timeout, Deadline):
        return timeout.remaining()
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    return float(timeout)


def call(
    method: Callable[..., R],
    request: Any,
    *,
    timeout: float | Deadline | None = None,
    **kwargs: Any,
) -> R:
    """``method(request, timeout=...)`` with a deadline always set (default 30 s).

    Works for unary and streaming stubs alike (``request`` may be an iterator); extra
    keyword arguments (``metadata``, ``wait_for_ready``...) are passed through.
    """
    return method(request, timeout=timeout_of(timeout), **kwargs)


# ------------------------------------------------------------------------------ vectors


def encode_vector(
    values: npt.NDArray[np.uint64],
    *,
    run_id: bytes,
    round: int,
    phase: pb.Phase,
    layout_hash: bytes,
    instructions: int = 0,
    chunk_bytes: int = CHUNK_BYTES,
    chain: bytes = b"",
) -> Iterator[pb.VectorChunk]:
    """Split a 1-D uint64 vector into VectorChunks (an empty vector gives one chunk).

    ``instructions``: how many Instructions the leader sent before this sum (a party applies
    that many before adding its statistics); ``chain``: their chain (the party's must match)."""
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.dtype.kind != "u" or arr.dtype.itemsize != 8:
        raise TypeError(f"expected a 1-D uint64 vector, got {arr.dtype} with shape {arr.shape}")
    if phase not in PHASES:
        raise ValueError(f"invalid phase {phase}")
    if chunk_bytes <= 0 or chunk_bytes % ELEMENT.itemsize or chunk_bytes > CHUNK_BYTES:
        raise ValueError(f"chunk_bytes must be a positive multiple of 8 <= {CHUNK_BYTES}")
    arr = arr.astype(ELEMENT, copy=False)
    if instructions < 0:
        raise ValueError(f"negative instruction count {instructions}")
    header = pb.VectorHeader(
        run_id=run_id,
        round=round,
        phase=phase,
        layout_hash=layout_hash,
        total_len=arr.size,
        instructions=instructions,
        chain=chain,
    )
    per_chunk = chunk_bytes // ELEMENT.itemsize
    for seq, start in enumerate(range(0, max(arr.size, 1), per_chunk)):
        data = arr[start : start + per_chunk].tobytes()
        if seq == 0:
            yield pb.VectorChunk(header=header, seq=0, data=data)
        else:
            yield pb.VectorChunk(seq=seq, data=data)


def _check_header(
    header: pb.VectorHeader,
    run_id: bytes | None,
    round: int | None,
    phase: pb.Phase | None,
    layout_hash: bytes | None,
    max_len: int,
) -> None:
    if header.phase not in PHASES:
        raise ProtocolError(f"vector header has invalid phase {header.phase}")
    expected: list[tuple[str, object, object]] = [
        ("run_id", run_id, header.run_id),
        ("round", round, header.round),
        ("phase", phase, header.phase),
        ("layout_hash", layout_hash, header.layout_hash),
    ]
    for field, want, got in expected:
        if want is not None and want != got:
            shown = (
                (want.hex(), got.hex())
                if isinstance(want, bytes) and isinstance(got, bytes)
                else (want, got)
            )
            raise ProtocolError(f"vector {field} mismatch: expected {shown[0]}, got {shown[1]}")
    if header.total_len > max_len:
        raise ProtocolError(f"vector of {header.total_len} elements exceeds limit {max_len}")


def decode_vector(
    chunks: Iterable[pb.VectorChunk],
    *,
    run_id: bytes | None = None,
    round: int | None = None,
    phase: pb.Phase | None = None,
    layout_hash: bytes | None = None,
    max_len: int = MAX_VECTOR_LEN,
) -> tuple[pb.VectorHeader, npt.NDArray[np.uint64]]:
    """Reassemble a vector; every given expectation must match the header.

    Raises :class:`ProtocolError` on an empty stream, a missing or repeated header, a
    sequence gap, a chunk that is too big or not a whole number of elements, or a length
    other than ``total_len``.
    """
    header: pb.VectorHeader | None = None
    out: npt.NDArray[np.uint64] = np.empty(0, dtype=np.uint64)
    filled = 0
    for expected_seq, chunk in enumerate(chunks):
        if chunk.seq != expected_seq:
            raise ProtocolError(f"vector chunk seq {chunk.seq}, expected {expected_seq}")
        if expected_seq == 0:
            if not chunk.HasField("header"):
                raise ProtocolError("first vector chunk has no header")
            header = chunk.header
            _check_header(header, run_id, round, phase, layout_hash, max_len)
            out = np.empty(header.total_len, dtype=np.uint64)
        elif chunk.HasField("header"):
            raise ProtocolError(f"vector chunk {chunk.seq} repeats the header")
        size = len(chunk.data)
        if size > CHUNK_BYTES or size % ELEMENT.itemsize:
            raise ProtocolError(f"vector chunk {chunk.seq} has {size} bytes")
        n = size // ELEMENT.itemsize
        if filled + n > out.size:
            raise ProtocolError(f"vector longer than its total_len {out.size}")
        out[filled : filled + n] = np.frombuffer(chunk.data, dtype=ELEMENT)
        filled += n
    if header is None:
        raise ProtocolError("empty vector stream")
    if filled != out.size:
        raise ProtocolError(f"vector has {filled} elements, header announced {out.size}")
    return header, out


# ------------------------------------------------------------------ pairwise (Contribute)


def masked_stream(
    pieces: Iterable[tuple[int, bytes]],
    *,
    run_id: bytes,
    round: int,
    phase: pb.Phase,
    layout_hash: bytes,
    total_len: int,
    sum_no: int,
) -> Iterator[pb.VectorChunk]:
    """A party's masked vector as VectorChunks: header on seq 0, ``sum`` on every chunk."""
    header = pb.VectorHeader(
        run_id=run_id, round=round, phase=phase, layout_hash=layout_hash, total_len=total_len
    )
    for seq, data in pieces:
        if len(data) > CHUNK_BYTES:
            raise ValueError(f"masked chunk of {len(data)} bytes")
        if seq == 0:
            yield pb.VectorChunk(header=header, seq=0, data=data, sum=sum_no)
        else:
            yield pb.VectorChunk(seq=seq, data=data, sum=sum_no)


def read_masked(
    chunks: Iterable[pb.VectorChunk],
    *,
    run_id: bytes,
    round: int,
    phase: pb.Phase,
    layout_hash: bytes,
    total_len: int,
) -> Iterator[tuple[int, int, bytes]]:
    """(sum, seq, data) of each chunk of a Contribute answer, as it arrives; the header of
    the first must match the order.  (The sum and the order of the chunks are checked by
    :class:`fedanon.security.pairwise.Accumulator`.)"""
    for i, chunk in enumerate(chunks):
        if i == 0:
            if not chunk.HasField("header"):
                raise ProtocolError("first vector chunk has no header")
            _check_header(chunk.header, run_id, round, phase, layout_hash, MAX_VECTOR_LEN)
            if chunk.header.total_len != total_len:
                raise ProtocolError(
                    f"vector of {chunk.header.total_len} elements, expected {total_len}"
                )
        elif chunk.HasField("header"):
            raise ProtocolError(f"vector chunk {chunk.seq} repeats the header")
        if len(chunk.data) > CHUNK_BYTES or len(chunk.data) % ELEMENT.itemsize:
            raise ProtocolError(f"vector chunk {chunk.seq} has {len(chunk.data)} bytes")
        yield int(chunk.sum), int(chunk.seq), bytes(chunk.data)
