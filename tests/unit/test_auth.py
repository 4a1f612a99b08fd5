"""Peer identity, authorization decisions, audit lines, and the server interceptor."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fedanon.errors import AuthError
from fedanon.security import auth
from fedanon.security.auth import AUDIT_LOGGER, Identity, Policy

TIMEOUT = 10.0
RUN_ID = b"r" * 16


class Aborted(Exception):
    pass


class FakeContext:
    """Just enough of grpc.ServicerContext for require()."""

    def __init__(self, pem: bytes | None, peer: str = "ipv4:10.0.0.1:5000") -> None:
        self._auth: dict[str, list[bytes]] = {}
        if pem is not None:
            self._auth = {"x509_pem_cert": [pem], "transport_security_type": [b"ssl"]}
        self._peer = peer
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def auth_context(self) -> dict[str, list[bytes]]:
        return self._auth

    def peer(self) -> str:
        return self._peer

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted = (code, details)
        raise Aborted(details)


def _pem(pki: Path, name: str) -> bytes:
    return (pki / f"{name}.pem").read_bytes()


def _audit(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]


# ------------------------------------------------------------------- unit: fake context


def test_peer_identity(pki: Path) -> None:
    assert auth.peer_identity(FakeContext(_pem(pki, "alice"))) == Identity("alice", "party")
    assert auth.peer_identity(FakeContext(_pem(pki, "leader"))) == Identity("leader", "leader")
    with pytest.raises(AuthError, match="no client certificate"):
        auth.peer_identity(FakeContext(None))
    with pytest.raises(AuthError, match="unparseable"):
        auth.peer_identity(FakeContext(b"-----BEGIN CERTIFICATE-----\nAAAA\n"))


def test_decide_allows(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    ctx = FakeContext(_pem(pki, "leader"))
    ident, code, _ = auth.decide(ctx, Policy.of({"leader"}), "/fedanon.v1.Party/Finish")
    assert ident == Identity("leader", "leader") and code is None
    [line] = _audit(caplog)
    assert line.startswith("decision=allow code=OK method=/fedanon.v1.Party/Finish name=leader")


def test_decide_unauthenticated(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    ident, code, _ = auth.decide(FakeContext(None), Policy.of({"leader", "party"}), "/m")
    assert ident is None and code == grpc.StatusCode.UNAUTHENTICATED
    [line] = _audit(caplog)
    assert "decision=deny code=UNAUTHENTICATED" in line and "name=- role=-" in line


def test_method_not_in_the_table_is_denied(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    _, code, reason = auth.decide(FakeContext(_pem(pki, "leader")), None, "/fedanon.v1.Party/New")
    assert code == grpc.StatusCode.PERMISSION_DENIED and "authorization table" in reason
    assert "decision=deny" in _audit(caplog)[-1]


def _dns_only_cert_pem(name: str) -> bytes:
    """A self-signed certificate naming ``name`` but carrying no fedanon role."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def test_decide_rejects_certificate_without_role() -> None:
    _, code, reason = auth.decide(
        FakeContext(_dns_only_cert_pem("alice")), Policy.of({"party"}), "/m"
    )
    assert code == grpc.StatusCode.UNAUTHENTICATED and "role URI" in reason


def test_decide_names_and_roles(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    only_alice = Policy.of({"party"}, {"alice"})
    assert auth.decide(FakeContext(_pem(pki, "bob")), only_alice, "/m")[1] == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    assert auth.decide(FakeContext(_pem(pki, "bob")), Policy.of({"leader"}), "/m")[1] == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    ident, code, _ = auth.decide(FakeContext(_pem(pki, "alice")), only_alice, "/m")
    assert code is None and ident is not None and ident.name == "alice"
    assert len(_audit(caplog)) == 3


def test_check_caller_audits_denials_only(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    auth.check_caller(FakeContext(_pem(pki, "alice")), "alice", "party", "/fedanon.v1.Party/Relay")
    assert _audit(caplog) == []
    with pytest.raises(AuthError, match="bob may not call"):
        auth.check_caller(FakeContext(_pem(pki, "bob")), "alice", "party", "/p/Relay")
    [line] = _audit(caplog)
    assert "decision=deny" in line and "name=bob" in line and "method=/p/Relay" in line


def test_audit_line_is_one_sanitized_line(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    ctx = FakeContext(_pem(pki, "bob"), peer="ipv4:1.2.3.4:5\nname=leader role=leader")
    auth.decide(ctx, Policy.of({"leader"}), "/x\n/y")
    [line] = _audit(caplog)
    assert "\n" not in line and line.count("name=") == 1 and "role=leader" not in line


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="unknown roles"):
        Policy.of({"admin"})
    assert Policy.of(["party"], ["alice"]) == Policy(frozenset({"party"}), frozenset({"alice"}))
    code, _ = auth.authorize(None, Policy.of(["party"]), "/m")
    assert code == grpc.StatusCode.UNAUTHENTICATED
    code, _ = auth.authorize(Identity("a", "party"), Policy.of(["party"]), "/m")
    assert code is None


# ------------------------------------------------------- the interceptor on a real server


def _echo(request: bytes, context: Any) -> bytes:
    return request


def _echo_stream(requests: Any, context: Any) -> Any:
    yield from requests


@pytest.fixture(scope="module")
def server(pki: Path) -> Any:
    """An mTLS server with three methods, two of them in the interceptor's table."""
    from concurrent import futures

    from fedanon.security.tls import TlsMaterial

    table = {
        "/t.Echo/Listed": Policy.of({"leader"}, {"leader"}),
        "/t.Echo/Stream": Policy.of({"party"}),
    }
    srv = grpc.server(futures.ThreadPoolExecutor(4), interceptors=[auth.AuthInterceptor(table)])
    handlers = {
        "Listed": grpc.unary_unary_rpc_method_handler(_echo),
        "Unlisted": grpc.unary_unary_rpc_method_handler(_echo),
        "Stream": grpc.stream_stream_rpc_method_handler(_echo_stream),
    }
    srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.Echo", handlers),))
    tls = TlsMaterial.load(pki / "ca.pem", pki / "alice.pem", pki / "alice.key")
    port = srv.add_secure_port("127.0.0.1:0", tls.server_credentials())
    srv.start()
    yield port
    srv.stop(0)


def _channel(pki: Path, name: str, port: int) -> grpc.Channel:
    from fedanon.security.tls import TlsMaterial

    tls = TlsMaterial.load(pki / "ca.pem", pki / f"{name}.pem", pki / f"{name}.key")
    return tls.channel(f"127.0.0.1:{port}", expected_name="alice")


def test_interceptor_checks_every_method(
    pki: Path, server: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    with _channel(pki, "leader", server) as chan:
        assert chan.unary_unary("/t.Echo/Listed")(b"hi", timeout=TIMEOUT) == b"hi"
        # a method the table forgot is refused, not served
        with pytest.raises(grpc.RpcError) as err:
            chan.unary_unary("/t.Echo/Unlisted")(b"hi", timeout=TIMEOUT)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # streaming handlers are wrapped too: the leader may not call a party-only method
        with pytest.raises(grpc.RpcError) as err:
            list(chan.stream_stream("/t.Echo/Stream")(iter([b"a"]), timeout=TIMEOUT))
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with _channel(pki, "bob", server) as chan:
        assert list(chan.stream_stream("/t.Echo/Stream")(iter([b"a", b"b"]), timeout=TIMEOUT)) == [
            b"a",
            b"b",
        ]
        with pytest.raises(grpc.RpcError) as err:
            chan.unary_unary("/t.Echo/Listed")(b"hi", timeout=TIMEOUT)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    lines = _audit(caplog)
    assert len(lines) == 5
    assert "decision=allow" in lines[0] and "method=/t.Echo/Listed" in lines[0]
    assert "method=/t.Echo/Unlisted" in lines[1] and "authorization table" in lines[1]
    assert "name=bob role=party" in lines[3] and "decision=allow" in lines[3]


def test_party_table_covers_every_rpc_of_the_service() -> None:
    from fedanon.party.service import method_policies
    from fedanon.pb.fedanon.v1 import party_pb2 as pb

    table = method_policies("leader")
    service = pb.DESCRIPTOR.services_by_name["Party"]
    for m in service.methods:
        assert f"/{service.full_name}/{m.name}" in table, m.name
    leader_only = {k for k, v in table.items() if v.roles == frozenset({"leader"})}
    assert all(table[k].names == frozenset({"leader"}) for k in leader_only)
    assert table["/fedanon.v1.Party/Relay"].roles == frozenset({"party", "leader"})
