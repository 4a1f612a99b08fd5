"""Who is calling, and may they?  Server-side authentication, authorization and audit.

The TLS layer (:mod:`fedanon.security.tls`) already verified that the client certificate chains to
the federation CA.  :class:`AuthInterceptor` reads the identity out of that certificate and
checks it against a table of per-method policies before the servicer runs.  A method missing
from the table is refused: a new RPC cannot forget its check.  Every decision writes exactly
one line to the audit logger ``fedanon.audit`` (INFO when allowed, WARNING when denied):
decision, status code, method, identity, peer address, UTC time, reason.  Never any payload.

Checks that depend on a run's state (only the ring predecessor may Relay) are made by the
servicer with :func:`check_caller`, which audits denials the same way.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from cryptography import x509

from fedanon.errors import AuthError
from fedanon.security.certs import ROLES, Identity, identity_of

__all__ = [
    "AUDIT_LOGGER",
    "AuthInterceptor",
    "Identity",
    "Limit",
    "Policy",
    "authorize",
    "check_caller",
    "decide",
    "peer_identity",
    "run_once",
]

AUDIT_LOGGER = "fedanon.audit"
audit = logging.getLogger(AUDIT_LOGGER)


_UNSAFE = re.compile(r"[^A-Za-z0-9._:/\[\]@%+-]")  # keep key=value tokens unambiguous
_UNSAFE_TEXT = re.compile(r"[^ -~]|[\"\\]")  # free text: printable ASCII, no quote/backslash
_MAX_FIELD = 160


@dataclass(frozen=True)
class Policy:
    """Who may call a method: any of ``roles``, and, if ``names`` is set, only those names."""

    roles: frozenset[str]
    names: frozenset[str] | None = None

    @classmethod
    def of(cls, roles: Iterable[str], names: Iterable[str] | None = None) -> Policy:
        role_set = frozenset(roles)
        unknown = role_set - set(ROLES)
        if unknown:
            raise ValueError(f"unknown roles {sorted(unknown)}; expected a subset of {ROLES}")
        return cls(role_set, None if names is None else frozenset(names))


def _clean(text: str) -> str:
    """Make a client-influenced string safe for a one-line, key=value audit record."""
    return _UNSAFE.sub("?", text[:_MAX_FIELD]) or "-"


def _clean_text(text: str) -> str:
    return _UNSAFE_TEXT.sub("?", text[: _MAX_FIELD * 2])


def _auth_values(context: grpc.ServicerContext, key: str) -> list[bytes]:
    raw: Mapping[str, Any] = context.auth_context() or {}
    values = raw.get(key) or []
    if isinstance(values, bytes):
        values = [values]
    return [bytes(v) for v in values]


def peer_identity(context: grpc.ServicerContext) -> Identity:
    """The verified federation identity of the client of this RPC.

    Raises :class:`AuthError` if the connection carries no client certificate (plaintext
    port, TLS without client auth) or the certificate has no valid fedanon identity.
    """
    pems = _auth_values(context, "x509_pem_cert")
    if not pems:
        raise AuthError("no client certificate")
    return _identity_of_pem(bytes(pems[0]))


@functools.lru_cache(maxsize=256)
def _identity_of_pem(pem: bytes) -> Identity:
    """The identity in a (TLS-verified) certificate, parsed once per certificate: every RPC
    of a connection carries the same bytes (a failure is not cached: it raises)."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise AuthError("unparseable client certificate") from exc
    return identity_of(cert)


def authorize(
    identity: Identity | None, policy: Policy, method: str
) -> tuple[grpc.StatusCode | None, str]:
    """Pure decision: ``(None, "ok")`` if allowed, else ``(status code, reason)``."""
    if identity is None:
        return grpc.StatusCode.UNAUTHENTICATED, "no valid federation identity"
    if identity.role not in policy.roles:
        return grpc.StatusCode.PERMISSION_DENIED, f"role {identity.role} may not call {method}"
    if policy.names is not None and identity.name not in policy.names:
        return grpc.StatusCode.PERMISSION_DENIED, f"{identity.name} may not call {method}"
    return None, "ok"


def _audit(
    context: grpc.ServicerContext,
    method: str,
    identity: Identity | None,
    code: grpc.StatusCode | None,
    reason: str,
) -> None:
    try:
        peer = context.peer()
    except Exception:  # a peer address is nice to have, never worth failing the RPC
        peer = "?"
    fields = {
        "decision": "allow" if code is None else "deny",
        "code": "OK" if code is None else code.name,
        "method": method,
        "name": identity.name if identity else "-",
        "role": identity.role if identity else "-",
        "peer": peer,
        "time": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
    }
    line = (
        " ".join(f"{k}={_clean(v)}" for k, v in fields.items()) + f' reason="{_clean_text(reason)}"'
    )
    audit.log(logging.INFO if code is None else logging.WARNING, "%s", line)


def decide(
    context: grpc.ServicerContext, policy: Policy | None, method: str
) -> tuple[Identity | None, grpc.StatusCode | None, str]:
    """Identify the caller and decide (``policy`` None = method not in the table: deny).

    Writes one audit line; returns ``(identity, None, "ok")`` when allowed.
    """
    identity, code, reason = _judge(context, policy, method)
    _audit(context, method, identity, code, reason)
    return identity, code, reason


def _judge(
    context: grpc.ServicerContext, policy: Policy | None, method: str
) -> tuple[Identity | None, grpc.StatusCode | None, str]:
    """:func:`decide` without the audit line."""
    identity: Identity | None
    try:
        identity = peer_identity(context)
        why = ""
    except AuthError as exc:
        identity, why = None, str(exc)
    if policy is None:
        code: grpc.StatusCode | None = grpc.StatusCode.PERMISSION_DENIED
        reason = f"{method} is not in the authorization table"
    else:
        code, reason = authorize(identity, policy, method)
        if why:
            reason = f"{reason}: {why}"
    return identity, code, reason


def check_caller(context: grpc.ServicerContext, name: str, role: str, method: str) -> None:
    """Raise :class:`AuthError` unless the caller is exactly ``name`` with ``role``.

    For checks that depend on a run's state (made after :class:`AuthInterceptor` allowed
    the method); a denial writes an audit line, an allowed call was already audited.
    """
    try:
        identity: Identity | None = peer_identity(context)
    except AuthError:
        identity = None
    code, reason = authorize(identity, Policy.of({role}, {name}), method)
    if code is not None:
        _audit(context, method, identity, code, reason)
        raise AuthError(reason)


# ----------------------------------------------------------------------- interceptor

Behavior = Callable[[Any, grpc.ServicerContext], Any]
Release = Callable[[], None]
Check = Callable[[grpc.ServicerContext], Release | None]


def _guarded(behavior: Behavior | None, check: Check) -> Behavior:
    """A unary answer: ``check`` first, its release once the handler returned (its server
    thread is free then), whichever way it returned."""
    if behavior is None:
        raise ValueError("handler without behavior")

    def wrapped(request: Any, context: grpc.ServicerContext) -> Any:
        release = check(context)
        try:
            return behavior(request, context)
        finally:
            if release is not None:
                release()

    return wrapped


def _guarded_stream(behavior: Behavior | None, check: Check) -> Behavior:
    """A streamed answer: a generator, so ``check`` runs when gRPC first asks for a message
    (a stream never started holds nothing); its release runs when the stream ends -- all
    sent, failed, aborted, closed -- or when the call ends (cancelled, its deadline, the
    client gone) while gRPC is not inside the handler: a stream gRPC stops reading is not
    always closed at once."""
    if behavior is None:
        raise ValueError("handler without behavior")

    def wrapped(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        first = check(context)
        if first is None:
            yield from behavior(request, context)
            return
        release = run_once(first)
        inside = [True]  # the server thread is in the handler (not between messages)

        def ended() -> None:
            if not inside[0]:
                release()  # else the handler's own end releases it

        try:
            if not context.add_callback(ended):
                return  # the call ended already
            it = iter(behavior(request, context))
            while True:
                try:
                    item = next(it)
                except StopIteration:
                    return
                inside[0] = False
                yield item
                inside[0] = True
        finally:
            release()

    return wrapped


def run_once(fn: Release) -> Release:
    """``fn``, run by the first call only (a stream can end two ways at once)."""
    lock = threading.Lock()
    pending = [fn]

    def run() -> None:
        with lock:
            todo = pending[:]
            pending.clear()
        for f in todo:
            f()

    return run


def _rewrap(handler: grpc.RpcMethodHandler[Any, Any], check: Check) -> Any:
    """The same handler with ``check`` run first, built with grpc's public constructors."""
    kw = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(
            _guarded_stream(handler.stream_stream, check), **kw
        )
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(_guarded(handler.stream_unary, check), **kw)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(
            _guarded_stream(handler.unary_stream, check), **kw
        )
    return grpc.unary_unary_rpc_method_handler(_guarded(handler.unary_unary, check), **kw)


class AuthInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """Authenticate, authorize and audit every RPC by its full method name.

    ``table`` maps ``/package.Service/Method`` to a :class:`Policy`; any other method of a
    registered service is refused with PERMISSION_DENIED.  ``insecure`` (plaintext local
    experiments only) allows every listed method without an identity, still auditing it.
    ``limit`` (:class:`Limit`) bounds the calls each identity has in flight: one more is
    refused with RESOURCE_EXHAUSTED (audited; not a refusal that counts towards a lockout:
    a burst of an honest peer's calls must never lock it out).  Not in insecure mode, where
    no caller has an identity.
    """

    def __init__(
        self,
        table: Mapping[str, Policy],
        *,
        insecure: bool = False,
        watch: Watch | None = None,
        limit: Limit | None = None,
    ) -> None:
        self.table = dict(table)
        self.insecure = insecure
        self.watch = watch
        self.limit = limit

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = continuation(handler_call_details)
        method = str(handler_call_details.method)
        watch, limit = self.watch, self.limit
        if handler is None:  # unknown method: grpc answers UNIMPLEMENTED
            return None if watch is None else _unknown(watch, method)
        policy = self.table.get(method)

        def check(context: grpc.ServicerContext) -> Release | None:
            if watch is not None and (locked := watch.locked(context)) is not None:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, locked)
            if self.insecure and policy is not None:
                _audit(context, method, None, None, "insecure mode: no authentication")
                return None
            identity, code, reason = _judge(context, policy, method)
            if code is not None or identity is None:
                _audit(context, method, identity, code, reason)
                if watch is not None:
                    watch.refused(context, method, reason)
                context.abort(code or grpc.StatusCode.UNAUTHENTICATED, reason)
            entered = None if limit is None else limit.enter(identity)
            if isinstance(entered, str):
                _audit(context, method, identity, grpc.StatusCode.RESOURCE_EXHAUSTED, entered)
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, entered)
            _audit(context, method, identity, None, reason)
            return entered

        return _rewrap(handler, check)


class Limit(Protocol):
    """Calls in flight per identity (:class:`fedanon.party.peerlimit.PeerLimit`)."""

    def enter(self, who: Identity) -> Release | str:
        """A slot for one call of ``who`` -- its release, called once when the call no
        longer holds a server thread -- or why not (a message naming no data)."""
        ...


class Watch(Protocol):
    """Access analysis (:class:`fedanon.party.ledgered.LedgerGate`): peers locked out, and
    every refused call ledgered."""

    def locked(self, context: grpc.ServicerContext) -> str | None:
        """Why the caller is refused now, or None.  A lockout also sets its trailing metadata
        on ``context`` (:data:`fedanon.net.meta.MD_LOCKED_OUT`), which the abort carries: the
        leader tells a lockout from an authorization it lacks."""
        ...

    def refused(self, context: grpc.ServicerContext, method: str, reason: str) -> None: ...


def _unknown(watch: Watch, method: str) -> Any:
    """A method no service here serves: ledgered as a refused call, then UNIMPLEMENTED."""

    def refuse(_requests: Any, context: grpc.ServicerContext) -> Any:
        locked = watch.locked(context)
        if locked is not None:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, locked)
        watch.refused(context, _clean(method), "unknown method")
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")

    return grpc.stream_stream_rpc_method_handler(refuse)
