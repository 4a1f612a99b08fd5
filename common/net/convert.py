"""Protobuf <-> domain objects: the only module that sees both the wire and the engine."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from fedanon.errors import ProtocolError
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.privacy.mprivacy import CoalitionQuery
from fedanon.security.mixnet import SignedKey
from fedanon.security.pairwise import SumOrder
from fedanon.tds.state import Phase, UnionParams, Update
from fedanon.union.layout import Layout, Table
from fedanon.union.params import SketchParams, Split

__all__ = [
    "PACK_BYTES",
    "coalition_from_pb",
    "coalition_to_pb",
    "key_from_pb",
    "key_to_pb",
    "mix_blobs",
    "mix_request",
    "mpc_addresses_from_pb",
    "pack_blobs",
    "phase_from_pb",
    "phase_to_pb",
    "read_mix_header",
    "secure_sum_from_pb",
    "secure_sum_to_pb",
    "sketch_from_pb",
    "sketch_to_pb",
    "sum_order_from_pb",
    "sum_order_to_pb",
    "unpack_data",
    "update_from_pb",
    "update_to_pb",
]

_PHASE_TO_PB = {
    Phase.SPLIT: pb.PHASE_SPLIT,
    Phase.COUNTS: pb.PHASE_COUNTS,
    Phase.UNION: pb.PHASE_UNION,
    Phase.UNION_LENGTHS: pb.PHASE_UNION_LENGTHS,
    Phase.UNION_SKETCH: pb.PHASE_UNION_SKETCH,
}
_PHASE_FROM_PB = {v: k for k, v in _PHASE_TO_PB.items()}


def phase_to_pb(phase: Phase) -> pb.Phase:
    return _PHASE_TO_PB[phase]


def phase_from_pb(phase: int) -> Phase:
    try:
        return _PHASE_FROM_PB[phase]  # type: ignore[index]
    except KeyError:
        raise ProtocolError(f"invalid phase {phase}") from None


SECURE_SUMS = ("pairwise", "ring")  # fedanon.leader.config.SECURE_SUM_CHOICES
_SUM_TO_PB = {"ring": pb.SECURE_SUM_RING, "pairwise": pb.SECURE_SUM_PAIRWISE}
_SUM_FROM_PB = {v: k for k, v in _SUM_TO_PB.items()} | {pb.SECURE_SUM_UNSPECIFIED: "ring"}


def secure_sum_to_pb(method: str) -> pb.SecureSum:
    return _SUM_TO_PB[method]


def secure_sum_from_pb(value: int) -> str:
    """``ring`` or ``pairwise``; an unset or unknown value is a :class:`ProtocolError`."""
    try:
        return _SUM_FROM_PB[value]  # type: ignore[index]
    except KeyError:
        raise ProtocolError(f"invalid secure sum method {value}") from None


def sum_order_to_pb(order: SumOrder, run_id: bytes) -> pb.ContributeRequest:
    return pb.ContributeRequest(
        run_id=run_id,
        round=order.round,
        phase=phase_to_pb(order.phase),
        layout_hash=order.layout_hash,
        total_len=order.size,
        instructions=order.instructions,
        sum=order.sum_no,
    )


def sum_order_from_pb(msg: pb.ContributeRequest) -> SumOrder:
    return SumOrder(
        sum_no=int(msg.sum),
        round=int(msg.round),
        phase=phase_from_pb(msg.phase),
        layout_hash=bytes(msg.layout_hash),
        size=int(msg.total_len),
        instructions=int(msg.instructions),
    )


def update_to_pb(update: Update, run_id: bytes) -> pb.Instruction:
    best = (
        pb.NodeRef(attr=-1, node=0)
        if update.best is None
        else pb.NodeRef(attr=update.best[0], node=update.best[1])
    )
    return pb.Instruction(
        run_id=run_id,
        round=update.round,
        best=best,
        splits=[pb.Split(attr=a, node=x, split=s) for a, x, s in update.splits],
        invalid=[pb.NodeRef(attr=a, node=x) for a, x in update.invalid],
        children_mask=update.children_mask,
        end=update.end,
        union_sketch=None if update.union is None else sketch_to_pb(update.union),
    )


def sketch_to_pb(params: UnionParams) -> pb.UnionSketch:
    if not isinstance(params, SketchParams):  # the engine carries them opaquely
        raise ProtocolError("union parameters of an unknown kind")
    tables = [
        pb.SketchTable(
            size_class=t.size_class,
            records=t.records,
            lane_bytes=t.lane_bytes,
            width=t.width,
            cells=t.cells,
            max_multiplicity=t.multiplicity,
        )
        for t in params.layout.tables
    ]
    msg = pb.UnionSketch(key=params.key, n_fields=params.layout.n_fields, tables=tables)
    if params.split is not None:
        msg.split_key = params.split.key
        msg.part = params.split.part
        msg.parts = params.split.parts
    return msg


def sketch_from_pb(msg: pb.UnionSketch) -> SketchParams:
    try:
        tables = tuple(
            Table(
                int(t.size_class),
                int(t.records),
                int(t.lane_bytes),
                int(t.width),
                int(t.cells),
                int(t.max_multiplicity),
            )
            for t in msg.tables
        )
        split = None
        if msg.parts or msg.part or msg.split_key:
            split = Split(bytes(msg.split_key), int(msg.part), int(msg.parts))
        return SketchParams(Layout(int(msg.n_fields), tables), bytes(msg.key), split)
    except ValueError as exc:
        raise ProtocolError(f"invalid union sketch parameters: {exc}") from None


def update_from_pb(msg: pb.Instruction) -> Update:
    best: tuple[int, int] | None = None
    if msg.HasField("best") and msg.best.attr >= 0:
        best = (int(msg.best.attr), int(msg.best.node))
    return Update(
        round=int(msg.round),
        splits=tuple((int(s.attr), int(s.node), int(s.split)) for s in msg.splits),
        invalid=tuple((int(n.attr), int(n.node)) for n in msg.invalid),
        best=best,
        children_mask=bytes(msg.children_mask),
        end=bool(msg.end),
        union=sketch_from_pb(msg.union_sketch) if msg.HasField("union_sketch") else None,
    )


def key_to_pb(key: SignedKey) -> pb.SignedKey:
    return pb.SignedKey(
        name=key.name, public_key=key.public_key, signature=key.signature, cert_pem=key.cert_pem
    )


def key_from_pb(msg: pb.SignedKey) -> SignedKey:
    return SignedKey(
        name=msg.name,
        public_key=bytes(msg.public_key),
        signature=bytes(msg.signature),
        cert_pem=bytes(msg.cert_pem),
    )


# --- union ciphertexts: packed back to back, many per Blob ------------------------------
#
# All ciphertexts of one mix hop have the same size (a fixed pad plus one 48-byte overhead
# per remaining layer), which both ends compute, so a Blob carries as many whole ciphertexts
# as fit in PACK_BYTES; one gRPC message per record would cost far more than the crypto.

PACK_BYTES = 1 << 20


def pack_blobs(items: Sequence[bytes], size: int) -> Iterator[pb.Blob]:
    """Blobs of whole ``size``-byte ciphertexts, at most :data:`PACK_BYTES` each."""
    per = max(1, PACK_BYTES // max(size, 1))
    for start in range(0, len(items), per):
        part = items[start : start + per]
        if any(len(c) != size for c in part):
            raise ProtocolError(f"ciphertexts of one hop must all be {size} bytes")
        yield pb.Blob(data=b"".join(part))


def unpack_data(datas: Iterable[bytes], size: int, expected: int | None = None) -> list[bytes]:
    """Split packed ciphertexts; every chunk must hold whole ``size``-byte ciphertexts."""
    if size <= 0:
        raise ProtocolError("ciphertext size must be positive")
    out: list[bytes] = []
    for data in datas:
        if len(data) % size or len(data) > PACK_BYTES + size:
            raise ProtocolError(f"packed blob of {len(data)} bytes is not whole {size}-byte items")
        out.extend(data[i : i + size] for i in range(0, len(data), size))
        if expected is not None and len(out) > expected:
            raise ProtocolError(f"more than the expected {expected} ciphertexts")
    if expected is not None and len(out) != expected:
        raise ProtocolError(f"got {len(out)} ciphertexts, expected {expected}")
    return out


def mix_request(
    items: Sequence[bytes], size: int, run_id: bytes, hop: int
) -> Iterator[pb.MixChunk]:
    """The Mix request stream: a header (count = number of ciphertexts), then packed blobs."""
    yield pb.MixChunk(header=pb.MixHeader(run_id=run_id, hop=hop, expected_count=len(items)))
    for blob in pack_blobs(items, size):
        yield pb.MixChunk(blob=blob.data)


def read_mix_header(chunks: Iterator[pb.MixChunk]) -> pb.MixHeader:
    first = next(chunks, None)
    if first is None or first.WhichOneof("kind") != "header":
        raise ProtocolError("Mix stream does not start with a header")
    return first.header


def mix_blobs(chunks: Iterator[pb.MixChunk]) -> Iterator[bytes]:
    """The packed payloads after the header."""
    for chunk in chunks:
        if chunk.WhichOneof("kind") != "blob":
            raise ProtocolError("Mix stream repeats the header")
        yield chunk.blob


# ----------------------------------------------------------------- m-privacy (CoalitionCheck)


def coalition_to_pb(query: CoalitionQuery, run_id: bytes) -> pb.CoalitionCheckRequest:
    """No candidate: the fully generalized table (check 0)."""
    req = pb.CoalitionCheckRequest(
        run_id=run_id, check=query.check, instructions=query.instructions
    )
    if query.candidate is not None:
        b, x = query.candidate
        req.candidate.CopyFrom(pb.NodeRef(attr=b, node=x))
    return req


def coalition_from_pb(msg: pb.CoalitionCheckRequest) -> CoalitionQuery:
    if not msg.HasField("candidate"):  # the fully generalized table: only as check 0
        return CoalitionQuery(msg.check, msg.instructions, None)
    return CoalitionQuery(msg.check, msg.instructions, (msg.candidate.attr, msg.candidate.node))


def mpc_addresses_from_pb(ring: Sequence[pb.PartyRef]) -> tuple[str, ...]:
    """The MPC workers' host:port in ring order (empty strings when the leader sent none)."""
    return tuple(p.mpc_address for p in ring)
