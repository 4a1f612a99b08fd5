"""Certificate requests: a hospital makes its own key, the coordinator's CA signs it.

``request`` runs at the hospital and writes ``NAME.key`` (mode 0600; it never leaves the
hospital) and ``NAME.csr``, a PKCS#10 request carrying the public key, CN = NAME and the
SubjectAlternativeName ``DNS:NAME`` + ``URI:urn:fedanon:role:<role>``, the way
:func:`fedanon.security.certs.leaf_certificate` issues certificates.

``sign_request`` runs at the coordinator.  It checks the request's signature (proof that
its maker holds the private key and that nothing was altered), the name, and that it asks
for nothing the CA does not grant: the role must be the one the coordinator gives on the
command line, and any extension or attribute other than that SubjectAlternativeName is
refused.  The certificate is then built with the federation's one profile, taking ONLY the
public key and the name from the request.

Both print the SHA-256 fingerprint of the public key, so that the coordinator can confirm
with the hospital over another channel (a phone call) that the request is theirs.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fedanon.errors import ConfigError
from fedanon.security.certs import (
    CA_CERT_FILE,
    CA_KEY_FILE,
    ROLE_URI_PREFIX,
    Identity,
    check_days,
    ensure_dir,
    key_pem,
    leaf_certificate,
    load_ca,
    refuse_existing,
    validate_name,
    validate_role,
    write_file,
)
from fedanon.security.certverify import verify_issued

log = logging.getLogger(__name__)

CSR_SUFFIX = ".csr"
# PKCS#9 extensionRequest: the attribute that carries a request's extensions.
EXTENSION_REQUEST = x509.ObjectIdentifier("1.2.840.113549.1.9.14")


@dataclass(frozen=True)
class RequestPaths:
    """Where a hospital's new private key and its certificate request were written."""

    key: Path
    csr: Path
    fingerprint: str


@dataclass(frozen=True)
class Signed:
    """A certificate signed from a request: where it is, whom it names, which key it binds."""

    cert: Path
    identity: Identity
    fingerprint: str
    not_after: str


def fingerprint(public_key: ec.EllipticCurvePublicKey) -> str:
    """SHA-256 of the DER SubjectPublicKeyInfo, as colon-separated hex pairs."""
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def request(
    name: str,
    role: str,
    out_dir: str | os.PathLike[str],
    *,
    overwrite: bool = False,
) -> RequestPaths:
    """Generate ``NAME.key`` (EC P-256, mode 0600) and ``NAME.csr`` in ``out_dir``."""
    validate_name(name)
    validate_role(role)
    target = Path(out_dir)
    key_path, csr_path = target / f"{name}.key", target / f"{name}{CSR_SUFFIX}"
    refuse_existing([key_path, csr_path], overwrite, f"key or request for {name!r}")
    ensure_dir(target)
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(name), x509.UniformResourceIdentifier(ROLE_URI_PREFIX + role)]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    write_file(key_path, key_pem(key, None), 0o600)
    write_file(csr_path, csr.public_bytes(serialization.Encoding.PEM), 0o644)
    log.info("new %s key %s and certificate request %s", role, key_path, csr_path)
    return RequestPaths(key_path, csr_path, fingerprint(key.public_key()))


def load_request(source: bytes | str | os.PathLike[str]) -> x509.CertificateSigningRequest:
    """Parse a PEM PKCS#10 request given as bytes or as a path; :class:`ConfigError` if not."""
    where = None if isinstance(source, bytes) else str(source)
    try:
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read certificate request: {exc.strerror}", file=where) from exc
    try:
        return x509.load_pem_x509_csr(data)
    except ValueError as exc:
        raise ConfigError(
            "not a PEM certificate request (PKCS#10)",
            file=where,
            expected="a '-----BEGIN CERTIFICATE REQUEST-----' block from `fedanon certs request`",
        ) from exc


def _san_identity(
    csr: x509.CertificateSigningRequest, where: str | None
) -> tuple[str | None, str | None]:
    """The DNS name and the fedanon role the request's SAN asks for (None when absent)."""
    names: list[str] = []
    roles: list[str] = []
    for ext in csr.extensions:
        if not isinstance(ext.value, x509.SubjectAlternativeName):
            raise ConfigError(
                "the certificate request asks for an extension the federation CA does not grant",
                file=where,
                value=f"{type(ext.value).__name__} {ext.oid.dotted_string}",
                expected="only a SubjectAlternativeName (DNS name + fedanon role URI)",
            )
        for general in ext.value:
            if isinstance(general, x509.DNSName):
                names.append(general.value)
            elif isinstance(general, x509.UniformResourceIdentifier) and general.value.startswith(
                ROLE_URI_PREFIX
            ):
                roles.append(general.value[len(ROLE_URI_PREFIX) :])
            else:
                raise ConfigError(
                    "the certificate request asks for a subject alternative name the federation "
                    "CA does not grant",
                    file=where,
                    value=str(general.value),
                    expected=f"one DNS name and at most one {ROLE_URI_PREFIX}<role> URI",
                )
    if len(names) > 1 or len(roles) > 1:
        raise ConfigError(
            "the certificate request asks for more than one name or role",
            file=where,
            value=", ".join(names + roles),
            expected=f"one DNS name and at most one {ROLE_URI_PREFIX}<role> URI",
        )
    return (names[0] if names else None), (roles[0] if roles else None)


def check_request(
    csr: x509.CertificateSigningRequest, role: str, where: str | None = None
) -> tuple[str, ec.EllipticCurvePublicKey]:
    """The name and public key a valid request for ``role`` binds; :class:`ConfigError` if not.

    Refuses: a signature that does not verify, a key other than EC P-256, a subject with
    anything but CN, attributes other than the extension request, any extension other than
    the SubjectAlternativeName, a name that is not a valid federation name or whose CN and
    DNS SAN differ, and a role URI other than ``role``.
    """
    validate_role(role)
    try:
        if not csr.is_signature_valid:
            raise ConfigError(
                "the certificate request's signature does not verify: it was altered after "
                "it was made, or is corrupt",
                file=where,
                expected="the request exactly as `fedanon certs request` wrote it",
            )
        public_key = csr.public_key()
        if not isinstance(public_key, ec.EllipticCurvePublicKey) or (
            public_key.curve.name != ec.SECP256R1.name
        ):
            raise ConfigError("the certificate request's key is not an EC P-256 key", file=where)
        for attribute in csr.attributes:
            if attribute.oid != EXTENSION_REQUEST:
                raise ConfigError(
                    "the certificate request carries an attribute the federation CA does not "
                    "accept",
                    file=where,
                    value=attribute.oid.dotted_string,
                    expected="no attributes besides the extension request",
                )
        others = [a for a in csr.subject if a.oid != NameOID.COMMON_NAME]
        if others:
            raise ConfigError(
                "the certificate request's subject has more than a common name",
                file=where,
                value=csr.subject.rfc4514_string(),
                expected="CN=NAME only",
            )
        cns = [str(a.value) for a in csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
        dns, asked_role = _san_identity(csr, where)
    except (ValueError, x509.DuplicateExtension, x509.UnsupportedGeneralNameType) as exc:
        # a malformed extension or name, parsed lazily
        raise ConfigError(f"malformed certificate request: {exc}", file=where) from exc
    if len(cns) > 1 or (cns and dns is not None and cns[0] != dns):
        raise ConfigError(
            "the certificate request's common name and DNS name differ",
            file=where,
            value=f"CN={', '.join(cns)}; DNS={dns}",
            expected="the same federation name in both",
        )
    name = dns if dns is not None else (cns[0] if cns else None)
    if name is None:
        raise ConfigError(
            "the certificate request names nobody", file=where, expected="CN=NAME and DNS:NAME"
        )
    try:
        validate_name(name)
    except ConfigError as exc:
        raise ConfigError(exc.message, file=where, value=exc.value, expected=exc.expected) from exc
    if asked_role is not None and asked_role != role:
        raise ConfigError(
            f"the certificate request asks for role {asked_role!r} but --role is {role!r}",
            file=where,
            value=asked_role,
            expected=f"a request made with `fedanon certs request {name} --role {role}`",
        )
    return name, public_key


def sign_request(
    csr_source: str | os.PathLike[str],
    role: str,
    ca_dir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    days: int = 365,
    overwrite: bool = False,
    ca_passphrase: bytes | None = None,
) -> Signed:
    """Check the request at ``csr_source`` and write the certificate the CA grants to ``out``."""
    validate_role(role)
    check_days(days)
    out_path = Path(out)
    root = Path(ca_dir)
    protected = {Path(csr_source), root / CA_CERT_FILE, root / CA_KEY_FILE}
    if any(os.path.lexists(p) and out_path.resolve() == p.resolve() for p in protected):
        raise ConfigError(
            "refusing to write the certificate over the request or the CA's own files",
            file=str(out_path),
            expected="another --out path",
        )
    refuse_existing([out_path], overwrite, "certificate")
    where = str(csr_source)
    name, public_key = check_request(load_request(csr_source), role, where)
    ca_cert, ca_key = load_ca(root, ca_passphrase)
    cert = leaf_certificate(ca_cert, ca_key, name, role, public_key, days)
    pem = cert.public_bytes(serialization.Encoding.PEM)
    identity = verify_issued(ca_cert.public_bytes(serialization.Encoding.PEM), pem)
    ensure_dir(out_path.parent)
    write_file(out_path, pem, 0o644)
    log.info(
        "signed %s certificate for %r, serial %x, valid until %s",
        role,
        name,
        cert.serial_number,
        cert.not_valid_after_utc,
    )
    return Signed(out_path, identity, fingerprint(public_key), str(cert.not_valid_after_utc))
