"""Mutual TLS end to end: a real in-process gRPC server on 127.0.0.1 with the Party service."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import pytest

from fedanon.errors import ConfigError
from fedanon.net.rpc import call, decode_vector, encode_vector
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc
from fedanon.security import certs, tls
from fedanon.security.auth import AUDIT_LOGGER, AuthInterceptor, Policy, peer_identity

TIMEOUT = 10.0
RUN_ID = bytes(range(16))


@dataclass
class Pki:
    root: Path  # federation CA with alice, bob (parties) and leader
    other: Path  # an unrelated CA with its own "leader" and "alice"

    def material(self, name: str, *, other: bool = False) -> tls.TlsMaterial:
        d = self.other if other else self.root
        return tls.TlsMaterial.load(d / "ca.pem", d / f"{name}.pem", d / f"{name}.key")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    base = tmp_path_factory.mktemp("pki")
    root, other = base / "root", base / "other"
    certs.init_ca(root)
    for name, role in [("alice", "party"), ("bob", "party"), ("leader", "leader")]:
        certs.issue(root, name, role)
    certs.init_ca(other, common_name="some other CA")
    certs.issue(other, "leader", "leader")
    certs.issue(other, "alice", "party")
    return Pki(root, other)


class Servicer(party_pb2_grpc.PartyServicer):
    def __init__(self) -> None:
        self.calls = 0
        self.received: np.ndarray | None = None

    def Prepare(self, request: pb.PrepareRequest, context: grpc.ServicerContext) -> pb.PrepareReply:
        self.calls += 1
        return pb.PrepareReply(run_hash=b"\x01" * 32, name=peer_identity(context).name)

    def Relay(
        self, request_iterator: Iterator[pb.VectorChunk], context: grpc.ServicerContext
    ) -> pb.Ack:
        _, self.received = decode_vector(request_iterator, run_id=RUN_ID)
        return pb.Ack(ok=True)

    def Collect(
        self, request: pb.CollectRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.VectorChunk]:
        assert self.received is not None
        return encode_vector(
            self.received,
            run_id=request.run_id,
            round=request.round,
            phase=request.phase,
            layout_hash=b"L",
        )


@dataclass
class Server:
    address: str
    servicer: Servicer


# checked by the interceptor before the servicer runs (as in the party daemon)
TABLE = {
    "/fedanon.v1.Party/Prepare": Policy.of({"leader"}),
    "/fedanon.v1.Party/Relay": Policy.of({"party"}, {"alice"}),
    "/fedanon.v1.Party/Collect": Policy.of({"leader"}),
}


def _start(
    creds: grpc.ServerCredentials | None, *, insecure_auth: bool = False
) -> tuple[grpc.Server, Server]:
    servicer = Servicer()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=tls.server_options(),
        interceptors=[AuthInterceptor(TABLE, insecure=insecure_auth)],
    )
    party_pb2_grpc.add_PartyServicer_to_server(servicer, server)
    if creds is None:
        port = tls.add_insecure_port(server, "127.0.0.1:0")
    else:
        port = tls.add_secure_port(server, "127.0.0.1:0", creds)
    server.start()
    return server, Server(f"127.0.0.1:{port}", servicer)


@pytest.fixture(scope="module")
def alice_server(pki: Pki) -> Iterator[Server]:
    server, info = _start(pki.material("alice").server_credentials())
    yield info
    server.stop(None)


def _rpc_error(fn: Callable[[], object]) -> grpc.RpcError:
    """The RpcError ``fn`` raises (fails the test if it raises none)."""
    with pytest.raises(grpc.RpcError) as info:
        fn()
    return info.value


def _prepare(chan: grpc.Channel) -> pb.PrepareReply:
    stub = party_pb2_grpc.PartyStub(chan)
    return call(stub.Prepare, pb.PrepareRequest(run_id=RUN_ID), timeout=TIMEOUT)


def test_good_client(pki: Pki, alice_server: Server) -> None:
    before = alice_server.servicer.calls
    with pki.material("leader").channel(alice_server.address, expected_name="alice") as chan:
        reply = _prepare(chan)
    assert reply.name == "leader"
    assert alice_server.servicer.calls == before + 1


def test_module_level_channel_function(pki: Pki, alice_server: Server) -> None:
    r = pki.root
    with tls.channel(
        alice_server.address, r / "ca.pem", r / "leader.pem", r / "leader.key", "alice"
    ) as chan:
        assert _prepare(chan).name == "leader"


def test_client_without_certificate_is_rejected(pki: Pki, alice_server: Server) -> None:
    before = alice_server.servicer.calls
    creds = grpc.ssl_channel_credentials(root_certificates=(pki.root / "ca.pem").read_bytes())
    with grpc.secure_channel(alice_server.address, creds, tls.channel_options("alice")) as chan:
        info = _rpc_error(lambda: _prepare(chan))
    assert info.code() == grpc.StatusCode.UNAVAILABLE
    assert alice_server.servicer.calls == before


def test_client_from_other_ca_is_rejected(pki: Pki, alice_server: Server) -> None:
    before = alice_server.servicer.calls
    # Trusts the right CA (so the server is accepted) but presents a foreign certificate.
    o = pki.other
    with tls.channel(
        alice_server.address, pki.root / "ca.pem", o / "leader.pem", o / "leader.key", "alice"
    ) as chan:
        info = _rpc_error(lambda: _prepare(chan))
    assert info.code() == grpc.StatusCode.UNAVAILABLE
    assert alice_server.servicer.calls == before


def test_wrong_role_is_denied_and_audited(
    pki: Pki, alice_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    before = alice_server.servicer.calls
    with pki.material("bob").channel(alice_server.address, expected_name="alice") as chan:
        info = _rpc_error(lambda: _prepare(chan))
    assert info.code() == grpc.StatusCode.PERMISSION_DENIED
    assert alice_server.servicer.calls == before
    lines = [r for r in caplog.records if r.name == AUDIT_LOGGER]
    assert len(lines) == 1
    line = lines[0].getMessage()
    assert lines[0].levelno == logging.WARNING
    for part in (
        "decision=deny",
        "code=PERMISSION_DENIED",
        "method=/fedanon.v1.Party/Prepare",
        "name=bob",
        "role=party",
        "time=",
        "peer=ipv4:127.0.0.1:",
    ):
        assert part in line, line
    assert RUN_ID.hex() not in line


def test_allowed_call_is_audited_once(
    pki: Pki, alice_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    with pki.material("leader").channel(alice_server.address, expected_name="alice") as chan:
        _prepare(chan)
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert len(lines) == 1 and "decision=allow" in lines[0] and "name=leader" in lines[0]


def test_wrong_server_identity_is_rejected_by_client(pki: Pki, alice_server: Server) -> None:
    before = alice_server.servicer.calls
    with pki.material("leader").channel(alice_server.address, expected_name="bob") as chan:
        info = _rpc_error(lambda: _prepare(chan))
    assert info.code() == grpc.StatusCode.UNAVAILABLE
    assert alice_server.servicer.calls == before


def test_server_from_other_ca_is_rejected_by_client(pki: Pki) -> None:
    # An impostor "alice" certified by another CA, accepting our clients.
    o = pki.other
    creds = tls.server_credentials(pki.root / "ca.pem", o / "alice.pem", o / "alice.key")
    server, info = _start(creds)
    try:
        with pki.material("leader").channel(info.address, expected_name="alice") as chan:
            err = _rpc_error(lambda: _prepare(chan))
        assert err.code() == grpc.StatusCode.UNAVAILABLE
        assert info.servicer.calls == 0
    finally:
        server.stop(None)


def test_large_vector_relay_and_collect(pki: Pki, alice_server: Server) -> None:
    rng = np.random.default_rng(7)
    vec = rng.integers(0, np.iinfo(np.uint64).max, size=600_000, dtype=np.uint64, endpoint=True)
    chunks = encode_vector(vec, run_id=RUN_ID, round=3, phase=pb.PHASE_COUNTS, layout_hash=b"L")
    with pki.material("alice").channel(alice_server.address, expected_name="alice") as chan:
        ack = call(party_pb2_grpc.PartyStub(chan).Relay, chunks, timeout=TIMEOUT)
    assert ack.ok
    assert alice_server.servicer.received is not None
    assert np.array_equal(alice_server.servicer.received, vec)
    with pki.material("leader").channel(alice_server.address, expected_name="alice") as chan:
        stream = call(
            party_pb2_grpc.PartyStub(chan).Collect,
            pb.CollectRequest(run_id=RUN_ID, round=3, phase=pb.PHASE_COUNTS),
            timeout=TIMEOUT,
        )
        header, back = decode_vector(stream, run_id=RUN_ID, round=3, layout_hash=b"L")
    assert header.total_len == vec.size
    assert np.array_equal(back, vec)


def test_relay_from_unlisted_party_is_denied(pki: Pki, alice_server: Server) -> None:
    vec = np.arange(10, dtype=np.uint64)
    chunks = encode_vector(vec, run_id=RUN_ID, round=1, phase=pb.PHASE_SPLIT, layout_hash=b"")
    with pki.material("bob").channel(alice_server.address, expected_name="alice") as chan:
        relay = party_pb2_grpc.PartyStub(chan).Relay
        info = _rpc_error(lambda: call(relay, chunks, timeout=TIMEOUT))
    assert info.code() == grpc.StatusCode.PERMISSION_DENIED


def test_insecure_is_loud_and_unauthenticated(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    server, info = _start(None)
    try:
        with tls.insecure_channel(info.address) as chan:
            err = _rpc_error(lambda: _prepare(chan))
    finally:
        server.stop(None)
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED
    warnings = [r.getMessage() for r in caplog.records if r.name == "fedanon.security.tls"]
    assert any("INSECURE server port" in w for w in warnings)
    assert any("INSECURE channel" in w for w in warnings)
    audit = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert len(audit) == 1 and "code=UNAUTHENTICATED" in audit[0]


def test_insecure_mode_lets_anyone_call_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """The party daemon's --insecure: plaintext port, interceptor in insecure mode."""
    caplog.set_level(logging.INFO)
    server, info = _start(None, insecure_auth=True)
    vec = np.arange(5, dtype=np.uint64)
    chunks = encode_vector(vec, run_id=RUN_ID, round=1, phase=pb.PHASE_SPLIT, layout_hash=b"")
    try:
        with tls.insecure_channel(info.address) as chan:
            ack = call(party_pb2_grpc.PartyStub(chan).Relay, chunks, timeout=TIMEOUT)
    finally:
        server.stop(None)
    assert ack.ok and info.servicer.received is not None
    assert np.array_equal(info.servicer.received, vec)
    warnings = [r.getMessage() for r in caplog.records if r.name == "fedanon.security.tls"]
    assert any("INSECURE server port" in w and "lets anyone call" in w for w in warnings)
    audit = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert len(audit) == 1 and "insecure mode" in audit[0]


def test_channel_options() -> None:
    opts = dict(tls.channel_options("alice"))
    assert opts["grpc.ssl_target_name_override"] == "alice"
    assert opts["grpc.max_send_message_length"] == 8 * 1024 * 1024
    assert opts["grpc.max_receive_message_length"] == 8 * 1024 * 1024
    assert (
        opts["grpc.keepalive_time_ms"]
        > dict(tls.server_options())["grpc.http2.min_ping_interval_without_data_ms"]
    )
    custom = dict(tls.channel_options("alice", [("grpc.max_receive_message_length", 1)]))
    assert custom["grpc.max_receive_message_length"] == 1
    with pytest.raises(ConfigError):
        tls.channel_options("alice", [("grpc.ssl_target_name_override", "bob")])
    with pytest.raises(ConfigError):
        tls.channel_options("Not A Name")


def test_material_load_errors(pki: Pki, tmp_path: Path) -> None:
    r = pki.root
    with pytest.raises(ConfigError, match="cannot read"):
        tls.TlsMaterial.load(r / "ca.pem", r / "nobody.pem", r / "nobody.key")
    with pytest.raises(ConfigError, match="does not match"):
        tls.TlsMaterial.load(r / "ca.pem", r / "alice.pem", r / "bob.key")
    with pytest.raises(ConfigError, match="not issued"):
        tls.TlsMaterial.load(pki.other / "ca.pem", r / "alice.pem", r / "alice.key")
    junk = tmp_path / "junk.pem"
    junk.write_text("hello")
    with pytest.raises(ConfigError, match="not PEM"):
        tls.TlsMaterial.load(junk, r / "alice.pem", r / "alice.key")
    mat = pki.material("alice")
    assert mat.identity == certs.Identity("alice", "party")
    assert "PRIVATE" not in repr(mat)
