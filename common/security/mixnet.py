"""Decryption mix-net for the secure union of generalized records (TKDD 2010, Sec. 5.4).

Each record is encoded to a fixed size, then onion-encrypted with HPKE (X25519, HKDF-SHA256,
ChaCha20-Poly1305): the outermost layer for hop 0 (first party in ring order), the innermost
for the last hop (the leader).  Each hop checks the batch, strips its layer and shuffles, so
no one learns which party contributed which record.  Every ciphertext of a hop has the same
size.  The HPKE ``info`` binds run id and hop index; per-run keys are bound to TLS
identities by an ECDSA P-256 / SHA-256 signature (:class:`SignedKey`).
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from cryptography import x509
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, hpke
from cryptography.hazmat.primitives.asymmetric import ec, x25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from fedanon.errors import AuthError, ProtocolError

__all__ = [
    "LAYER_OVERHEAD",
    "PUBLIC_KEY_SIZE",
    "SignedKey",
    "ciphertext_size",
    "decode_record",
    "encode_record",
    "encoded_size",
    "generate_keypair",
    "sign_public_key",
    "strip_and_shuffle",
    "verify_signed_key",
    "wrap_layers",
]

PUBLIC_KEY_SIZE = 32
"""Raw X25519 public key size in bytes."""
LAYER_OVERHEAD = 48
"""Bytes one onion layer adds: 32-byte encapsulated key + 16-byte Poly1305 tag."""

_SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
_MIX_LABEL = b"fedanon-mix/v1\x00"
_KEY_LABEL = b"fedanon-mix-key/v1\x00"
_U32 = struct.Struct(">I")
_RNG = secrets.SystemRandom()


# --- record encoding --------------------------------------------------------------------


def encoded_size(fields: Sequence[str]) -> int:
    """Bytes :func:`encode_record` needs for ``fields`` before padding."""
    return 4 + sum(4 + len(f.encode("utf-8")) for f in fields)


def encode_record(fields: Sequence[str], pad_size: int) -> bytes:
    """Encode fields as uint32 count, then uint32 length + UTF-8 bytes each, zero padded to
    exactly ``pad_size`` bytes.  Raises :class:`ProtocolError` if they do not fit."""
    try:
        parts = [_U32.pack(len(fields))]
        for field in fields:
            data = field.encode("utf-8")
            parts += (_U32.pack(len(data)), data)
    except (UnicodeEncodeError, AttributeError, struct.error) as exc:
        raise ProtocolError(f"record field cannot be encoded: {type(exc).__name__}") from None
    body = b"".join(parts)
    if len(body) > pad_size:
        raise ProtocolError(f"encoded record needs {len(body)} bytes, pad size is {pad_size}")
    return body + bytes(pad_size - len(body))


def decode_record(data: bytes) -> tuple[str, ...]:
    """Inverse of :func:`encode_record`; rejects truncation, bad UTF-8 and non-zero padding."""
    view = memoryview(data)
    if len(view) < 4:
        raise ProtocolError("record shorter than its field count")
    (count,) = _U32.unpack_from(view, 0)
    if count > (len(view) - 4) // 4:
        raise ProtocolError(f"record claims {count} fields, too many for {len(view)} bytes")
    pos, fields = 4, []
    for _ in range(count):
        if pos + 4 > len(view):
            raise ProtocolError("record truncated in a field length")
        (size,) = _U32.unpack_from(view, pos)
        pos += 4
        if size > len(view) - pos:
            raise ProtocolError("record truncated in a field")
        try:
            fields.append(str(view[pos : pos + size], "utf-8"))
        except UnicodeDecodeError:
            raise ProtocolError("record field is not valid UTF-8") from None
        pos += size
    if any(view[pos:]):
        raise ProtocolError("record padding is not all zero")
    return tuple(fields)


# --- onion encryption -------------------------------------------------------------------


def generate_keypair() -> tuple[x25519.X25519PrivateKey, bytes]:
    """Fresh per-run X25519 key pair; the public key as raw 32 bytes."""
    private = x25519.X25519PrivateKey.generate()
    return private, private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def ciphertext_size(pad_size: int, layers: int) -> int:
    """Size of a ciphertext carrying ``layers`` layers around a ``pad_size`` record."""
    return pad_size + layers * LAYER_OVERHEAD


def _check_run_id(run_id: bytes) -> None:
    if not isinstance(run_id, bytes) or not 1 <= len(run_id) <= 255:
        raise ProtocolError("run id must be 1 to 255 bytes")


def _info(run_id: bytes, hop: int) -> bytes:
    _check_run_id(run_id)
    if not 0 <= hop <= 0xFFFF:
        raise ProtocolError(f"hop index {hop} out of range")
    return _MIX_LABEL + bytes([len(run_id)]) + run_id + hop.to_bytes(2, "big")


@lru_cache(maxsize=256)
def _public_key(raw: bytes) -> x25519.X25519PublicKey:
    """Parse a raw X25519 public key, rejecting wrong sizes and low-order points."""
    if len(raw) != PUBLIC_KEY_SIZE:
        raise ProtocolError(f"public key must be {PUBLIC_KEY_SIZE} bytes, got {len(raw)}")
    key = x25519.X25519PublicKey.from_public_bytes(raw)
    try:
        x25519.X25519PrivateKey.generate().exchange(key)
    except ValueError:
        raise ProtocolError("public key is a low-order point") from None
    return key


def wrap_layers(plaintext: bytes, hop_keys: Sequence[bytes], run_id: bytes) -> list[bytes]:
    """Onion-encrypt ``plaintext`` for ``hop_keys`` (hop 0 first, leader last).

    Element ``i`` of the result is the ciphertext as hop ``i`` receives it; element 0 is what
    the sender submits.  Each element is :data:`LAYER_OVERHEAD` bytes longer than the next.
    """
    if not hop_keys:
        raise ProtocolError("mix-net needs at least one hop")
    keys = [_public_key(bytes(k)) for k in hop_keys]
    layers: list[bytes] = []
    data = plaintext
    for hop in range(len(keys) - 1, -1, -1):
        data = _SUITE.encrypt(data, keys[hop], _info(run_id, hop))
        layers.append(data)
    layers.reverse()
    return layers


def strip_and_shuffle(
    batch: Sequence[bytes],
    private_key: x25519.X25519PrivateKey,
    run_id: bytes,
    hop: int,
    expected_count: int,
    own: Collection[bytes] = (),
) -> list[bytes]:
    """One mix step: check the batch, remove this hop's layer from each ciphertext, shuffle.

    Raises :class:`ProtocolError` if the batch does not hold exactly ``expected_count``
    ciphertexts of one size, holds a duplicate, lacks any of ``own`` (this party's
    ciphertexts as :func:`wrap_layers` gave them for ``hop``), or a layer fails to decrypt.
    """
    if len(batch) != expected_count:
        raise ProtocolError(f"hop {hop}: expected {expected_count} ciphertexts, got {len(batch)}")
    if len({len(c) for c in batch}) > 1:
        raise ProtocolError(f"hop {hop}: ciphertexts differ in size")
    seen = set(batch)
    if len(seen) != len(batch):
        raise ProtocolError(f"hop {hop}: {len(batch) - len(seen)} duplicate ciphertext(s)")
    missing = sum(1 for c in set(own) if c not in seen)
    if missing:
        raise ProtocolError(f"hop {hop}: {missing} of this party's own records are missing")
    info = _info(run_id, hop)
    out: list[bytes] = []
    for index, ciphertext in enumerate(batch):
        try:
            out.append(_SUITE.decrypt(ciphertext, private_key, info))
        except (InvalidTag, ValueError):
            raise ProtocolError(f"hop {hop}: ciphertext {index} failed to decrypt") from None
    _RNG.shuffle(out)
    return out


# --- binding per-run keys to TLS identities ---------------------------------------------


@dataclass(frozen=True, slots=True)
class SignedKey:
    """A per-run mix public key signed by the TLS key of certificate ``cert_pem``."""

    name: str
    public_key: bytes
    signature: bytes
    cert_pem: bytes


def _key_message(run_id: bytes, public_key: bytes) -> bytes:
    _check_run_id(run_id)
    return _KEY_LABEL + bytes([len(run_id)]) + run_id + public_key


def sign_public_key(
    name: str,
    public_key: bytes,
    run_id: bytes,
    tls_key: ec.EllipticCurvePrivateKey,
    cert_pem: bytes,
) -> SignedKey:
    """Sign (label, run id, ``public_key``) with ``tls_key`` (ECDSA, SHA-256)."""
    if len(public_key) != PUBLIC_KEY_SIZE:
        raise ProtocolError(f"public key must be {PUBLIC_KEY_SIZE} bytes")
    signature = tls_key.sign(_key_message(run_id, public_key), ec.ECDSA(hashes.SHA256()))
    return SignedKey(name, public_key, signature, cert_pem)


def verify_signed_key(
    signed: SignedKey,
    ca_cert_pem: bytes,
    expected_name: str,
    run_id: bytes,
    *,
    now: datetime | None = None,
) -> bytes:
    """Check ``signed`` and return its public key.

    Raises :class:`AuthError` unless the certificate is issued by the CA, both are valid at
    ``now`` (default: current time), the certificate has ``expected_name`` as a DNS
    SubjectAlternativeName, ``signed.name`` is that name, and the signature verifies.
    """
    moment = now or datetime.now(UTC)
    try:
        (ca,) = x509.load_pem_x509_certificates(ca_cert_pem)
        (cert,) = x509.load_pem_x509_certificates(signed.cert_pem)
    except ValueError:
        raise AuthError("expected exactly one PEM certificate for the CA and the peer") from None
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise AuthError(f"certificate of {expected_name!r} is not issued by the CA") from None
    for which, c in (("CA", ca), ("peer", cert)):
        if not c.not_valid_before_utc <= moment <= c.not_valid_after_utc:
            raise AuthError(f"{which} certificate is not valid at {moment.isoformat()}")
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        raise AuthError("peer certificate has no SubjectAlternativeName") from None
    names = {n.lower() for n in san.get_values_for_type(x509.DNSName)}
    if expected_name.lower() not in names or signed.name.lower() != expected_name.lower():
        raise AuthError(f"signed key is not from {expected_name!r}")
    cert_key = cert.public_key()
    if not isinstance(cert_key, ec.EllipticCurvePublicKey):
        raise AuthError("peer certificate key is not an EC key")
    try:
        message = _key_message(run_id, signed.public_key)
        cert_key.verify(signed.signature, message, ec.ECDSA(hashes.SHA256()))
        _public_key(signed.public_key)
    except (InvalidSignature, ProtocolError):
        raise AuthError(f"mix key signature of {expected_name!r} does not verify") from None
    return signed.public_key
