"""Protobuf <-> domain conversions and ciphertext packing."""

from __future__ import annotations

import pytest

from fedanon.errors import ProtocolError
from fedanon.net.convert import (
    PACK_BYTES,
    key_from_pb,
    key_to_pb,
    mix_blobs,
    mix_request,
    pack_blobs,
    phase_from_pb,
    phase_to_pb,
    read_mix_header,
    unpack_data,
    update_from_pb,
    update_to_pb,
)
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.security.mixnet import SignedKey
from fedanon.tds.state import Phase, Update


@pytest.mark.parametrize(
    "update",
    [
        Update(round=0),
        Update(round=3, splits=((0, 2, 17), (1, 0, -1)), invalid=((2, 5),)),
        Update(round=7, best=(1, 4), children_mask=b"\x01\x00\x01"),
        Update(round=9, end=True, invalid=((0, 1), (0, 2))),
    ],
)
def test_update_round_trip(update: Update) -> None:
    msg = update_to_pb(update, b"r" * 16)
    again = pb.Instruction.FromString(msg.SerializeToString())
    assert again.run_id == b"r" * 16
    assert update_from_pb(again) == update


def test_phase_round_trip() -> None:
    for ph in Phase:
        assert phase_from_pb(phase_to_pb(ph)) == ph
    with pytest.raises(ProtocolError):
        phase_from_pb(pb.PHASE_UNSPECIFIED)


def test_key_round_trip() -> None:
    k = SignedKey("alice", b"k" * 32, b"sig", b"pem")
    assert key_from_pb(pb.SignedKey.FromString(key_to_pb(k).SerializeToString())) == k


def test_pack_unpack() -> None:
    size = 1000
    items = [bytes([i % 256]) * size for i in range(3000)]
    blobs = list(pack_blobs(items, size))
    assert len(blobs) > 1 and all(len(b.data) <= PACK_BYTES for b in blobs)
    assert unpack_data((b.data for b in blobs), size, len(items)) == items
    with pytest.raises(ProtocolError):
        unpack_data([b"x" * 999], size)
    with pytest.raises(ProtocolError):
        unpack_data((b.data for b in blobs), size, len(items) - 1)
    with pytest.raises(ProtocolError):
        list(pack_blobs([b"x" * 10, b"y" * 11], 10))


def test_mix_stream() -> None:
    items = [b"a" * 64, b"b" * 64, b"c" * 64]
    it = iter(mix_request(items, 64, b"r" * 16, 2))
    header = read_mix_header(it)
    assert (header.hop, header.expected_count) == (2, 3)
    assert unpack_data(mix_blobs(it), 64, 3) == items
    with pytest.raises(ProtocolError):
        read_mix_header(iter([pb.MixChunk(blob=b"x")]))
