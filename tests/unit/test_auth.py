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

from common import auth, certs
from common.auth import AUDIT_LOGGER, Identity, Policy
from common.errors import AuthError

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


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pki")
    certs.init_ca(root)
    for name, role in [("alice", "party"), ("bob", "party"), ("leader", "leader")]:
        certs.issue(root, name, role)
    return root


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


def test_require_allows(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    ctx = FakeContext(_pem(pki, "leader"))
    ident = auth.require(ctx, allowed_roles={"leader"}, method="/fedanon.v1.Party/Finish")
    assert ident == Identity("leader", "leader") and ctx.aborted is None
    [line] = _audit(caplog)
    assert line.startswith("decision=allow code=OK method=/fedanon.v1.Party/Finish name=leader")


def test_require_unauthenticated(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    ctx = FakeContext(None)
    with pytest.raises(Aborted):
        auth.require(ctx, allowed_roles={"leader", "party"})
    assert ctx.aborted is not None and ctx.aborted[0] == grpc.StatusCode.UNAUTHENTICATED
    [line] = _audit(caplog)
    assert "decision=deny code=UNAUTHENTICATED" in line and "name=- role=-" in line


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


def test_require_rejects_certificate_without_role() -> None:
    ctx = FakeContext(_dns_only_cert_pem("alice"))
    with pytest.raises(Aborted):
        auth.require(ctx, allowed_roles={"party"})
    assert ctx.aborted is not None and ctx.aborted[0] == grpc.StatusCode.UNAUTHENTICATED
    assert "role URI" in ctx.aborted[1]


def test_require_names_and_roles(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    bob = FakeContext(_pem(pki, "bob"))
    with pytest.raises(Aborted):
        auth.require(bob, allowed_roles={"party"}, allowed_names={"alice"})
    assert bob.aborted is not None and bob.aborted[0] == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(Aborted):
        auth.require(FakeContext(_pem(pki, "bob")), allowed_roles={"leader"})
    alice = auth.require(
        FakeContext(_pem(pki, "alice")), allowed_roles={"party"}, allowed_names={"alice"}
    )
    assert alice.name == "alice"
    assert len(_audit(caplog)) == 3


def test_method_name_from_servicer_method(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)

    def Instruct(ctx: Any) -> None:  # named like the servicer method
        auth.require(ctx, allowed_roles={"leader"})

    Instruct(FakeContext(_pem(pki, "leader")))
    assert "method=/fedanon.v1.Party/Instruct " in _audit(caplog)[-1]


def test_audit_line_is_one_sanitized_line(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    ctx = FakeContext(_pem(pki, "bob"), peer="ipv4:1.2.3.4:5\nname=leader role=leader")
    with pytest.raises(Aborted):
        auth.require(ctx, allowed_roles={"leader"}, method="/x\n/y")
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
