"""The leader's connections to the parties, RPC error mapping, and traffic accounting."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from fedanon.errors import ConfigError, FedanonError, InputError, RunAborted
from fedanon.leader.config import FederationConfig
from fedanon.logsafe import safe
from fedanon.net.meta import (
    KINDS,
    MD_KIND,
    MD_LOCKED_OUT,
    MD_LOCKOUT_MINUTES,
    MD_PARTY,
    MD_RULE,
    connect_soon,
    failure_metadata,
)
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security.tls import TlsMaterial, insecure_channel

T = TypeVar("T")


class PartyFailed(RunAborted):
    """A party failed or was unreachable; ``party`` and ``phase`` say where."""

    def __init__(self, party: str, phase: str, detail: str) -> None:
        self.party = party
        self.phase = phase
        super().__init__(f"party {party} failed during {phase}: {detail}")


class PartyRejected(InputError):
    """A party refused the run for a reason the user must fix (data, spec, its policy)."""

    def __init__(self, message: str, *, party: str, rule: str = "") -> None:
        self.party = party
        self.rule = rule
        super().__init__(message)


class LeaderNotAuthorized(PartyRejected):
    """A party's authorization refused the leader's (valid, CA-signed) certificate: the
    hospital's ``[peers] leader`` names another leader.  A configuration matter: exit 2."""

    def __init__(self, party: str, details: str) -> None:
        super().__init__(
            f"authorization failed: {party} does not authorize this leader ({details}); "
            f"{party}'s party.toml must name this leader in [peers] leader",
            party=party,
        )


class LeaderLockedOut(PartyRejected):
    """A party refused the leader at the door: after repeated refused calls its ledger locked
    this leader out (:mod:`fedanon.ledger.access`).  Not a configuration error of
    ``[peers] leader``; it ends by itself or when the hospital lifts it.  Exit 2."""

    def __init__(self, party: str, who: str, minutes: str, details: str) -> None:
        when = f"for {minutes} more minutes" if minutes.isdigit() else "for a while"
        super().__init__(
            f"{party} has locked this leader out {when} after repeated refused calls "
            f"(its [policy] max_refusals_per_hour within an hour, default 100: {details}); "
            "the lockout ends by itself after its lockout_minutes, or the hospital lifts it "
            f"with `fedanon party ledger unlock {who} --config party.toml`",
            party=party,
            rule="lockout",
        )


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
    ring: frozenset[str] = frozenset()  # every party of the run: who a report may name

    def call(self, phase: str, fn: Callable[[pb_grpc.PartyStub], T]) -> T:
        """Run ``fn(stub)``; turn any RPC failure into :class:`PartyFailed` naming the party."""
        try:
            return fn(self.stub)
        except grpc.RpcError as exc:
            raise self.failure(phase, exc) from None
        except FedanonError as exc:
            if isinstance(exc, PartyFailed | PartyRejected):
                raise
            raise PartyFailed(self.name, phase, str(exc)) from None

    def failure(self, phase: str, exc: grpc.RpcError) -> FedanonError:
        """Attribute a failed call from its status and the party's trailing metadata.

        A party names itself (or, relaying, the successor that failed) in ``fedanon-party``
        and says what went wrong in ``fedanon-kind``; without that metadata the failure is
        this link's own (unreachable, deadline).  The message text is shown, never parsed.
        """
        code = _code(exc)
        details = safe(_details(exc) or "no details")
        md = failure_metadata(exc)
        who, kind = md.get(MD_PARTY, ""), md.get(MD_KIND, "")
        if code == grpc.StatusCode.PERMISSION_DENIED and MD_LOCKED_OUT in md:  # at the door
            locked = safe(md[MD_LOCKED_OUT], 100)
            return LeaderLockedOut(self.name, locked, md.get(MD_LOCKOUT_MINUTES, ""), details)
        if who not in self.ring | {self.name} or kind not in KINDS:  # absent or not credible
            if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
                return LeaderNotAuthorized(self.name, details)  # the party's interceptor
            if code == grpc.StatusCode.UNAVAILABLE:
                return PartyFailed(self.name, phase, f"unreachable at {self.address} ({details})")
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:  # this link's own deadline
                return PartyFailed(
                    self.name,
                    phase,
                    f"no answer at {self.address} within the call's deadline (the daemon is "
                    "hung, stopped or overloaded, or the network drops its packets; "
                    f"DEADLINE_EXCEEDED: {details})",
                )
            return PartyFailed(self.name, phase, f"{code.name if code else 'ERROR'}: {details}")
        if kind == "policy":
            return PartyRejected(f"{who} refuses: {details}", party=who, rule=md.get(MD_RULE, ""))
        if kind == "key":  # pairwise: `who` is the hospital whose signed key failed
            return PartyRejected(
                f"the pairwise sum key of {who} failed verification at {self.name} (a key "
                f"swapped, dropped or replayed on the way): {details}",
                party=who,
            )
        if kind == "input":
            return PartyRejected(
                f"party {who} rejected the run during {phase}: {details}", party=who
            )
        if kind in ("unreachable", "timeout"):
            return PartyFailed(who, phase, f"{kind} from its ring predecessor: {details}")
        return PartyFailed(who, phase, f"{code.name if code else 'ERROR'}: {details}")


def _code(exc: grpc.RpcError) -> grpc.StatusCode | None:
    try:
        return exc.code()
    except Exception:
        return None


def _details(exc: grpc.RpcError) -> str:
    try:
        return str(exc.details() or "")
    except Exception:
        return str(exc)


def leader_tls(cfg: FederationConfig) -> TlsMaterial:
    """The leader's TLS material; its certificate must name this leader."""
    tls = TlsMaterial.load(cfg.ca, cfg.cert, cfg.key)
    if tls.identity.role != "leader" or tls.identity.name != cfg.name:
        raise ConfigError(
            f"the leader certificate is for {tls.identity}, expected {cfg.name} (leader)",
            file=str(cfg.cert),
        )
    return tls


def connect_links(cfg: FederationConfig, tls: TlsMaterial, insecure: bool) -> list[Link]:
    """A link to every party, already connecting (TCP, TLS, HTTP/2) in gRPC's own threads:
    made as early as possible, the handshakes overlap whatever the leader loads meanwhile."""
    ring = frozenset(p.name for p in cfg.parties)
    out = []
    for p in cfg.parties:
        chan = insecure_channel(p.address) if insecure else tls.channel(p.address, p.name)
        connect_soon(chan)
        stub = pb_grpc.PartyStub(chan)  # type: ignore[no-untyped-call]
        out.append(Link(p.name, p.address, chan, stub, ring))
    return out
