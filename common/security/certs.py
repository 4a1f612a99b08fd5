"""The federation's private PKI: one CA, one certificate per party and for the leader.

A certificate carries its holder's identity in the SubjectAlternativeName:

* DNS name = the holder's name (``alice``, ``leader``), which is what TLS verifies, and
* URI ``urn:fedanon:role:<role>`` with role ``party`` or ``leader``, which authorization uses.

Keys are EC P-256.  Private key files are written with mode 0600 and never overwritten
unless asked.  Files live in one directory: ``ca.pem``, ``ca.key``, ``NAME.pem``, ``NAME.key``.

:func:`issue` makes a member's key at the coordinator; :mod:`fedanon.security.csr` lets the member
make its own key and the coordinator sign its request (same profile: :func:`leaf_certificate`).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fedanon.errors import AuthError, ConfigError
from fedanon.io.fsutil import atomic_write

log = logging.getLogger(__name__)

ROLES: tuple[str, ...] = ("party", "leader")
ROLE_URI_PREFIX = "urn:fedanon:role:"
CA_CERT_FILE = "ca.pem"
CA_KEY_FILE = "ca.key"
CA_VALIDITY = dt.timedelta(days=5 * 365)
MAX_LEAF_VALIDITY = dt.timedelta(days=365)
CLOCK_SKEW = dt.timedelta(minutes=5)
RESERVED_NAMES = frozenset({"ca"})

_NAME_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Identity:
    """Who a peer is, as stated by its federation certificate."""

    name: str
    role: str

    def __str__(self) -> str:
        return f"{self.name} ({self.role})"


@dataclass(frozen=True)
class CertPaths:
    """Where a certificate and its private key were written."""

    cert: Path
    key: Path


def validate_name(name: str) -> str:
    """Return ``name`` if it is a valid party/leader name, else raise :class:`ConfigError`."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ConfigError(
            "invalid federation name",
            value=str(name),
            expected="1-63 characters of a-z, 0-9 and '-', not starting or ending with '-'",
        )
    if name in RESERVED_NAMES:
        raise ConfigError("reserved federation name", value=name, expected="another name")
    return name


def config_name(value: object, field: str, source: str) -> str:
    """``value`` of ``field`` (e.g. ``[party] name``) in the config file ``source`` as a
    federation name: :func:`validate_name`, whose error then names the file and the field."""
    try:
        return validate_name(value)  # type: ignore[arg-type]
    except ConfigError as exc:
        raise ConfigError(
            f"{field}: {exc.message}", file=source, value=exc.value, expected=exc.expected
        ) from None


def validate_role(role: str) -> str:
    """Return ``role`` if it is one of :data:`ROLES`, else raise :class:`ConfigError`."""
    if role not in ROLES:
        raise ConfigError("invalid role", value=str(role), expected=" or ".join(ROLES))
    return role


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def write_file(path: Path, data: bytes, mode: int) -> None:
    """Atomically write ``data`` to ``path`` with permissions ``mode`` (independent of umask)."""
    atomic_write(path, lambda fh: fh.write(data), binary=True, mode=mode)


def refuse_existing(paths: list[Path], overwrite: bool, hint: str) -> None:
    """:class:`ConfigError` if any of ``paths`` exists and ``overwrite`` is false."""
    existing = [p for p in paths if os.path.lexists(p)]
    if existing and not overwrite:
        raise ConfigError(
            f"refusing to overwrite existing {hint}",
            file=str(existing[0]),
            expected="another path, or --overwrite to replace it",
        )


def key_pem(key: ec.EllipticCurvePrivateKey, passphrase: bytes | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def ensure_dir(directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not directory.is_dir():
        raise ConfigError("not a directory", file=str(directory))


def init_ca(
    directory: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    common_name: str = "fedanon federation CA",
    passphrase: bytes | None = None,
) -> CertPaths:
    """Create the federation CA in ``directory`` (``ca.pem``, ``ca.key`` with mode 0600).

    EC P-256, BasicConstraints CA:true pathlen 0 (critical), KeyUsage keyCertSign+cRLSign
    (critical), valid for 5 years.  Raises :class:`ConfigError` if a CA already exists there
    and ``overwrite`` is false.  ``passphrase`` encrypts the key file if given.
    """
    root = Path(directory)
    paths = CertPaths(root / CA_CERT_FILE, root / CA_KEY_FILE)
    refuse_existing([paths.cert, paths.key], overwrite, "federation CA")
    if paths.cert.exists():
        log.warning("replacing the federation CA in %s: every issued certificate dies", root)
    ensure_dir(root)

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = utc_now()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    write_file(paths.key, key_pem(key, passphrase), 0o600)
    write_file(paths.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    log.info("created federation CA in %s (valid until %s)", root, cert.not_valid_after_utc)
    return paths


def load_certificate(source: bytes | str | os.PathLike[str]) -> x509.Certificate:
    """Parse a PEM certificate given as bytes or as a path; :class:`ConfigError` if invalid."""
    where = None if isinstance(source, bytes) else str(source)
    try:
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        return x509.load_pem_x509_certificate(data)
    except OSError as exc:
        raise ConfigError(f"cannot read certificate: {exc.strerror}", file=where) from exc
    except ValueError as exc:
        raise ConfigError("not a PEM certificate", file=where) from exc


def load_private_key(
    source: bytes | str | os.PathLike[str], passphrase: bytes | None = None
) -> ec.EllipticCurvePrivateKey:
    """Parse a PEM EC private key given as bytes or as a path; :class:`ConfigError` if invalid."""
    where = None if isinstance(source, bytes) else str(source)
    try:
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        key = serialization.load_pem_private_key(data, password=passphrase)
    except OSError as exc:
        raise ConfigError(f"cannot read private key: {exc.strerror}", file=where) from exc
    except TypeError as exc:  # encrypted without passphrase, or passphrase for a plain key
        if passphrase is None:  # fedanon's commands never ask for one
            raise ConfigError(
                "the private key is encrypted (protected by a passphrase), and fedanon reads "
                "keys without one",
                file=where,
                expected="the key unencrypted in a file only the daemon's user can read "
                "(mode 0600), e.g. openssl pkey -in KEY -out KEY.plain && chmod 600 KEY.plain",
            ) from exc
        raise ConfigError(f"private key passphrase problem: {exc}", file=where) from exc
    except ValueError as exc:
        raise ConfigError("not a PEM private key (or wrong passphrase)", file=where) from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ConfigError("private key is not an EC key", file=where, expected="EC P-256")
    return key


def check_days(days: int) -> int:
    """Return ``days`` if it is a valid leaf validity (1..365), else :class:`ConfigError`."""
    if (
        isinstance(days, bool)
        or not isinstance(days, int)
        or not 1 <= days <= MAX_LEAF_VALIDITY.days
    ):
        raise ConfigError("invalid certificate validity", value=str(days), expected="1..365 days")
    return days


def load_ca(
    directory: str | os.PathLike[str], passphrase: bytes | None = None
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """The federation CA in ``directory``: its certificate and its (matching, unexpired) key."""
    root = Path(directory)
    ca_cert = load_certificate(root / CA_CERT_FILE)
    ca_key = load_private_key(root / CA_KEY_FILE, passphrase)
    if ca_cert.public_key() != ca_key.public_key():
        raise ConfigError("CA key does not match CA certificate", file=str(root / CA_KEY_FILE))
    if ca_cert.not_valid_after_utc <= utc_now():
        raise ConfigError("the federation CA has expired", file=str(root / CA_CERT_FILE))
    return ca_cert, ca_key


def leaf_certificate(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    name: str,
    role: str,
    public_key: ec.EllipticCurvePublicKey,
    days: int = 365,
) -> x509.Certificate:
    """The federation's one leaf profile, signed by the CA, for ``public_key``.

    CN = name; SAN = DNS:name + URI:urn:fedanon:role:<role>; BasicConstraints CA:false and
    KeyUsage digitalSignature (both critical); EKU serverAuth + clientAuth; valid for ``days``
    (at most 365) but never beyond the CA's own expiry.  Nothing else: every extension is
    decided here, whatever a certificate request asked for.
    """
    validate_name(name)
    validate_role(role)
    check_days(days)
    if not isinstance(public_key, ec.EllipticCurvePublicKey) or public_key.curve.name != (
        ec.SECP256R1.name
    ):
        raise ConfigError("the public key is not an EC P-256 key", expected="EC P-256")
    now = utc_now()
    not_after = min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    if not_after <= now:
        raise ConfigError("the federation CA has expired")
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
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
                    x509.UniformResourceIdentifier(ROLE_URI_PREFIX + role),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )


def issue(
    directory: str | os.PathLike[str],
    name: str,
    role: str,
    *,
    out_dir: str | os.PathLike[str] | None = None,
    days: int = 365,
    overwrite: bool = False,
    ca_passphrase: bytes | None = None,
) -> CertPaths:
    """Issue a certificate and a new key for ``name`` with ``role`` from the CA in ``directory``.

    Writes ``NAME.pem`` and ``NAME.key`` (mode 0600) into ``out_dir`` (default: ``directory``),
    with the profile of :func:`leaf_certificate`.  The coordinator then holds the key: where
    a hospital should generate its own, use :mod:`fedanon.security.csr` (request, sign) instead.
    """
    validate_name(name)
    validate_role(role)
    check_days(days)
    root = Path(directory)
    target = Path(out_dir) if out_dir is not None else root
    paths = CertPaths(target / f"{name}.pem", target / f"{name}.key")
    refuse_existing([paths.cert, paths.key], overwrite, f"certificate for {name!r}")

    ca_cert, ca_key = load_ca(root, ca_passphrase)
    ensure_dir(target)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = leaf_certificate(ca_cert, ca_key, name, role, key.public_key(), days)
    write_file(paths.key, key_pem(key, None), 0o600)
    write_file(paths.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    log.info("issued %s certificate for %r (valid until %s)", role, name, cert.not_valid_after_utc)
    return paths


def identity_of(cert: x509.Certificate) -> Identity:
    """The federation identity in ``cert``'s SAN; :class:`AuthError` if absent or ambiguous."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound as exc:
        raise AuthError("certificate has no SubjectAlternativeName") from exc
    names = san.get_values_for_type(x509.DNSName)
    roles = [
        uri[len(ROLE_URI_PREFIX) :]
        for uri in san.get_values_for_type(x509.UniformResourceIdentifier)
        if uri.startswith(ROLE_URI_PREFIX)
    ]
    if len(names) != 1 or not _NAME_RE.fullmatch(names[0]):
        raise AuthError(f"certificate must carry exactly one valid DNS name, has {len(names)}")
    if len(roles) != 1 or roles[0] not in ROLES:
        raise AuthError("certificate must carry exactly one fedanon role URI")
    return Identity(name=names[0], role=roles[0])
