"""Who is calling, and may they?  Server-side authentication and authorization.

The TLS layer (:mod:`common.tls`) already verified that the client certificate chains to
the federation CA.  This module reads the identity out of that certificate and checks it
against a per-method policy.  Every decision writes exactly one line to the audit logger
``fedanon.audit`` (INFO when allowed, WARNING when denied): decision, status code, method,
identity, peer address, UTC time, reason.  Never any payload.

Use it first thing in each servicer method: ``ident = require(context, allowed_roles={"leader"})``.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import sys
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from cryptography import x509

from common.certs import ROLES, Identity, identity_of
from common.errors import AuthError
from common.pb.fedanon.v1 import party_pb2 as pb

__all__ = [
    "AUDIT_LOGGER",
    "Identity",
    "Policy",
    "authorize",
    "peer_identity",
    "require",
]

AUDIT_LOGGER = "fedanon.audit"
audit = logging.getLogger(AUDIT_LOGGER)


_UNSAFE = re.compile(r"[^A-Za-z0-9._:/\[\]@%+-]")  # keep key=value tokens unambiguous
_UNSAFE_TEXT = re.compile(r"[^ -~]|[\"\\]")  # free text: printable ASCII, no quote/backslash
_PARTY = pb.DESCRIPTOR.services_by_name["Party"]
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
    try:
        cert = x509.load_pem_x509_certificate(pems[0])
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


def _method_of(context: object, caller: str) -> str:
    """Best effort full method name for the audit line of :func:`require`.

    grpc does not expose it on the servicer context.  Generic handlers leave it in a private
    attribute; for generated (registered) handlers it is derived from the name of the
    servicer method that called :func:`require` (``Prepare`` -> ``/fedanon.v1.Party/Prepare``).
    Pass ``method=`` explicitly to avoid the guesswork.
    """
    raw = getattr(
        getattr(getattr(context, "_rpc_event", None), "call_details", None), "method", b""
    )
    name = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")
    if name:
        return name
    if caller in _PARTY.methods_by_name:
        return f"/{_PARTY.full_name}/{caller}"
    return caller or "?"


def _decide(
    context: grpc.ServicerContext,
    policy: Policy,
    method: str,
) -> tuple[Identity | None, grpc.StatusCode | None, str]:
    identity: Identity | None
    try:
        identity = peer_identity(context)
        why = ""
    except AuthError as exc:
        identity, why = None, str(exc)
    code, reason = authorize(identity, policy, method)
    if why:
        reason = f"{reason}: {why}"
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
    return identity, code, reason


def require(
    context: grpc.ServicerContext,
    *,
    allowed_roles: Collection[str],
    allowed_names: Collection[str] | None = None,
    method: str | None = None,
) -> Identity:
    """Return the caller's identity, or abort the RPC (sync server).

    Aborts with UNAUTHENTICATED if there is no valid identity, PERMISSION_DENIED if the role
    is not in ``allowed_roles`` or (when given) the name not in ``allowed_names``.  Writes one
    audit line either way.  ``method`` is only for the audit line; it is looked up if omitted.
    """
    policy = Policy.of(allowed_roles, allowed_names)
    method = method or _method_of(context, sys._getframe(1).f_code.co_name)
    identity, code, reason = _decide(context, policy, method)
    if code is not None or identity is None:
        context.abort(code or grpc.StatusCode.UNAUTHENTICATED, reason)
    return identity
