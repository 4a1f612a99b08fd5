"""Per-run state of a party daemon: its rows, its replica, its ring neighbours, the union.

One :class:`PartyRun` per run id.  Nothing in here talks gRPC except through the successor
stub that :mod:`party.service` hands in; everything raises :mod:`common.errors` types.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.asymmetric import ec, x25519

from common import mixnet
from common.engine import LocalParty
from common.errors import InputError, ProtocolError
from common.release import output_columns
from common.securesum import add_share
from common.spec import RunSpec
from common.state import Phase

log = logging.getLogger(__name__)
U64 = npt.NDArray[np.uint64]
CACHE_ROUNDS = 4  # (round, phase) results kept for idempotent retries


@dataclass(frozen=True)
class Peer:
    name: str
    address: str


Forward = Callable[[U64, int, Phase, bytes], None]


@dataclass
class PartyRun:
    run_id: bytes
    name: str
    spec: RunSpec
    party: LocalParty
    ring: tuple[Peer, ...]
    position: int
    leader: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    results: OrderedDict[tuple[int, Phase], tuple[bytes, U64]] = field(default_factory=OrderedDict)
    mix_key: x25519.X25519PrivateKey | None = None
    mix_public: bytes = b""
    pad_size: int = 0
    last_used: float = field(default_factory=time.monotonic)
    own_layers: list[frozenset[bytes]] = field(default_factory=list)
    stats_bytes_sent: int = 0  # statistics vectors this party sent (relay + collect)
    busy: int = 0  # RPCs working on this run right now (never reaped while busy)

    @property
    def predecessor(self) -> tuple[str, str]:
        """(name, role) of the only identity that may Relay to this party."""
        if self.position == 0:
            return self.leader, "leader"
        return self.ring[self.position - 1].name, "party"

    @property
    def successor(self) -> Peer | None:
        return self.ring[self.position + 1] if self.position + 1 < len(self.ring) else None

    # secure sum -------------------------------------------------------------------------
    def relay(
        self, round_: int, phase: Phase, layout_hash: bytes, masked: U64, forward: Forward
    ) -> None:
        """Add this party's statistics and pass the vector on (or keep it, if last).

        A retry of a (round, phase) already processed forwards the cached vector again and
        never adds the statistics twice.
        """
        key = (round_, phase)
        with self.lock:
            cached = self.results.get(key)
            if cached is not None:
                if cached[0] != layout_hash or cached[1].size != masked.size:
                    raise ProtocolError(f"retry of round {round_} does not match the first try")
                out = cached[1]
                log.info(
                    "run %s: retry of round %d phase %s", self.run_id.hex()[:8], round_, phase.name
                )
            else:
                stats = self.party.stats(phase, round_, masked.size, layout_hash)
                out = add_share(masked, stats)
                self.results[key] = (layout_hash, out)
                while len(self.results) > CACHE_ROUNDS:
                    self.results.popitem(last=False)
        if self.successor is not None:
            forward(out, round_, phase, layout_hash)
            with self.lock:
                self.stats_bytes_sent += out.nbytes

    def collected(self, round_: int, phase: Phase) -> tuple[bytes, U64]:
        """(layout hash, sum) of a round, for the leader; counted as statistics sent."""
        if self.successor is not None:
            raise ProtocolError("only the last party of the ring delivers the sum")
        with self.lock:
            cached = self.results.get((round_, phase))
            if cached is None:
                raise ProtocolError(f"no sum for round {round_} phase {phase.name}")
            self.stats_bytes_sent += cached[1].nbytes
        return cached

    # union ------------------------------------------------------------------------------
    def union_key(self, tls_key: ec.EllipticCurvePrivateKey, cert_pem: bytes) -> mixnet.SignedKey:
        with self.lock:
            if self.mix_key is None:
                self.mix_key, self.mix_public = mixnet.generate_keypair()
            raw = self.mix_public
        return mixnet.sign_public_key(self.name, raw, self.run_id, tls_key, cert_pem)

    def union_batch(
        self, keys: Sequence[mixnet.SignedKey], ca_pem: bytes, pad_size: int
    ) -> list[bytes]:
        """Verify every hop key, pad and onion-wrap this party's released records."""
        names = [p.name for p in self.ring] + [self.leader]
        if len(keys) != len(names):
            raise ProtocolError(f"expected {len(names)} mix keys, got {len(keys)}")
        hop_keys = [
            mixnet.verify_signed_key(k, ca_pem, n, self.run_id)
            for k, n in zip(keys, names, strict=True)
        ]
        if self.mix_key is None:
            raise ProtocolError("UnionBatch before UnionKey")
        t0 = time.perf_counter()
        cols = self.party.released_columns()
        order = output_columns(self.spec)
        rows = list(zip(*(cols[c] for c in order), strict=True))
        secrets.SystemRandom().shuffle(rows)
        n_hops = len(self.ring)
        own: list[set[bytes]] = [set() for _ in range(n_hops)]
        out: list[bytes] = []
        for row in rows:
            try:
                plain = mixnet.encode_record(row, pad_size)
            except ProtocolError:
                need = mixnet.encoded_size(row)
                raise InputError(
                    f"a released record needs {need} bytes but the pad size is "
                    f"{pad_size}; raise [run] max_field_bytes in the federation config"
                ) from None
            layers = mixnet.wrap_layers(plain, hop_keys, self.run_id)
            for i in range(n_hops):
                own[i].add(layers[i])
            out.append(layers[0])
        self.own_layers = [frozenset(s) for s in own]
        self.pad_size = pad_size
        log.info(
            "run %s: wrapped %d records in %.2fs",
            self.run_id.hex()[:8],
            len(out),
            time.perf_counter() - t0,
        )
        return out

    def hop_size(self, hop: int) -> int:
        """Ciphertext size as hop ``hop`` receives it (``hop`` = number of layers stripped)."""
        return mixnet.ciphertext_size(self.pad_size, len(self.ring) + 1 - hop)

    def mix(self, hop: int, batch: Sequence[bytes], expected: int) -> list[bytes]:
        if hop != self.position:
            raise ProtocolError(f"party {self.name} is hop {self.position}, asked for hop {hop}")
        if self.mix_key is None or not self.own_layers:
            raise ProtocolError("Mix before UnionBatch")
        t0 = time.perf_counter()
        out = mixnet.strip_and_shuffle(
            batch, self.mix_key, self.run_id, hop, expected, own=self.own_layers[hop]
        )
        log.info(
            "run %s: mixed %d records in %.2fs",
            self.run_id.hex()[:8],
            len(out),
            time.perf_counter() - t0,
        )
        return out
