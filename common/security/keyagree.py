"""Per-run key agreement of the pairwise secure sum (Bonawitz et al., CCS 2017, without
dropout recovery).

Each party draws an ephemeral X25519 key pair per run and signs (label, run id, its name,
the public key) with the private key of its federation (mTLS) certificate, ECDSA P-256 /
SHA-256.  The leader hands every party every party's signed key; a party checks each one --
the certificate is issued by the federation CA, valid now, a *party* certificate of exactly
the name the accepted ring gives that position; the signature verifies over this run's id
-- and derives one 32-byte seed per pair: HKDF-SHA256 over the X25519 shared secret, with
the run id and both names (lower ring position first) in ``info``.  A key that fails any
check raises :class:`KeyRejected` naming the party whose key it is: a leader that swaps,
drops or replays (an earlier run's) key is caught before any statistics leave the party.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, x25519
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from fedanon.errors import AuthError
from fedanon.security.certs import identity_of
from fedanon.security.mixnet import SignedKey
from fedanon.security.prg import SEED_BYTES

__all__ = [
    "CHAIN_START",
    "KeyRejected",
    "PairSeeds",
    "chain_applied",
    "chain_start",
    "derive_seeds",
    "new_sum_key",
    "sum_seeds",
    "verify_sum_key",
]

_KEY_LABEL = b"fedanon-pairwise-key/v1\x00"
_SEED_LABEL = b"fedanon-pairwise-seed/v1\x00"
_SUM_LABEL = b"fedanon-pairwise-sum/v1\x00"
_CHAIN_LABEL = b"fedanon-pairwise-chain/v1\x00"
CHAIN_START = hashlib.sha256(b"fedanon-pairwise-chain/v1").digest()
PUBLIC_KEY_SIZE = 32


class KeyRejected(AuthError):
    """The signed sum key of party ``holder`` failed verification."""

    def __init__(self, holder: str, detail: str) -> None:
        self.holder = holder
        super().__init__(f"the pairwise sum key of {holder} {detail}")


def _long(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def _field(data: bytes) -> bytes:
    if len(data) > 255:
        raise ValueError("field longer than 255 bytes")
    return bytes([len(data)]) + data


def _key_message(run_id: bytes, name: str, public_key: bytes) -> bytes:
    return _KEY_LABEL + _field(run_id) + _field(name.encode("utf-8")) + public_key


def new_sum_key(
    name: str, run_id: bytes, tls_key: ec.EllipticCurvePrivateKey, cert_pem: bytes
) -> tuple[x25519.X25519PrivateKey, SignedKey]:
    """A fresh X25519 key pair for this run and its public half, signed by ``tls_key``."""
    private = x25519.X25519PrivateKey.generate()
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    sig = tls_key.sign(_key_message(run_id, name, raw), ec.ECDSA(hashes.SHA256()))
    return private, SignedKey(name, raw, sig, cert_pem)


def verify_sum_key(
    signed: SignedKey, ca_pem: bytes, name: str, run_id: bytes, *, now: datetime | None = None
) -> x25519.X25519PublicKey:
    """The public key of party ``name`` from ``signed``; :class:`KeyRejected` naming ``name``
    unless every check passes (CA, validity, party role, name, this run, signature)."""
    moment = now or datetime.now(UTC)
    try:
        (ca,) = x509.load_pem_x509_certificates(ca_pem)
        (cert,) = x509.load_pem_x509_certificates(signed.cert_pem)
    except ValueError:
        raise KeyRejected(name, "comes without exactly one PEM certificate") from None
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise KeyRejected(name, "has a certificate not issued by the federation CA") from None
    if not cert.not_valid_before_utc <= moment <= cert.not_valid_after_utc:
        raise KeyRejected(name, f"has a certificate not valid at {moment.isoformat()}")
    try:
        ident = identity_of(cert)
    except AuthError as exc:
        raise KeyRejected(name, f"has no federation identity: {exc}") from None
    if ident.role != "party":
        raise KeyRejected(name, f"is certified for role {ident.role!r}, not party")
    if ident.name != name or signed.name != name:
        raise KeyRejected(name, f"was signed by {ident.name!r} for {signed.name[:64]!r}")
    cert_key = cert.public_key()
    if not isinstance(cert_key, ec.EllipticCurvePublicKey) or len(signed.public_key) != 32:
        raise KeyRejected(name, "is malformed")
    try:
        message = _key_message(run_id, name, signed.public_key)
        cert_key.verify(signed.signature, message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise KeyRejected(name, "does not verify for this run (swapped or replayed)") from None
    return x25519.X25519PublicKey.from_public_bytes(signed.public_key)


@dataclass(frozen=True)
class PairSeeds:
    """One party's seeds: ``seeds[j]`` is shared with the party at ring position ``j``
    (None at the party's own position)."""

    position: int
    seeds: tuple[bytes | None, ...]

    def __post_init__(self) -> None:
        if not 0 <= self.position < len(self.seeds) or self.seeds[self.position] is not None:
            raise ValueError("a party has no seed with itself")
        if any(s is not None and len(s) != SEED_BYTES for s in self.seeds):
            raise ValueError(f"pair seeds are {SEED_BYTES} bytes")


def pair_seed(
    private: x25519.X25519PrivateKey,
    peer: x25519.X25519PublicKey,
    run_id: bytes,
    first: str,
    second: str,
    holder: str,
) -> bytes:
    """HKDF-SHA256 of the X25519 shared secret; ``first`` is the lower ring position,
    ``holder`` the party whose public key ``peer`` is (named when it is refused)."""
    try:
        shared = private.exchange(peer)
    except ValueError:  # a low-order point: all-zero shared secret
        raise KeyRejected(holder, "is a low-order point") from None
    info = _SEED_LABEL + _field(run_id) + _field(first.encode()) + _field(second.encode())
    return HKDF(hashes.SHA256(), SEED_BYTES, salt=None, info=info).derive(shared)


def derive_seeds(
    private: x25519.X25519PrivateKey,
    keys: Sequence[SignedKey],
    ring: Sequence[str],
    position: int,
    ca_pem: bytes,
    run_id: bytes,
) -> PairSeeds:
    """Verify every key (one per ring position) and derive this party's seeds."""
    own = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    me = ring[position]
    if len(keys) != len(ring):
        names = {k.name for k in keys}
        missing = next((n for n in ring if n not in names), ring[-1])
        raise KeyRejected(missing, f"is missing ({len(keys)} keys for {len(ring)} parties)")
    seeds: list[bytes | None] = []
    for j, (signed, name) in enumerate(zip(keys, ring, strict=True)):
        if j == position:
            if signed.public_key != own or signed.name != me:
                raise KeyRejected(me, "was replaced by the leader")
            seeds.append(None)
            continue
        peer = verify_sum_key(signed, ca_pem, name, run_id)
        if signed.public_key == own:
            raise KeyRejected(name, "repeats this party's own key")
        lo, hi = (name, me) if j < position else (me, name)
        seeds.append(pair_seed(private, peer, run_id, lo, hi, name))
    return PairSeeds(position, tuple(seeds))


def chain_start(run_id: bytes, run_hash: bytes) -> bytes:
    """A run's chain before any instruction: bound to the run and to the spec and taxonomies
    (the run hash) each side accepted, so hospitals handed different specs never share a
    chain (their pairwise masks do not cancel; a ring vector is refused)."""
    return hashlib.sha256(_CHAIN_LABEL + _long(b"start") + _long(run_id) + _long(run_hash)).digest()


def chain_applied(chain: bytes, instruction: bytes) -> bytes:
    """The chain of applied instructions after one more (its canonical bytes)."""
    return hashlib.sha256(_CHAIN_LABEL + _long(chain) + _long(instruction)).digest()


def sum_seeds(seeds: PairSeeds, chain: bytes, order: bytes) -> PairSeeds:
    """The seeds of one sum: every pair seed bound (HMAC-SHA256) to the chain of instructions
    the party has applied and to the sum's order (its canonical bytes).  Two parties' masks
    cancel only when both reached the same state and answer the same order: a leader that
    gives one hospital a decision the others have not applied, or asks them different
    orders under one sum number, gets vectors whose masks do not cancel (uniformly random
    sums), never one hospital's statistics as the difference of two sums."""
    ctx = _SUM_LABEL + _long(chain) + _long(order)
    return PairSeeds(
        seeds.position,
        tuple(None if s is None else hmac.digest(s, ctx, "sha256") for s in seeds.seeds),
    )
