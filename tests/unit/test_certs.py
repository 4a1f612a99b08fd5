"""The federation PKI: CA and leaf certificate properties, file modes, validation."""

from __future__ import annotations

import datetime as dt
import os
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fedanon.errors import AuthError, ConfigError, InputError
from fedanon.security import certs, certverify


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_init_ca_properties(tmp_path: Path) -> None:
    paths = certs.init_ca(tmp_path / "pki")
    assert paths.cert == tmp_path / "pki" / "ca.pem"
    assert paths.key == tmp_path / "pki" / "ca.key"
    assert _mode(paths.key) == 0o600
    ca = _cert(paths.cert)
    bc = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca
    ku = ca.extensions.get_extension_for_class(x509.KeyUsage)
    assert ku.critical and ku.value.key_cert_sign and ku.value.crl_sign
    assert not ku.value.digital_signature
    pub = ca.public_key()
    assert isinstance(pub, ec.EllipticCurvePublicKey) and pub.curve.name == "secp256r1"
    life = ca.not_valid_after_utc - ca.not_valid_before_utc
    assert dt.timedelta(days=5 * 365) <= life <= dt.timedelta(days=5 * 365 + 1)
    assert ca.issuer == ca.subject
    ca.verify_directly_issued_by(ca)


def test_init_ca_refuses_to_overwrite(tmp_path: Path) -> None:
    first = certs.init_ca(tmp_path)
    before = first.cert.read_bytes()
    with pytest.raises(ConfigError) as info:
        certs.init_ca(tmp_path)
    assert isinstance(info.value, InputError)
    assert "refusing to overwrite" in str(info.value)
    assert first.cert.read_bytes() == before
    certs.init_ca(tmp_path, overwrite=True)
    assert first.cert.read_bytes() != before
    assert _mode(first.key) == 0o600


def test_key_mode_ignores_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        paths = certs.init_ca(tmp_path)
        leaf = certs.issue(tmp_path, "alice", "party")
    finally:
        os.umask(old)
    assert _mode(paths.key) == 0o600
    assert _mode(leaf.key) == 0o600
    assert _mode(leaf.cert) == 0o644


@pytest.mark.parametrize("role", ["party", "leader"])
def test_issue_properties(tmp_path: Path, role: str) -> None:
    certs.init_ca(tmp_path)
    paths = certs.issue(tmp_path, "st-marys-2", role)
    assert paths.cert == tmp_path / "st-marys-2.pem"
    assert _mode(paths.key) == 0o600
    ca = _cert(tmp_path / "ca.pem")
    cert = _cert(paths.cert)
    cert.verify_directly_issued_by(ca)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "st-marys-2"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["st-marys-2"]
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == [f"urn:fedanon:role:{role}"]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(eku) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and not bc.value.ca
    assert cert.not_valid_after_utc - cert.not_valid_before_utc <= dt.timedelta(days=365, minutes=5)
    now = dt.datetime.now(dt.UTC)
    assert cert.not_valid_before_utc <= now <= cert.not_valid_after_utc
    key = serialization.load_pem_private_key(paths.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
    assert key.public_key() == cert.public_key()
    assert certs.identity_of(cert) == certs.Identity("st-marys-2", role)
    ident = certverify.verify_issued(
        (tmp_path / "ca.pem").read_bytes(), paths.cert.read_bytes(), paths.key.read_bytes()
    )
    assert ident == certs.Identity("st-marys-2", role)


def test_issue_into_other_dir_and_refuse_overwrite(tmp_path: Path) -> None:
    certs.init_ca(tmp_path / "ca")
    paths = certs.issue(tmp_path / "ca", "alice", "party", out_dir=tmp_path / "alice")
    assert paths.cert.parent == tmp_path / "alice"
    assert not (tmp_path / "ca" / "alice.pem").exists()
    with pytest.raises(ConfigError, match="refusing to overwrite"):
        certs.issue(tmp_path / "ca", "alice", "party", out_dir=tmp_path / "alice")
    certs.issue(tmp_path / "ca", "alice", "party", out_dir=tmp_path / "alice", overwrite=True)


@pytest.mark.parametrize(
    "name", ["", "Alice", "al_ice", "-alice", "alice-", "a" * 64, "al.ice", "ca", "älice"]
)
def test_invalid_names(tmp_path: Path, name: str) -> None:
    certs.init_ca(tmp_path)
    with pytest.raises(ConfigError) as info:
        certs.issue(tmp_path, name, "party")
    assert "name" in str(info.value)
    assert [p.name for p in tmp_path.glob("*.key")] == ["ca.key"]


def test_valid_name_edges() -> None:
    assert certs.validate_name("a") == "a"
    assert certs.validate_name("a" * 63) == "a" * 63
    assert certs.validate_name("h-1") == "h-1"


def test_invalid_role_and_days(tmp_path: Path) -> None:
    certs.init_ca(tmp_path)
    with pytest.raises(ConfigError, match="role"):
        certs.issue(tmp_path, "alice", "admin")
    with pytest.raises(ConfigError, match="validity"):
        certs.issue(tmp_path, "alice", "party", days=366)
    with pytest.raises(ConfigError, match="validity"):
        certs.issue(tmp_path, "alice", "party", days=0)


def test_issue_without_ca(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read certificate"):
        certs.issue(tmp_path, "alice", "party")


def test_encrypted_ca_key(tmp_path: Path) -> None:
    certs.init_ca(tmp_path, passphrase=b"correct horse")
    with pytest.raises(ConfigError, match="passphrase"):
        certs.issue(tmp_path, "alice", "party")
    with pytest.raises(ConfigError):
        certs.issue(tmp_path, "alice", "party", ca_passphrase=b"wrong")
    certs.issue(tmp_path, "alice", "party", ca_passphrase=b"correct horse")


def test_verify_issued_rejects_foreign_and_mismatched(tmp_path: Path) -> None:
    certs.init_ca(tmp_path / "a")
    certs.init_ca(tmp_path / "b")
    alice = certs.issue(tmp_path / "a", "alice", "party")
    bob = certs.issue(tmp_path / "a", "bob", "party")
    ca_a = (tmp_path / "a" / "ca.pem").read_bytes()
    ca_b = (tmp_path / "b" / "ca.pem").read_bytes()
    with pytest.raises(ConfigError, match="not issued by the federation CA"):
        certverify.verify_issued(ca_b, alice.cert.read_bytes())
    with pytest.raises(ConfigError, match="does not match"):
        certverify.verify_issued(ca_a, alice.cert.read_bytes(), bob.key.read_bytes())
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)
    with pytest.raises(ConfigError, match="not valid now"):
        certverify.verify_issued(ca_a, alice.cert.read_bytes(), now=later)


def _bare_cert(san: list[x509.GeneralName] | None) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
    )
    if san is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(key, hashes.SHA256())


@pytest.mark.parametrize(
    "san",
    [
        None,
        [x509.DNSName("alice")],
        [x509.UniformResourceIdentifier("urn:fedanon:role:party")],
        [x509.DNSName("alice"), x509.UniformResourceIdentifier("urn:fedanon:role:root")],
        [
            x509.DNSName("alice"),
            x509.DNSName("bob"),
            x509.UniformResourceIdentifier("urn:fedanon:role:party"),
        ],
        [
            x509.DNSName("alice"),
            x509.UniformResourceIdentifier("urn:fedanon:role:party"),
            x509.UniformResourceIdentifier("urn:fedanon:role:leader"),
        ],
        [x509.DNSName("Alice Smith"), x509.UniformResourceIdentifier("urn:fedanon:role:party")],
    ],
)
def test_identity_of_rejects_bad_sans(san: list[x509.GeneralName] | None) -> None:
    with pytest.raises(AuthError):
        certs.identity_of(_bare_cert(san))


def test_overwrite_errors_name_the_command_line_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 17: the refusal says `--overwrite` (the flag a user can pass), not overwrite=True."""
    from fedanon.cli.main import main

    ca = str(tmp_path / "ca")
    commands = [
        ["certs", "init", "--dir", ca],
        ["certs", "issue", "alice", "--role", "party", "--dir", ca],
        ["certs", "issue", "alice", "--role", "party", "--dir", ca, "--out", ca],
    ]
    for argv in commands:
        main(argv)
        capsys.readouterr()
        before = {p.name: p.read_bytes() for p in (tmp_path / "ca").iterdir()}
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "refusing to overwrite" in err, err
        assert "--overwrite" in err and "overwrite=True" not in err, err
        assert {p.name: p.read_bytes() for p in (tmp_path / "ca").iterdir()} == before
        assert main([*argv, "--overwrite"]) == 0


def test_tls_load_errors_name_the_files(tmp_path: Path) -> None:
    """A key of another identity, a certificate of another CA: the message names the files
    (which key, which certificate, which CA)."""
    from fedanon.security.tls import TlsMaterial

    certs.init_ca(tmp_path / "a")
    certs.init_ca(tmp_path / "b")
    alice = certs.issue(tmp_path / "a", "alice", "party")
    bob = certs.issue(tmp_path / "a", "bob", "party")
    other = certs.issue(tmp_path / "b", "alice", "party")
    ca = tmp_path / "a" / "ca.pem"
    with pytest.raises(ConfigError) as err:
        TlsMaterial.load(ca, alice.cert, bob.key)
    assert f"private key {bob.key} does not match certificate {alice.cert}" in str(err.value)
    with pytest.raises(ConfigError) as err:
        TlsMaterial.load(ca, other.cert, other.key)
    assert f"certificate {other.cert} was not issued by the federation CA {ca}" in str(err.value)
