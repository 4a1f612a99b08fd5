"""What a ledger row says about a Prepare: who asked (:class:`Caller`) and for what
(:class:`RunFacts`).  Plain values, built by the daemon (:mod:`fedanon.party.ledgered`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from fractions import Fraction

from fedanon.ledger.fingerprint import DataFingerprint

DP = "dp"


@dataclass(frozen=True)
class Caller:
    """The peer of an RPC: certificate subject name (``-`` when none), the SHA-256 of its
    certificate (``-``), and its address (``ipv4:10.0.0.5:41234``)."""

    identity: str = "-"
    cert_fp: str = "-"
    peer: str = "-"

    @property
    def address(self) -> str:
        """The peer's host without the port (what lockouts by address key on)."""
        p = self.peer
        for prefix in ("ipv4:", "ipv6:"):
            if p.startswith(prefix):
                host = p[len(prefix) :]
                return host.rsplit(":", 1)[0] if ":" in host else host
        return p


@dataclass(frozen=True)
class RunFacts:
    """An accepted proposal, as the ledger records and the budgets judge it."""

    run_id: str  # hex
    ring: tuple[str, ...]
    spec_hash: str  # hex: the run hash the party answers Prepare with
    method: str  # "dp", "lkc" or a plug-in's model name
    params: str  # e.g. "epsilon=1 h=10 score=max" or "L=3 K=10 C=0.5 score=infogain"
    epsilon: Fraction | None  # DP runs
    data: DataFingerprint
    rows: int

    def __post_init__(self) -> None:
        if (self.method == DP) != (self.epsilon is not None):
            raise ValueError("epsilon is given for DP runs and only for them")
        if self.epsilon is not None and self.epsilon <= 0:
            raise ValueError("epsilon must be positive")

    @property
    def release_key(self) -> str:
        """The same spec on the same ring over unchanged data gives the same release."""
        text = "\0".join([self.data.digest, self.spec_hash, *self.ring])
        return hashlib.sha256(text.encode()).hexdigest()


def short(run_id: str) -> str:
    """A run id as logs and refusals show it."""
    return run_id[:8]
