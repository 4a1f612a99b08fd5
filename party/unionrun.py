"""The union of the released records at a party: its mixnet key, its onion-wrapped
records (padded, shuffled) and its hop of the mix (strip one layer, shuffle).  A DP run
releases no records: every step is refused."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Sequence

from cryptography.hazmat.primitives.asymmetric import ec

from fedanon.errors import DataError, ProtocolError
from fedanon.io.release import output_columns
from fedanon.party.runstate import RunState
from fedanon.security import mixnet
from fedanon.union.localparty import LocalParty

log = logging.getLogger(__name__)


class RunUnion(RunState):
    def _records_allowed(self) -> None:
        if self.dp is not None:
            raise ProtocolError(
                "a DP run releases noisy counts only: this party sends no records (no union)"
            )

    def union_key(self, tls_key: ec.EllipticCurvePrivateKey, cert_pem: bytes) -> mixnet.SignedKey:
        self._records_allowed()
        with self.lock:
            if self.mix_key is None:
                self.mix_key, self.mix_public = mixnet.generate_keypair()
            raw = self.mix_public
        return mixnet.sign_public_key(self.name, raw, self.run_id, tls_key, cert_pem)

    def union_batch(
        self, keys: Sequence[mixnet.SignedKey], ca_pem: bytes, pad_size: int
    ) -> list[bytes]:
        """Verify every hop key, pad and onion-wrap this party's released records."""
        self._records_allowed()
        if self.transcript is not None:  # records leave: the ledger's check, as for statistics
            self.transcript.sending("MIXNET", self.party.state.round, 0, b"")
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
        if not isinstance(self.party, LocalParty):  # only a record release has records
            raise ProtocolError("this party's run releases no records (no union)")
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
            except ProtocolError as exc:  # a record's size: the leader learns the fixed
                raise DataError(  # sentence only (this text stays in the hospital's log)
                    f"a released record does not fit the pad ({exc}); raise [run] "
                    "max_field_bytes in the federation config (fedanon federate: "
                    "--max-field-bytes)"
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
