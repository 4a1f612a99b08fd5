"""Certificate requests: a hospital's key stays with it; the CA grants only its own profile."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import stat
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import AttributeOID, NameOID
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from fedanon.cli.main import main
from fedanon.errors import ConfigError
from fedanon.security import certs, csr, tls
from fedanon.security.certs import ROLE_URI_PREFIX, Identity


def _cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _fingerprint(text: str) -> str:
    found = re.search(r"fingerprint ((?:[0-9A-F]{2}:){31}[0-9A-F]{2})", text)
    assert found, text
    return found.group(1)


@pytest.fixture
def coordinator(tmp_path: Path) -> Path:
    """The coordinator's CA directory (with a leader certificate it issued itself)."""
    root = tmp_path / "coordinator"
    certs.init_ca(root)
    certs.issue(root, "leader", "leader")
    return root


def _request_and_hand_over(
    tmp_path: Path, coordinator: Path, name: str = "hospital-a", role: str = "party"
) -> tuple[Path, Path]:
    """The hospital's directory and the CSR copied to the coordinator (as by e-mail)."""
    hospital = tmp_path / name
    paths = csr.request(name, role, hospital)
    inbox = coordinator / "requests"
    inbox.mkdir(exist_ok=True)
    return hospital, Path(shutil.copy(paths.csr, inbox / paths.csr.name))


def _health_check(server_mat: tls.TlsMaterial, client_mat: tls.TlsMaterial) -> None:
    """A real mutual-TLS gRPC call from ``client_mat`` to a server presenting ``server_mat``."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=tls.server_options())
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = tls.add_secure_port(server, "127.0.0.1:0", server_mat.server_credentials())
    server.start()
    try:
        with client_mat.channel(
            f"127.0.0.1:{port}", expected_name=server_mat.identity.name
        ) as chan:
            reply = health_pb2_grpc.HealthStub(chan).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        server.stop(None)


def test_request_sign_round_trip_gives_a_working_mtls_identity(
    tmp_path: Path, coordinator: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hospital = tmp_path / "hospital-a"
    rc, out, err = _cli(capsys, "certs", "request", "hospital-a", "--out", hospital)
    assert rc == 0, err
    key, request = hospital / "hospital-a.key", hospital / "hospital-a.csr"
    assert _mode(key) == 0o600
    asked = _fingerprint(out)

    inbox = coordinator / "inbox"
    inbox.mkdir()
    shutil.copy(request, inbox / request.name)
    cert = coordinator / "hospital-a.pem"
    rc, out, err = _cli(
        capsys,
        "certs",
        "sign",
        "--csr",
        inbox / request.name,
        "--role",
        "party",
        "--ca-dir",
        coordinator,
        "--out",
        cert,
        "--days",
        "30",
    )
    assert rc == 0, err
    assert _fingerprint(out) == asked  # what the coordinator reads back to the hospital

    # The coordinator's side never saw the hospital's private key, in any file.
    key_pem = key.read_bytes()
    key_der = serialization.load_pem_private_key(key_pem, None).private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    coordinator_files = [p for p in coordinator.rglob("*") if p.is_file()]
    assert sorted(p.name for p in coordinator_files if p.suffix == ".key") == [
        "ca.key",
        "leader.key",
    ]
    for path in coordinator_files:
        data = path.read_bytes()
        assert key_pem not in data and key_der not in data, path
        assert b"PRIVATE KEY" not in data or path.name in ("ca.key", "leader.key"), path

    # The hospital gets back ca.pem and its certificate; with its own key that is an mTLS
    # identity that fedanon.security.tls accepts, as a server and as a client.
    shutil.copy(cert, hospital / "hospital-a.pem")
    shutil.copy(coordinator / "ca.pem", hospital / "ca.pem")
    mat = tls.TlsMaterial.load(hospital / "ca.pem", hospital / "hospital-a.pem", key)
    assert mat.identity == Identity("hospital-a", "party")
    leader = tls.TlsMaterial.load(
        coordinator / "ca.pem", coordinator / "leader.pem", coordinator / "leader.key"
    )
    _health_check(mat, leader)
    _health_check(leader, mat)

    issued = x509.load_pem_x509_certificate(cert.read_bytes())
    life = issued.not_valid_after_utc - issued.not_valid_before_utc
    assert life.days == 30  # --days, plus the 5-minute clock-skew allowance


def test_signed_certificate_has_exactly_the_issue_profile(
    tmp_path: Path, coordinator: Path
) -> None:
    _, request = _request_and_hand_over(tmp_path, coordinator, "hospital-b")
    signed = csr.sign_request(request, "party", coordinator, tmp_path / "b.pem")
    issued = certs.issue(coordinator, "hospital-c", "party")

    def profile(path: Path) -> list[tuple[str, bool, object]]:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        skip = (x509.SubjectKeyIdentifier, x509.SubjectAlternativeName)
        return [
            (e.oid.dotted_string, e.critical, None if isinstance(e.value, skip) else e.value)
            for e in cert.extensions
        ]

    assert profile(signed.cert) == profile(issued.cert)
    cert = x509.load_pem_x509_certificate(signed.cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["hospital-b"]
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == [ROLE_URI_PREFIX + "party"]
    assert cert.subject.rfc4514_string() == "CN=hospital-b"
    assert signed.identity == Identity("hospital-b", "party")


def _tamper(request: Path, old: bytes, new: bytes) -> None:
    """Replace bytes inside the signed part of a PEM request, keeping its DER well-formed."""
    assert len(old) == len(new)
    der = x509.load_pem_x509_csr(request.read_bytes()).public_bytes(serialization.Encoding.DER)
    assert der.count(old) >= 1
    forged = x509.load_der_x509_csr(der.replace(old, new))
    request.write_bytes(forged.public_bytes(serialization.Encoding.PEM))


def test_tampered_request_is_refused(
    tmp_path: Path, coordinator: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, request = _request_and_hand_over(tmp_path, coordinator, "hospital-a", "party")
    _tamper(request, b"hospital-a", b"hospital-x")  # someone redirects the name in transit
    out = tmp_path / "x.pem"
    rc, _, err = _cli(
        capsys,
        *("certs", "sign", "--csr", request, "--role", "party"),
        *("--ca-dir", coordinator, "--out", out),
    )
    assert rc == 2
    assert "signature does not verify" in err and str(request) in err
    assert "Traceback" not in err
    assert not out.exists()


def test_garbage_request_is_refused(
    tmp_path: Path, coordinator: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.csr"
    bad.write_text("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n")
    out = tmp_path / "x.pem"
    rc, _, err = _cli(
        capsys,
        *("certs", "sign", "--csr", bad, "--role", "party", "--ca-dir", coordinator),
        *("--out", out),
    )
    assert rc == 2 and "not a PEM certificate request" in err and not out.exists()
    rc, _, err = _cli(
        capsys,
        *("certs", "sign", "--csr", tmp_path / "missing.csr", "--role", "party"),
        *("--ca-dir", coordinator, "--out", out),
    )
    assert rc == 2 and "cannot read certificate request" in err


@pytest.mark.parametrize(("asked", "granted"), [("leader", "party"), ("party", "leader")])
def test_role_mismatch_is_refused(
    tmp_path: Path,
    coordinator: Path,
    capsys: pytest.CaptureFixture[str],
    asked: str,
    granted: str,
) -> None:
    _, request = _request_and_hand_over(tmp_path, coordinator, "someone", asked)
    out = tmp_path / "someone.pem"
    rc, _, err = _cli(
        capsys,
        *("certs", "sign", "--csr", request, "--role", granted),
        *("--ca-dir", coordinator, "--out", out),
    )
    assert rc == 2
    assert f"asks for role '{asked}' but --role is '{granted}'" in err
    assert not out.exists()


def _foreign_request(
    tmp_path: Path,
    build: Callable[[x509.CertificateSigningRequestBuilder], x509.CertificateSigningRequestBuilder],
    *,
    subject: str | x509.Name = "hospital-a",
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | None = None,
) -> Path:
    """A request made with other tooling: CN=subject, then whatever ``build`` adds."""
    signer = key or ec.generate_private_key(ec.SECP256R1())
    if isinstance(subject, str):
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject)
    path = tmp_path / "foreign.csr"
    path.write_bytes(
        build(builder).sign(signer, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    )
    return path


def _san(*names: x509.GeneralName) -> x509.SubjectAlternativeName:
    return x509.SubjectAlternativeName(list(names))


_DNS = x509.DNSName("hospital-a")
_PARTY = x509.UniformResourceIdentifier(ROLE_URI_PREFIX + "party")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda b: b.add_extension(_san(_DNS, _PARTY), False).add_extension(
                x509.BasicConstraints(ca=True, path_length=None), True
            ),
            "extension the federation CA does not grant",
        ),
        (
            lambda b: b.add_extension(_san(_DNS, _PARTY), False).add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CODE_SIGNING]), False
            ),
            "extension the federation CA does not grant",
        ),
        (
            lambda b: b.add_extension(_san(_DNS, x509.DNSName("hospital-b"), _PARTY), False),
            "more than one name or role",
        ),
        (
            lambda b: b.add_extension(
                _san(_DNS, _PARTY, x509.UniformResourceIdentifier(ROLE_URI_PREFIX + "party")),
                False,
            ),
            "more than one name or role",
        ),
        (
            lambda b: b.add_extension(
                _san(_DNS, x509.IPAddress(ipaddress.ip_address("10.0.0.1"))), False
            ),
            "subject alternative name the federation CA does not grant",
        ),
        (
            lambda b: b.add_extension(_san(x509.DNSName("hospital-b"), _PARTY), False),
            "common name and DNS name differ",
        ),
        (
            lambda b: b.add_extension(_san(_DNS, _PARTY), False).add_attribute(
                AttributeOID.CHALLENGE_PASSWORD, b"secret"
            ),
            "attribute the federation CA does not accept",
        ),
    ],
)
def test_requests_asking_for_more_are_refused(
    tmp_path: Path,
    coordinator: Path,
    build: Callable[[x509.CertificateSigningRequestBuilder], x509.CertificateSigningRequestBuilder],
    message: str,
) -> None:
    request = _foreign_request(tmp_path, build)
    with pytest.raises(ConfigError, match=message):
        csr.sign_request(request, "party", coordinator, tmp_path / "out.pem")
    assert not (tmp_path / "out.pem").exists()


def test_subject_must_be_a_valid_name_only(tmp_path: Path, coordinator: Path) -> None:
    with_org = _foreign_request(
        tmp_path,
        lambda b: b,
        subject=x509.Name(
            [
                x509.NameAttribute(NameOID.COMMON_NAME, "hospital-a"),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Another Hospital"),
            ]
        ),
    )
    with pytest.raises(ConfigError, match="more than a common name"):
        csr.sign_request(with_org, "party", coordinator, tmp_path / "out.pem")
    bad_name = _foreign_request(tmp_path, lambda b: b, subject="Hospital A")
    with pytest.raises(ConfigError, match="invalid federation name"):
        csr.sign_request(bad_name, "party", coordinator, tmp_path / "out.pem")
    reserved = _foreign_request(tmp_path, lambda b: b, subject="ca")
    with pytest.raises(ConfigError, match="reserved federation name"):
        csr.sign_request(reserved, "party", coordinator, tmp_path / "out.pem")
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_request = _foreign_request(tmp_path, lambda b: b, key=rsa_key)
    with pytest.raises(ConfigError, match="not an EC P-256 key"):
        csr.sign_request(rsa_request, "party", coordinator, tmp_path / "out.pem")
    assert not (tmp_path / "out.pem").exists()


def test_plain_request_gets_the_role_the_ca_grants(tmp_path: Path, coordinator: Path) -> None:
    """An `openssl req -subj /CN=NAME` request: name from CN, role from --role, full profile."""
    request = _foreign_request(tmp_path, lambda b: b)
    signed = csr.sign_request(request, "party", coordinator, tmp_path / "a.pem")
    assert signed.identity == Identity("hospital-a", "party")
    cert = x509.load_pem_x509_certificate(signed.cert.read_bytes())
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(eku) == {
        x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
        x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH,
    }


def test_sign_never_overwrites_without_the_flag(
    tmp_path: Path, coordinator: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, request = _request_and_hand_over(tmp_path, coordinator)
    out = tmp_path / "hospital-a.pem"
    args = ("certs", "sign", "--csr", request, "--role", "party", "--ca-dir", coordinator)
    assert _cli(capsys, *args, "--out", out)[0] == 0
    before = out.read_bytes()
    rc, _, err = _cli(capsys, *args, "--out", out)
    assert rc == 2
    assert "refusing to overwrite" in err and "--overwrite" in err
    assert "overwrite=True" not in err
    assert out.read_bytes() == before
    assert _cli(capsys, *args, "--out", out, "--overwrite")[0] == 0
    assert out.read_bytes() != before

    # Never over the CA's own files or the request, even with --overwrite.
    for victim in (coordinator / "ca.key", coordinator / "ca.pem", request):
        kept = victim.read_bytes()
        rc, _, err = _cli(capsys, *args, "--out", victim, "--overwrite")
        assert rc == 2 and "refusing to write the certificate over" in err
        assert victim.read_bytes() == kept


def test_request_never_overwrites_a_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hospital = tmp_path / "h"
    assert _cli(capsys, "certs", "request", "hospital-a", "--out", hospital)[0] == 0
    key = (hospital / "hospital-a.key").read_bytes()
    rc, _, err = _cli(capsys, "certs", "request", "hospital-a", "--out", hospital)
    assert rc == 2 and "--overwrite" in err and "overwrite=True" not in err
    assert (hospital / "hospital-a.key").read_bytes() == key
    rc, _, err = _cli(capsys, "certs", "request", "Hospital A", "--out", hospital)
    assert rc == 2 and "invalid federation name" in err


def test_request_key_mode_ignores_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        paths = csr.request("hospital-a", "leader", tmp_path / "h")
    finally:
        os.umask(old)
    assert _mode(paths.key) == 0o600
    assert _mode(paths.key.parent) == 0o700
    request = csr.load_request(paths.csr)
    assert request.is_signature_valid
    san = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["hospital-a"]
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == [ROLE_URI_PREFIX + "leader"]


def test_sign_checks_days_and_ca(tmp_path: Path, coordinator: Path) -> None:
    _, request = _request_and_hand_over(tmp_path, coordinator)
    with pytest.raises(ConfigError, match="validity"):
        csr.sign_request(request, "party", coordinator, tmp_path / "a.pem", days=366)
    with pytest.raises(ConfigError, match="cannot read certificate"):
        csr.sign_request(request, "party", tmp_path / "no-ca", tmp_path / "a.pem")
    assert not (tmp_path / "a.pem").exists()
