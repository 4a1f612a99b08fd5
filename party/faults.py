"""What went wrong in a party, as the leader is told: the party named, the RPC, the kind.

One classification for both paths a failure takes: an RPC answered with an error (status code
plus ``fedanon-*`` trailing metadata, :mod:`fedanon.party.service`) and a failure of the background
relay worker, recorded in the run and reported by the ``Status`` RPC.  Texts are sanitized
here; a record value never reaches them.

A failure that depends on the hospital's data (:class:`DataRefused`: anything raised while
Prepare reads and encodes the table; any :class:`~fedanon.errors.DataError`) tells the leader
one fixed sentence -- this hospital's data does not fit the spec -- and nothing else: no
column, line, row, value or count, the same kind, code, phase and metadata whatever the
record.  The leader chooses the domains, taxonomies and ``values``; a line number of the first
failing record would answer a question about that record (issue 24).  The full detail (file,
line, column, what was expected; never the value) stays in this hospital's own log.  Errors
that depend only on the spec or the policy keep their detail (a policy refusal names its line).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import grpc

from fedanon.errors import (
    AuthError,
    DataError,
    FedanonError,
    InputError,
    ProtocolError,
    RunAborted,
)
from fedanon.logsafe import safe
from fedanon.net.rpc import KINDS, MD_KIND, MD_PARTY, MD_PHASE, failure_metadata
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


class DataRefused(InputError):
    """Prepare could not use this hospital's table for the leader's spec (``cause`` says why,
    for the local log only)."""

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        super().__init__("the data does not fit the spec")


DATA_LOG_MARKER = "the data does not fit the spec: "  # the local log line (fedanon federate)


def data_refusal(me: str) -> str:
    """The only thing the leader learns of a data-dependent refusal."""
    return f"{me}'s data does not fit the spec (the hospital's own log says why)"


def logged_refusal(log_file: Path) -> str | None:
    """Where the last data refusal a daemon logged was (file, line, column; never a value):
    ``fedanon federate`` adds it to the leader's message, since its user holds every table."""
    try:
        lines = log_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    found = [ln.split(DATA_LOG_MARKER, 1)[1] for ln in lines if DATA_LOG_MARKER in ln]
    return found[-1] if found else None


def local_detail(exc: BaseException) -> str:
    """What this hospital logs about a data-dependent failure: where and what was expected,
    never the offending value (an unexpected exception: its type only, its text may hold one)."""
    if isinstance(exc, InputError):
        return safe(
            InputError(
                exc.message, file=exc.file, line=exc.line, column=exc.column, expected=exc.expected
            )
        )
    if isinstance(exc, FedanonError):
        return safe(exc)
    return f"{type(exc).__name__} (unexpected)"


def is_abort(exc: BaseException) -> bool:
    """Whether ``exc`` is what ``grpc.ServicerContext.abort`` raises (a bare ``Exception``):
    the status is already set, so it must pass through unchanged."""
    return type(exc) is Exception and not exc.args


def unexpected(exc: BaseException, me: str, phase: str) -> Failure:
    """An exception outside the error hierarchy (a bug, MemoryError, ...). Its text may quote a
    record value, so neither the log nor the leader sees it: the log gets its type and where it
    was raised, the leader a fixed sentence (gRPC's default would send ``str(exc)``)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else ""
    log.error("%s: unexpected %s%s (its text is not logged)", phase, type(exc).__name__, where)
    detail = f"{me} failed during {phase} (an internal error; the hospital's log says where)"
    return Failure(me, phase, "aborted", grpc.StatusCode.INTERNAL, detail)


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
    if isinstance(exc, DataRefused | DataError):
        cause = exc.cause if isinstance(exc, DataRefused) else exc
        log.error("%s: %s%s", phase, DATA_LOG_MARKER, local_detail(cause))
        return Failure(me, phase, "input", grpc.StatusCode.INVALID_ARGUMENT, data_refusal(me))
    if isinstance(exc, InputError):
        # the leader's spec or taxonomies (data never reaches here): line and column locate
        # the problem in the leader's own text; a file path stays in the local log
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
