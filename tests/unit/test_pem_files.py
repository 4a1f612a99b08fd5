"""PEM files as a hospital's IT hands them to the daemon and the leader: saved by an editor
(a UTF-8 byte-order mark, CRLF line ends, UTF-16), or the wrong file in the right place.
Each works end to end over mutual TLS, or is refused at load naming the file and the fix."""

from __future__ import annotations

from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from fedanon.errors import ConfigError
from fedanon.security import certs, tls

BOM = b"\xef\xbb\xbf"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pki")
    certs.init_ca(root)
    certs.issue(root, "hospital-a", "party")
    certs.issue(root, "leader", "leader")
    return root


def _saved(src: Path, dst: Path, edit: bytes = b"") -> Path:
    """``src`` as an editor would save it: ``edit`` (a BOM) before the text, CRLF kept."""
    dst.write_bytes(edit + src.read_bytes())
    dst.chmod(src.stat().st_mode & 0o777)
    return dst


def _handshake(server_mat: tls.TlsMaterial, client_mat: tls.TlsMaterial) -> int:
    """A health Check over mutual TLS between the two materials; its status."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = tls.add_secure_port(server, "127.0.0.1:0", server_mat.server_credentials())
    server.start()
    try:
        with client_mat.channel(f"127.0.0.1:{port}", server_mat.identity.name) as chan:
            reply = health_pb2_grpc.HealthStub(chan).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
        return int(reply.status)
    finally:
        server.stop(None)


def test_pem_files_with_a_byte_order_mark_work_end_to_end(pki: Path, tmp_path: Path) -> None:
    """Notepad's 'UTF-8' puts a BOM before '-----BEGIN': the Python parser accepted it, gRPC's
    did not, and the daemon refused to start as 'the port is in use (another daemon?)', the
    leader as 'the connection fails (... a gRPC-level problem?)'."""
    files = {}
    for name in ("ca.pem", "hospital-a.pem", "hospital-a.key", "leader.pem", "leader.key"):
        files[name] = _saved(pki / name, tmp_path / name, BOM)
    party = tls.TlsMaterial.load(files["ca.pem"], files["hospital-a.pem"], files["hospital-a.key"])
    leader = tls.TlsMaterial.load(files["ca.pem"], files["leader.pem"], files["leader.key"])
    assert _handshake(party, leader) == health_pb2.HealthCheckResponse.SERVING


def test_pem_files_with_crlf_line_ends_work_end_to_end(pki: Path, tmp_path: Path) -> None:
    files = {}
    for name in ("ca.pem", "hospital-a.pem", "hospital-a.key", "leader.pem", "leader.key"):
        files[name] = tmp_path / name
        files[name].write_bytes((pki / name).read_bytes().replace(b"\n", b"\r\n"))
    party = tls.TlsMaterial.load(files["ca.pem"], files["hospital-a.pem"], files["hospital-a.key"])
    leader = tls.TlsMaterial.load(files["ca.pem"], files["leader.pem"], files["leader.key"])
    assert _handshake(party, leader) == health_pb2.HealthCheckResponse.SERVING


def test_a_pem_file_saved_as_utf16_is_named_with_the_fix(pki: Path, tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes("\ufeff".encode("utf-16-le") + (pki / "ca.pem").read_text().encode("utf-16-le"))
    with pytest.raises(ConfigError) as err:
        tls.TlsMaterial.load(ca, pki / "hospital-a.pem", pki / "hospital-a.key")
    text = str(err.value)
    assert str(ca) in text and "UTF-16" in text, text


# ------------------------------------------------------- the wrong file in the right place


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another federation's CA: the same default name, another key."""
    root = tmp_path_factory.mktemp("other")
    certs.init_ca(root)
    certs.issue(root, "hospital-a", "party")
    return root


def _refusal(ca: Path, cert: Path, key: Path) -> str:
    with pytest.raises(ConfigError) as err:
        tls.TlsMaterial.load(ca, cert, key)
    return str(err.value)


def test_a_member_certificate_given_as_the_ca_is_named(pki: Path) -> None:
    """[tls] ca = a party's certificate: it said 'not issued by the federation CA
    hospital-a.pem; expected issuer CN=hospital-a', as if the party certificate were wrong."""
    for ca in (pki / "hospital-a.pem", pki / "leader.pem"):
        text = _refusal(ca, pki / "hospital-a.pem", pki / "hospital-a.key")
        assert f"CA certificate {ca} is not a CA certificate" in text, text
        assert "ca.pem" in text, text  # what would be valid
    text = _refusal(pki / "leader.pem", pki / "hospital-a.pem", pki / "hospital-a.key")
    assert "leader certificate of 'leader'" in text, text


def test_another_federations_ca_of_the_same_name_is_said_so(pki: Path, other_ca: Path) -> None:
    """Both CAs are 'CN=fedanon federation CA': the refusal said 'expected issuer CN=fedanon
    federation CA', the issuer the certificate has."""
    cert = other_ca / "hospital-a.pem"
    text = _refusal(pki / "ca.pem", cert, other_ca / "hospital-a.key")
    assert f"certificate {cert} was not issued by the federation CA" in text, text
    assert "same name but another key" in text, text


def _leaf(pki: Path, out: Path, days_from: int, days_to: int) -> Path:
    """hospital-a's key in a certificate valid from ``days_from`` to ``days_to`` (from now)."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    ca_cert, ca_key = certs.load_ca(pki)
    key = certs.load_private_key(pki / "hospital-a.key")
    good = certs.leaf_certificate(ca_cert, ca_key, "hospital-a", "party", key.public_key())
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(good.subject)
        .issuer_name(good.issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now + dt.timedelta(days=days_from))
        .not_valid_after(now + dt.timedelta(days=days_to))
    )
    for ext in good.extensions:
        builder = builder.add_extension(ext.value, ext.critical)
    out.write_bytes(builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    return out


def test_an_expired_or_future_certificate_is_named_with_the_fix(pki: Path, tmp_path: Path) -> None:
    """It said 'certificate is not valid now' and two dates: not which file, nor what to do."""
    expired = _leaf(pki, tmp_path / "expired.pem", -40, -1)
    text = _refusal(pki / "ca.pem", expired, pki / "hospital-a.key")
    assert f"certificate {expired} is not valid now: it has expired" in text, text
    assert "certs sign" in text, text
    future = _leaf(pki, tmp_path / "future.pem", 1, 40)
    text = _refusal(pki / "ca.pem", future, pki / "hospital-a.key")
    assert f"certificate {future} is not valid now: not valid yet" in text, text
    assert "clock" in text, text


def test_an_encrypted_private_key_is_named_with_the_fix(pki: Path, tmp_path: Path) -> None:
    """No fedanon command asks for a passphrase: it said 'private key passphrase problem:
    Password was not given but private key is encrypted', and nothing of what to do."""
    from cryptography.hazmat.primitives import serialization

    key = certs.load_private_key(pki / "hospital-a.key")
    enc = tmp_path / "hospital-a.key"
    enc.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"s3cret-Phrase"),
        )
    )
    enc.chmod(0o600)
    text = _refusal(pki / "ca.pem", pki / "hospital-a.pem", enc)
    assert f"private key {enc}" in text and "encrypted" in text, text
    assert "openssl pkey" in text and "s3cret" not in text, text


def test_a_key_others_can_read_is_warned_about_with_the_fix(
    pki: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = tmp_path / "hospital-a.key"
    key.write_bytes((pki / "hospital-a.key").read_bytes())
    key.chmod(0o644)
    with caplog.at_level("WARNING", logger="fedanon.security.tls"):
        tls.TlsMaterial.load(pki / "ca.pem", pki / "hospital-a.pem", key)
    assert "accessible by others (mode 644): chmod 600 it" in caplog.text
