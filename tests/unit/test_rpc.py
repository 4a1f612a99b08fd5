"""Vector chunking, Mix/Blob streams and deadline helpers."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from fedanon.errors import ProtocolError, RunAborted
from fedanon.net import rpc
from fedanon.pb.fedanon.v1 import party_pb2 as pb

RUN = bytes(range(16))
U64_MAX = np.iinfo(np.uint64).max


def _chunks(vec: Any, **kw: Any) -> list[pb.VectorChunk]:
    args: dict[str, Any] = {
        "run_id": RUN,
        "round": 4,
        "phase": pb.PHASE_COUNTS,
        "layout_hash": b"\xaa" * 32,
    }
    args.update(kw)
    return list(rpc.encode_vector(vec, **args))


def _roundtrip(vec: np.ndarray) -> np.ndarray:
    # Through the wire encoding, as gRPC would do it.
    wire = [pb.VectorChunk.FromString(c.SerializeToString()) for c in _chunks(vec)]
    header, out = rpc.decode_vector(
        wire, run_id=RUN, round=4, phase=pb.PHASE_COUNTS, layout_hash=b"\xaa" * 32
    )
    assert header.total_len == vec.size
    assert out.dtype == np.uint64
    return out


@pytest.mark.parametrize("n", [0, 1, 7, 131_071, 131_072, 131_073, 400_000, 1_000_003])
def test_roundtrip_sizes(n: int) -> None:
    rng = np.random.default_rng(n)
    vec = rng.integers(0, U64_MAX, size=n, dtype=np.uint64, endpoint=True)
    if n:
        vec[0] = U64_MAX
    chunks = _chunks(vec)
    assert len(chunks) == max(1, -(-n * 8 // rpc.CHUNK_BYTES))
    assert all(len(c.data) <= rpc.CHUNK_BYTES for c in chunks)
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    assert chunks[0].HasField("header") and not any(c.HasField("header") for c in chunks[1:])
    assert all(c.ByteSize() < 8 * 1024 * 1024 for c in chunks)
    assert np.array_equal(_roundtrip(vec), vec)


def test_wire_is_little_endian_and_any_byte_order_input() -> None:
    vec = np.array([1, 2**40 + 3], dtype=">u8")
    [chunk] = _chunks(vec)
    assert chunk.data == (1).to_bytes(8, "little") + (2**40 + 3).to_bytes(8, "little")
    assert _roundtrip(vec).tolist() == [1, 2**40 + 3]


def test_small_chunk_size() -> None:
    vec = np.arange(10, dtype=np.uint64)
    chunks = _chunks(vec, chunk_bytes=24)
    assert [len(c.data) for c in chunks] == [24, 24, 24, 8]
    assert rpc.decode_vector(chunks)[1].tolist() == list(range(10))


@pytest.mark.parametrize(
    "bad",
    [
        np.arange(3, dtype=np.int64),
        np.arange(3, dtype=np.uint32),
        np.zeros((2, 2), dtype=np.uint64),
        [1, 2, 3],
    ],
)
def test_encode_rejects_non_uint64(bad: Any) -> None:
    with pytest.raises(TypeError):
        _chunks(bad)


def test_encode_rejects_bad_arguments() -> None:
    vec = np.arange(3, dtype=np.uint64)
    with pytest.raises(ValueError, match="phase"):
        _chunks(vec, phase=pb.PHASE_UNSPECIFIED)
    for size in (0, 12, rpc.CHUNK_BYTES + 8):
        with pytest.raises(ValueError, match="chunk_bytes"):
            _chunks(vec, chunk_bytes=size)


def _three() -> list[pb.VectorChunk]:
    return _chunks(np.arange(9, dtype=np.uint64), chunk_bytes=24)


def _mutated(fn: Any) -> list[pb.VectorChunk]:
    chunks = _three()
    fn(chunks)
    return chunks


@pytest.mark.parametrize(
    ("chunks", "match"),
    [
        ([], "empty vector stream"),
        (_three()[1:], "seq 1, expected 0"),
        (_mutated(lambda c: c[0].ClearField("header")), "no header"),
        (_mutated(lambda c: c[1].header.CopyFrom(c[0].header)), "repeats the header"),
        (_mutated(lambda c: c.pop(1)), "seq 2, expected 1"),
        (_mutated(lambda c: c.pop()), "has 6 elements, header announced 9"),
        (_mutated(lambda c: setattr(c[0].header, "total_len", 8)), "longer than its total_len"),
        (_mutated(lambda c: setattr(c[1], "data", c[1].data[:-1])), "has 23 bytes"),
        (_mutated(lambda c: setattr(c[0].header, "phase", 0)), "invalid phase"),
        (_mutated(lambda c: setattr(c[0].header, "total_len", 2**62)), "exceeds limit"),
        (
            _mutated(lambda c: setattr(c[2], "data", b"\0" * (rpc.CHUNK_BYTES + 8))),
            "has 1048584 bytes",
        ),
    ],
)
def test_decode_rejects_malformed(chunks: list[pb.VectorChunk], match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        rpc.decode_vector(chunks)


@pytest.mark.parametrize(
    ("expect", "match"),
    [
        ({"run_id": b"x" * 16}, "run_id mismatch"),
        ({"round": 5}, "round mismatch: expected 5, got 4"),
        ({"phase": pb.PHASE_SPLIT}, "phase mismatch"),
        ({"layout_hash": b"\xbb" * 32}, "layout_hash mismatch: expected bbbb"),
        ({"max_len": 8}, "exceeds limit 8"),
    ],
)
def test_decode_checks_expectations(expect: dict[str, Any], match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        rpc.decode_vector(_three(), **expect)


def test_decode_consumes_lazily() -> None:
    # A broken first chunk is reported before the rest of the stream is pulled.
    pulled = []

    def stream() -> Any:
        for c in _mutated(lambda c: c[0].ClearField("header")):
            pulled.append(c.seq)
            yield c

    with pytest.raises(ProtocolError):
        rpc.decode_vector(stream())
    assert pulled == [0]


def test_call_always_passes_a_timeout() -> None:
    seen: list[Any] = []

    def method(request: Any, timeout: float | None = None, **kw: Any) -> str:
        seen.append((request, timeout, kw))
        return "reply"

    assert rpc.call(method, "req") == "reply"
    assert seen[-1] == ("req", rpc.DEFAULT_TIMEOUT_S, {})
    rpc.call(method, "req", timeout=2.5, wait_for_ready=True)
    assert seen[-1] == ("req", 2.5, {"wait_for_ready": True})
    rpc.call(method, "req", timeout=rpc.Deadline(100))
    assert 99 < seen[-1][1] <= 100
    with pytest.raises(ValueError):
        rpc.call(method, "req", timeout=0)


def test_deadline() -> None:
    d = rpc.Deadline(0.05)
    assert not d.expired and 0 < d.remaining() <= 0.05
    time.sleep(0.06)
    assert d.expired
    with pytest.raises(RunAborted, match="deadline"):
        d.remaining()
    with pytest.raises(ValueError):
        rpc.Deadline(0)
    assert rpc.timeout_of(None, default=7) == 7
