"""Unit tests of the decryption mix-net (common/security/mixnet.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID
from hypothesis import given
from hypothesis import strategies as st

from fedanon.errors import AuthError, ProtocolError
from fedanon.security.mixnet import (
    LAYER_OVERHEAD,
    SignedKey,
    ciphertext_size,
    decode_record,
    encode_record,
    encoded_size,
    generate_keypair,
    sign_public_key,
    strip_and_shuffle,
    verify_signed_key,
    wrap_layers,
)

RUN = b"run-0001"
PAD = 64


def _submitted(plaintext: bytes, hop_keys: list[bytes], run_id: bytes = RUN) -> bytes:
    """What a party submits to hop 0: the outermost layer, as party/run.py sends it."""
    return wrap_layers(plaintext, hop_keys, run_id)[0]


# --- records ----------------------------------------------------------------------------


@given(st.lists(st.text(max_size=20), max_size=6))
def test_record_round_trip(fields: list[str]) -> None:
    size = encoded_size(fields)
    data = encode_record(fields, size + 7)
    assert len(data) == size + 7
    assert decode_record(data) == tuple(fields)


def test_record_layout() -> None:
    assert encode_record(["a", "é"], 20) == (
        b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01a" + b"\x00\x00\x00\x02\xc3\xa9" + bytes(5)
    )


def test_padding_overflow() -> None:
    encode_record(["abcd"], 12)  # exactly fits
    with pytest.raises(ProtocolError, match="needs 13 bytes"):
        encode_record(["abcde"], 12)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x00",  # no count
        b"\xff\xff\xff\xff" + bytes(8),  # absurd count
        b"\x00\x00\x00\x01\x00\x00\x00\x09abc",  # field longer than record
        b"\x00\x00\x00\x01\x00\x00\x00\x01\xff",  # bad UTF-8
        b"\x00\x00\x00\x01\x00\x00\x00\x01a\x00\x01",  # non-zero padding
        b"\x00\x00\x00\x02\x00\x00\x00\x01a\x00\x00",  # truncated length
    ],
)
def test_decode_rejects(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_record(data)


# --- mixing -----------------------------------------------------------------------------


def _setup(hops: int = 4) -> tuple[list[X25519PrivateKey], list[bytes]]:
    pairs = [generate_keypair() for _ in range(hops)]
    return [p for p, _ in pairs], [k for _, k in pairs]


def _records(party: int, n: int) -> list[tuple[str, ...]]:
    return [(f"p{party}", "x" * (i % 7), "30-40", "Engineer") for i in range(n)]


def test_round_trip_three_parties_and_leader() -> None:
    privs, pubs = _setup(4)  # hops 0..2 are the parties in ring order, hop 3 the leader
    batches = [_records(p, 10) for p in range(3)]
    batches[1].append(batches[0][0])  # equal records from different parties both survive
    layers = [[wrap_layers(encode_record(r, PAD), pubs, RUN) for r in b] for b in batches]
    current = [lay[0] for party in layers for lay in party]
    first = list(current)
    for hop in range(4):
        own = [lay[hop] for lay in layers[hop]] if hop < 3 else []
        current = strip_and_shuffle(current, privs[hop], RUN, hop, len(first), own)
    out = [decode_record(c) for c in current]
    assert Counter(out) == Counter(r for b in batches for r in b)
    assert out != [r for b in batches for r in b]  # shuffled (fails with prob. 1/31!)


def test_layers_match_stripping_and_have_fixed_size() -> None:
    privs, pubs = _setup(4)
    short, long = encode_record(["a"], PAD), encode_record(["a" * 40, "b"], PAD)
    ls, ll = wrap_layers(short, pubs, RUN), wrap_layers(long, pubs, RUN)
    assert _submitted(short, pubs) != ls[0]  # fresh randomness every time
    for hop in range(4):
        assert len(ls[hop]) == len(ll[hop]) == ciphertext_size(PAD, 4 - hop)
        assert len(ls[hop]) == PAD + (4 - hop) * LAYER_OVERHEAD
        stripped = strip_and_shuffle([ls[hop]], privs[hop], RUN, hop, 1)
        assert stripped == [ls[hop + 1] if hop < 3 else short]


def _hop0_batch(n: int = 5) -> tuple[list[X25519PrivateKey], list[bytes], list[bytes]]:
    privs, pubs = _setup(2)
    return privs, pubs, [_submitted(encode_record([str(i)], PAD), pubs) for i in range(n)]


def test_count_mismatch_and_mixed_sizes() -> None:
    privs, pubs, batch = _hop0_batch()
    with pytest.raises(ProtocolError, match="expected 6"):
        strip_and_shuffle(batch, privs[0], RUN, 0, 6)
    odd = _submitted(encode_record(["x"], PAD + 1), pubs)
    with pytest.raises(ProtocolError, match="size"):
        strip_and_shuffle([*batch[:4], odd], privs[0], RUN, 0, 5)


def test_duplicate_rejected() -> None:
    privs, _, batch = _hop0_batch()
    with pytest.raises(ProtocolError, match="duplicate"):
        strip_and_shuffle([*batch[:4], batch[0]], privs[0], RUN, 0, 5)


def test_missing_own_record_detected() -> None:
    privs, pubs, batch = _hop0_batch()
    own = batch[:2]
    forged = _submitted(encode_record(["forged"], PAD), pubs)
    with pytest.raises(ProtocolError, match="1 of this party's own") as info:
        strip_and_shuffle([forged, *batch[1:]], privs[0], RUN, 0, 5, own)
    assert batch[0].hex()[:16] not in str(info.value)
    assert len(strip_and_shuffle(batch, privs[0], RUN, 0, 5, own)) == 5


def test_wrong_key_tamper_and_binding() -> None:
    privs, _, batch = _hop0_batch()
    with pytest.raises(ProtocolError, match="failed to decrypt"):
        strip_and_shuffle(batch, privs[1], RUN, 0, 5)
    tampered = bytearray(batch[2])
    tampered[40] ^= 1
    with pytest.raises(ProtocolError, match="ciphertext 2 failed"):
        strip_and_shuffle([*batch[:2], bytes(tampered), *batch[3:]], privs[0], RUN, 0, 5)
    with pytest.raises(ProtocolError):  # layer bound to another hop index
        strip_and_shuffle(batch, privs[0], RUN, 1, 5)
    with pytest.raises(ProtocolError):  # layer bound to another run
        strip_and_shuffle(batch, privs[0], b"run-0002", 0, 5)


def test_bad_public_keys_rejected() -> None:
    with pytest.raises(ProtocolError, match="32 bytes"):
        _submitted(b"x", [bytes(31)])
    with pytest.raises(ProtocolError, match="low-order"):
        _submitted(b"x", [bytes(32)])
    with pytest.raises(ProtocolError, match="at least one hop"):
        _submitted(b"x", [])


# --- key binding ------------------------------------------------------------------------


def _ca(cn: str = "fedanon-ca") -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate], dns: str, days: int = 10
) -> tuple[ec.EllipticCurvePrivateKey, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns)]))
        .issuer_name(ca[1].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False)
        .sign(ca[0], hashes.SHA256())
    )
    return key, cert.public_bytes(Encoding.PEM)


@pytest.fixture(scope="module")
def pki() -> tuple[bytes, SignedKey]:
    ca = _ca()
    tls_key, cert_pem = _leaf(ca, "hospital-a")
    signed = sign_public_key("hospital-a", generate_keypair()[1], RUN, tls_key, cert_pem)
    return ca[1].public_bytes(Encoding.PEM), signed


def test_signed_key_good(pki: tuple[bytes, SignedKey]) -> None:
    ca_pem, signed = pki
    assert verify_signed_key(signed, ca_pem, "hospital-a", RUN) == signed.public_key


def test_signed_key_wrong_name_or_run(pki: tuple[bytes, SignedKey]) -> None:
    ca_pem, signed = pki
    with pytest.raises(AuthError, match="not from 'hospital-b'"):
        verify_signed_key(signed, ca_pem, "hospital-b", RUN)
    with pytest.raises(AuthError):
        verify_signed_key(replace(signed, name="hospital-b"), ca_pem, "hospital-b", RUN)
    with pytest.raises(AuthError, match="does not verify"):
        verify_signed_key(signed, ca_pem, "hospital-a", b"run-0002")


def test_signed_key_other_ca(pki: tuple[bytes, SignedKey]) -> None:
    ca_pem, _ = pki
    rogue = _ca()  # same subject name as the real CA, different key
    tls_key, cert_pem = _leaf(rogue, "hospital-a")
    signed = sign_public_key("hospital-a", generate_keypair()[1], RUN, tls_key, cert_pem)
    with pytest.raises(AuthError, match="not issued by the CA"):
        verify_signed_key(signed, ca_pem, "hospital-a", RUN)


def test_signed_key_tampered(pki: tuple[bytes, SignedKey]) -> None:
    ca_pem, signed = pki
    with pytest.raises(AuthError, match="does not verify"):
        verify_signed_key(
            replace(signed, public_key=generate_keypair()[1]), ca_pem, "hospital-a", RUN
        )
    bad_sig = bytearray(signed.signature)
    bad_sig[-1] ^= 1
    with pytest.raises(AuthError, match="does not verify"):
        verify_signed_key(replace(signed, signature=bytes(bad_sig)), ca_pem, "hospital-a", RUN)
    with pytest.raises(AuthError, match="exactly one PEM"):
        verify_signed_key(replace(signed, cert_pem=b"junk"), ca_pem, "hospital-a", RUN)


def test_signed_key_expired(pki: tuple[bytes, SignedKey]) -> None:
    ca_pem, signed = pki
    later = datetime.now(UTC) + timedelta(days=20)  # peer cert expired, CA still valid
    with pytest.raises(AuthError, match="peer certificate is not valid"):
        verify_signed_key(signed, ca_pem, "hospital-a", RUN, now=later)
