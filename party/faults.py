"""What went wrong in a party, as the leader is told: the party named, the RPC, the kind.

One classification for both paths a failure takes: an RPC answered with an error (status code
plus ``fedanon-*`` trailing metadata, :mod:`fedanon.party.service`) and a failure of the background
relay worker, recorded in the run and reported by the ``Status`` RPC.  Texts are sanitized
here; a record value never reaches them (data errors carry file, line and column only).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import grpc

from fedanon.errors import AuthError, FedanonError, InputError, ProtocolError, RunAborted
from fedanon.net.rpc import KINDS, MD_KIND, MD_PARTY, MD_PHASE, failure_metadata
from fedanon.security.logsafe import safe
from fedanon.security.policy import PolicyRefused

log = logging.getLogger(__name__)


class UnknownRun(FedanonError):
    pass


class TimedOut(RunAborted):
    """Something the run waited for did not come within its deadline."""


@dataclass(frozen=True)
class Failure:
    """Who failed (this party, or a ring successor it could not deliver to), where, how."""

    party: str
    phase: str
    kind: str
    code: grpc.StatusCode
    detail: str
    rule: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown failure kind {self.kind!r}")


class PeerFailed(RunAborted):
    """A recorded failure, raised again (the successor failed, or an earlier step did)."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure
        super().__init__(failure.detail)


def classify(exc: FedanonError, me: str, phase: str) -> Failure:
    """The failure ``exc`` raised in RPC ``phase`` of party ``me``; logs it (sanitized)."""
    if isinstance(exc, PeerFailed):
        f = exc.failure
        log.warning("%s: %s %s: %s", phase, f.party, f.kind, f.detail)
        return f
    if isinstance(exc, TimedOut):
        log.warning("%s: %s", phase, safe(exc))
        return Failure(me, phase, "timeout", grpc.StatusCode.DEADLINE_EXCEEDED, safe(exc))
    if isinstance(exc, UnknownRun):
        return Failure(me, phase, "unknown-run", grpc.StatusCode.NOT_FOUND, str(exc))
    if isinstance(exc, PolicyRefused):
        log.warning("%s: refused by policy: %s", phase, safe(exc))
        code = grpc.StatusCode.FAILED_PRECONDITION
        return Failure(me, phase, "policy", code, safe(exc), exc.rule)
    if isinstance(exc, InputError):
        # file, line and column locate the problem; the file path stays in the local log
        local = InputError(
            exc.message, file=exc.file, line=exc.line, column=exc.column, expected=exc.expected
        )
        log.error("%s: %s", phase, safe(local))
        sent = InputError(exc.message, column=exc.column, line=exc.line, expected=exc.expected)
        return Failure(me, phase, "input", grpc.StatusCode.INVALID_ARGUMENT, safe(sent))
    if isinstance(exc, AuthError):
        log.warning("%s: %s", phase, safe(exc))
        return Failure(me, phase, "auth", grpc.StatusCode.PERMISSION_DENIED, safe(exc))
    if isinstance(exc, ProtocolError):
        log.warning("%s: %s", phase, safe(exc))
        return Failure(me, phase, "protocol", grpc.StatusCode.FAILED_PRECONDITION, safe(exc))
    log.warning("%s: %s", phase, safe(exc))
    return Failure(me, phase, "aborted", grpc.StatusCode.ABORTED, safe(exc))


def successor_failure(
    exc: grpc.RpcError, successor: str, address: str, downstream: frozenset[str]
) -> Failure:
    """A failed Relay to the ring successor: what it reported, if it may name that party
    (itself or a party after it), else the successor itself (unreachable or timed out)."""
    code = exc.code()
    md = failure_metadata(exc)
    who, kind = md.get(MD_PARTY, ""), md.get(MD_KIND, "")
    detail = safe(exc.details() or code.name)
    if who in downstream and kind in KINDS:
        return Failure(who, safe(md.get(MD_PHASE, "Relay"), 40), kind, code, detail)
    kind = "timeout" if code == grpc.StatusCode.DEADLINE_EXCEEDED else "unreachable"
    text = f"relay to {successor} at {safe(address, 100)} failed: {code.name}: {detail}"
    return Failure(successor, "Relay", kind, grpc.StatusCode.UNAVAILABLE, text)
