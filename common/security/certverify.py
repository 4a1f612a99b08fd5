"""Checking a member's certificate against the federation CA (:func:`verify_issued`): the
issuer, the validity period, the key, the identity; every refusal names the file and what
would be valid.  Making and loading certificates is :mod:`fedanon.security.certs`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TypeVar

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes

from fedanon.errors import AuthError, ConfigError
from fedanon.security.certs import (
    Identity,
    identity_of,
    load_certificate,
    load_private_key,
    utc_now,
)

T = TypeVar("T")


def _named(parse: Callable[[bytes], T], pem: bytes, what: str) -> T:
    """``parse(pem)``; its :class:`ConfigError` names ``what`` (the file the PEM came from)."""
    try:
        return parse(pem)
    except ConfigError as exc:
        raise ConfigError(f"{what}: {exc.message}", expected=exc.expected) from exc


def _fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()[:16]


def _check_is_ca(ca: x509.Certificate, ca_file: str) -> None:
    """:class:`ConfigError` unless ``ca`` is a CA certificate ([tls] ca = a member's own
    certificate, or another member's, is said so, not 'not issued by the federation CA')."""
    try:
        is_ca = ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if is_ca:
        return
    try:
        whose = f": it is the {identity_of(ca).role} certificate of {identity_of(ca).name!r}"
    except AuthError:
        whose = ""
    raise ConfigError(
        f"CA certificate{ca_file} is not a CA certificate{whose}",
        value=ca.subject.rfc4514_string(),
        expected="the federation CA's certificate (ca.pem, from the coordinator)",
    )


def verify_issued(
    ca_pem: bytes,
    cert_pem: bytes,
    key_pem: bytes | None = None,
    *,
    now: dt.datetime | None = None,
    names: tuple[str, str, str] = ("", "", ""),  # " ca.pem", ... (escaped) for the messages
) -> Identity:
    """Check that ``cert_pem`` was issued by ``ca_pem``, is currently valid, matches ``key_pem``.

    Returns the certificate's identity.  Meant for start-up checks so that a misconfigured
    daemon fails with a clear :class:`ConfigError` instead of an opaque TLS handshake error.
    """
    ca_file, cert_file, key_file = names
    # parsed from bytes, a PEM error knows no file: name it (e.g. [tls] cert = the key)
    ca = _named(load_certificate, ca_pem, f"CA certificate{ca_file}")
    cert = _named(load_certificate, cert_pem, f"certificate{cert_file}")
    key = None if key_pem is None else _named(load_private_key, key_pem, f"private key{key_file}")
    _check_is_ca(ca, ca_file)
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as exc:
        same_name = cert.issuer == ca.subject
        raise ConfigError(
            f"certificate{cert_file} was not issued by the federation CA{ca_file}"
            + (
                ": its issuer has the same name but another key (another federation's CA, "
                "or a CA made again with 'certs init --overwrite')"
                if same_name
                else ""
            ),
            value=cert.subject.rfc4514_string(),
            expected=f"a certificate signed by the CA{ca_file} (SHA-256 {_fingerprint(ca)})"
            if same_name
            else f"issuer {ca.subject.rfc4514_string()}",
        ) from exc
    moment = now or utc_now()
    if not cert.not_valid_before_utc <= moment <= cert.not_valid_after_utc:
        early = moment < cert.not_valid_before_utc
        raise ConfigError(
            f"certificate{cert_file} is not valid now: "
            + (
                f"not valid yet (from {cert.not_valid_before_utc})"
                if early
                else f"it has expired (on {cert.not_valid_after_utc})"
            ),
            value=f"{cert.not_valid_before_utc} .. {cert.not_valid_after_utc}",
            expected=f"a certificate valid now ({moment.replace(microsecond=0)} by this "
            "machine's clock): "
            + (
                "check the clock here and at the coordinator"
                if early
                else "ask the coordinator to sign a new one (fedanon certs sign)"
            ),
        )
    if key is not None and key.public_key() != cert.public_key():
        raise ConfigError(f"private key{key_file} does not match certificate{cert_file}")
    try:
        return identity_of(cert)
    except AuthError as exc:
        raise ConfigError(f"certificate is not a fedanon certificate: {exc}") from exc
