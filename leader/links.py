"""The leader's connections to the parties, RPC error mapping, and traffic accounting."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from common.errors import FedanonError, InputError, RunAborted
from common.pb.fedanon.v1 import party_pb2_grpc as pb_grpc

T = TypeVar("T")


class PartyFailed(RunAborted):
    """A party failed or was unreachable; ``party`` and ``phase`` say where."""

    def __init__(self, party: str, phase: str, detail: str) -> None:
        self.party = party
        self.phase = phase
        super().__init__(f"party {party} failed during {phase}: {detail}")


class PartyRejected(InputError):
    """A party refused the run for a reason the user must fix (data, spec)."""


@dataclass
class Traffic:
    """Bytes on the wire (protobuf payload sizes) and where the time went, at the leader."""

    sent: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    received: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, key: str, sent: int = 0, received: int = 0) -> None:
        self.sent[key] += sent
        self.received[key] += received

    def timed(self, kind: str, fn: Callable[[], T]) -> T:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.seconds[kind] += time.perf_counter() - t0

    def counting(self, key: str, msgs: Iterable[Any], *, sent: bool) -> Iterator[Any]:
        for m in msgs:
            if sent:
                self.sent[key] += m.ByteSize()
            else:
                self.received[key] += m.ByteSize()
            yield m

    def summary(self) -> dict[str, Any]:
        keys = sorted(set(self.sent) | set(self.received), key=_order)
        per = {k: {"sent": self.sent.get(k, 0), "received": self.received.get(k, 0)} for k in keys}
        return {
            "bytes_total": {
                "sent": sum(self.sent.values()),
                "received": sum(self.received.values()),
            },
            "bytes_by_step": per,
        }


def _order(key: str) -> tuple[int, str]:
    head, _, rest = key.partition(" ")
    if head == "round" and rest.split(" ")[0].isdigit():
        return (int(rest.split(" ")[0]), key)
    return (-1 if key == "prepare" else 1 << 30, key)


@dataclass
class Link:
    name: str
    address: str
    channel: grpc.Channel
    stub: pb_grpc.PartyStub

    def call(self, phase: str, fn: Callable[[pb_grpc.PartyStub], T]) -> T:
        """Run ``fn(stub)``; turn any RPC failure into :class:`PartyFailed` naming us."""
        try:
            return fn(self.stub)
        except grpc.RpcError as exc:
            raise self.failure(phase, exc) from None
        except FedanonError as exc:
            if isinstance(exc, PartyFailed | PartyRejected):
                raise
            raise PartyFailed(self.name, phase, str(exc)) from None

    def failure(self, phase: str, exc: grpc.RpcError) -> FedanonError:
        code = exc.code() if hasattr(exc, "code") else None
        details = str(exc.details() if hasattr(exc, "details") else exc) or "no details"
        who = self.name
        if details.startswith("party "):  # a party named itself (or its successor)
            who = details.split(" ", 2)[1].rstrip(":")
            detail = details.split(":", 1)[1].strip() if ":" in details else details
        else:
            detail = details
            if code == grpc.StatusCode.UNAVAILABLE:
                detail = f"unreachable at {self.address} ({details})"
        if "unreachable" in detail and "party " in detail:  # successor named in relay failure
            tail = detail[detail.index("party ") :].split(" ")
            if len(tail) > 1:
                who = tail[1]
        name = code.name if code is not None else "ERROR"
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            return PartyRejected(f"party {who} rejected the run during {phase}: {detail}")
        return PartyFailed(who, phase, f"{name}: {detail}")
