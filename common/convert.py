"""Protobuf <-> domain objects: the only module that sees both the wire and the engine."""

from __future__ import annotations

from common.errors import ProtocolError
from common.mixnet import SignedKey
from common.pb.fedanon.v1 import party_pb2 as pb
from common.state import Phase, Update

__all__ = [
    "key_from_pb",
    "key_to_pb",
    "phase_from_pb",
    "phase_to_pb",
    "update_from_pb",
    "update_to_pb",
]

_PHASE_TO_PB = {Phase.SPLIT: pb.PHASE_SPLIT, Phase.COUNTS: pb.PHASE_COUNTS}
_PHASE_FROM_PB = {v: k for k, v in _PHASE_TO_PB.items()}


def phase_to_pb(phase: Phase) -> pb.Phase:
    return _PHASE_TO_PB[phase]


def phase_from_pb(phase: int) -> Phase:
    try:
        return _PHASE_FROM_PB[phase]  # type: ignore[index]
    except KeyError:
        raise ProtocolError(f"invalid phase {phase}") from None


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
    )


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
