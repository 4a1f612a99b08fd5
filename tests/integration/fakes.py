"""In-process stand-ins for parties, for the tests of what the leader and a relaying party do
when a peer misbehaves: a scripted Party servicer on a real mTLS port, and certificates the
federation's tooling would never issue (expired)."""

from __future__ import annotations

import datetime as dt
import socket
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fedanon.net import rpc
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security import certs

Fail = tuple[grpc.StatusCode, str, dict[str, str]]


class FakeParty(pb_grpc.PartyServicer):
    """Records the deadline of each call; answers or fails as the test scripts it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.prepare_remaining: list[float] = []
        self.relay_remaining: list[float] = []
        self.prepare_fail: Fail | None = None
        self.relay_fail: Fail | None = None
        self.relay_sleep = 0.0  # seconds a Relay takes before it is answered

    @staticmethod
    def _fail(context: grpc.ServicerContext, fail: Fail) -> None:
        code, text, md = fail
        context.set_trailing_metadata(tuple(md.items()))
        context.abort(code, text)

    def Prepare(self, request: pb.PrepareRequest, context: grpc.ServicerContext) -> pb.PrepareReply:
        self.prepare_remaining.append(context.time_remaining() or 0.0)
        if self.prepare_fail is not None:
            self._fail(context, self.prepare_fail)
        return pb.PrepareReply(run_hash=b"\0" * 32, name=self.name)

    def Relay(
        self, request_iterator: Iterator[pb.VectorChunk], context: grpc.ServicerContext
    ) -> pb.Ack:
        self.relay_remaining.append(context.time_remaining() or 0.0)
        rpc.decode_vector(request_iterator)
        time.sleep(self.relay_sleep)
        if self.relay_fail is not None:
            self._fail(context, self.relay_fail)
        return pb.Ack(ok=True)

    def Status(self, request: pb.StatusRequest, context: grpc.ServicerContext) -> pb.RunStatus:
        return pb.RunStatus()  # nothing to report

    def Abort(self, request: pb.AbortRequest, context: grpc.ServicerContext) -> pb.Ack:
        return pb.Ack(ok=True)


def serve(
    servicer: FakeParty | None, cert: bytes, key: bytes, ca: bytes | None
) -> tuple[grpc.Server, int]:
    """A gRPC server on 127.0.0.1 (mTLS with ``ca``; ``ca`` None = plaintext)."""
    server = grpc.server(futures.ThreadPoolExecutor(4))
    if servicer is not None:
        pb_grpc.add_PartyServicer_to_server(servicer, server)
    if ca is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        creds = grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=ca, require_client_auth=True
        )
        port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    return server, port


def files(d: Path, name: str) -> tuple[bytes, bytes]:
    return (d / f"{name}.pem").read_bytes(), (d / f"{name}.key").read_bytes()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def expired_party_cert(ca_dir: Path, name: str) -> tuple[bytes, bytes]:
    """A party certificate from the federation CA whose validity ended yesterday."""
    ca_cert = x509.load_pem_x509_certificate((ca_dir / certs.CA_CERT_FILE).read_bytes())
    ca_key = serialization.load_pem_private_key((ca_dir / certs.CA_KEY_FILE).read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=30))
        .not_valid_after(now - dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName(name),
                    x509.UniformResourceIdentifier(certs.ROLE_URI_PREFIX + "party"),
                ]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem, key_pem
