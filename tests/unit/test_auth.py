"""Peer identity, authorization decisions, audit lines, and the server interceptor."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from common import auth, certs, tls
from common.auth import AUDIT_LOGGER, AuthInterceptor, Identity, Policy
from common.errors import AuthError
from common.pb.fedanon.v1 import party_pb2 as pb
from common.pb.fedanon.v1 import party_pb2_grpc
from common.rpc import call, decode_mix, decode_vector, encode_blobs, encode_mix, encode_vector

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


class AsyncFakeContext(FakeContext):
    async def abort(self, code: grpc.StatusCode, details: str) -> None:  # type: ignore[override]
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


def test_require_aio(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)

    async def Abort(ctx: Any) -> Identity:
        return await auth.require_aio(ctx, allowed_roles={"leader"})

    assert asyncio.run(Abort(AsyncFakeContext(_pem(pki, "leader")))).name == "leader"
    bob = AsyncFakeContext(_pem(pki, "bob"))
    with pytest.raises(Aborted):
        asyncio.run(Abort(bob))
    assert bob.aborted is not None and bob.aborted[0] == grpc.StatusCode.PERMISSION_DENIED
    lines = _audit(caplog)
    assert len(lines) == 2 and all("method=/fedanon.v1.Party/Abort " in x for x in lines)


# ------------------------------------------------------------- interceptor, real server


class PlainServicer(party_pb2_grpc.PartyServicer):
    """No authorization code at all: the interceptor does it."""

    def Prepare(self, request: pb.PrepareRequest, context: grpc.ServicerContext) -> pb.PrepareReply:
        return pb.PrepareReply(name="alice")

    def Instruct(self, request: pb.Instruction, context: grpc.ServicerContext) -> pb.Ack:
        return pb.Ack(ok=True)

    def Relay(self, request_iterator: Iterator[pb.VectorChunk], context: Any) -> pb.Ack:
        decode_vector(request_iterator)
        return pb.Ack(ok=True)

    def Collect(self, request: pb.CollectRequest, context: Any) -> Iterator[pb.VectorChunk]:
        vec = np.arange(5, dtype=np.uint64)
        return encode_vector(vec, run_id=RUN_ID, round=1, phase=pb.PHASE_SPLIT, layout_hash=b"")

    def Mix(self, request_iterator: Iterator[pb.MixChunk], context: Any) -> Iterator[pb.Blob]:
        _, blobs = decode_mix(request_iterator)
        return encode_blobs(reversed(blobs))


POLICIES = {
    "/fedanon.v1.Party/Prepare": Policy.of(["leader"]),
    "/fedanon.v1.Party/Relay": Policy.of(["party"], ["bob"]),
    "/fedanon.v1.Party/Collect": Policy.of(["leader"]),
    "/fedanon.v1.Party/Mix": Policy.of(["leader"]),
}


@pytest.fixture(scope="module")
def server(pki: Path) -> Iterator[Callable[[str], grpc.Channel]]:
    srv = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=tls.server_options(),
        interceptors=[AuthInterceptor(POLICIES)],
    )
    party_pb2_grpc.add_PartyServicer_to_server(PlainServicer(), srv)
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), srv)
    mat = tls.TlsMaterial.load(pki / "ca.pem", pki / "alice.pem", pki / "alice.key")
    port = tls.add_secure_port(srv, "127.0.0.1:0", mat.server_credentials())
    srv.start()

    def connect(name: str) -> grpc.Channel:
        client = tls.TlsMaterial.load(pki / "ca.pem", pki / f"{name}.pem", pki / f"{name}.key")
        return client.channel(f"127.0.0.1:{port}", expected_name="alice")

    yield connect
    srv.stop(None)


def _code(fn: Callable[[], object]) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        fn()
    return info.value.code()


def test_interceptor_unary(server: Callable[[str], grpc.Channel], caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    with server("leader") as chan:
        assert call(party_pb2_grpc.PartyStub(chan).Prepare, pb.PrepareRequest()).name == "alice"
    with server("bob") as chan:
        stub = party_pb2_grpc.PartyStub(chan)
        assert _code(lambda: call(stub.Prepare, pb.PrepareRequest())) == (
            grpc.StatusCode.PERMISSION_DENIED
        )
    lines = _audit(caplog)
    assert len(lines) == 2
    assert "decision=allow" in lines[0] and "method=/fedanon.v1.Party/Prepare" in lines[0]
    assert "decision=deny" in lines[1] and "name=bob" in lines[1]


def test_interceptor_denies_methods_without_policy(server: Callable[[str], grpc.Channel]) -> None:
    with server("leader") as chan:
        stub = party_pb2_grpc.PartyStub(chan)
        assert _code(lambda: call(stub.Instruct, pb.Instruction())) == (
            grpc.StatusCode.PERMISSION_DENIED
        )


def test_interceptor_streams(server: Callable[[str], grpc.Channel]) -> None:
    vec = np.arange(200_000, dtype=np.uint64)  # > 1 MiB: several chunks

    def relay() -> Iterator[pb.VectorChunk]:
        return encode_vector(vec, run_id=RUN_ID, round=1, phase=pb.PHASE_SPLIT, layout_hash=b"")

    with server("bob") as chan:
        assert call(party_pb2_grpc.PartyStub(chan).Relay, relay(), timeout=TIMEOUT).ok
    with server("alice") as chan:  # a party, but not the ring predecessor
        stub = party_pb2_grpc.PartyStub(chan)
        assert _code(lambda: call(stub.Relay, relay())) == grpc.StatusCode.PERMISSION_DENIED
    with server("leader") as chan:
        stub = party_pb2_grpc.PartyStub(chan)
        _, got = decode_vector(call(stub.Collect, pb.CollectRequest(), timeout=TIMEOUT))
        assert got.tolist() == [0, 1, 2, 3, 4]
        mix = encode_mix([b"a", b"b", b"c"], run_id=RUN_ID, hop=0, expected_count=3)
        out = [b.data for b in call(stub.Mix, mix, timeout=TIMEOUT)]
        assert out == [b"c", b"b", b"a"]
    with server("bob") as chan:
        stub = party_pb2_grpc.PartyStub(chan)
        mix = encode_mix([b"a"], run_id=RUN_ID, hop=0, expected_count=1)
        assert _code(lambda: list(call(stub.Mix, mix))) == grpc.StatusCode.PERMISSION_DENIED
        assert _code(lambda: list(call(stub.Collect, pb.CollectRequest()))) == (
            grpc.StatusCode.PERMISSION_DENIED
        )


def test_health_is_exempt(server: Callable[[str], grpc.Channel], caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    with server("bob") as chan:
        reply = health_pb2_grpc.HealthStub(chan).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    assert _audit(caplog) == []
