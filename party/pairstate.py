"""The pairwise material of one run at a party (:mod:`fedanon.party.pairsum` uses it,
:class:`fedanon.party.run.PartyRun` keeps it): below both, so neither imports the other back."""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import x25519

from fedanon.arrays import IntArray
from fedanon.party.faults import Failure
from fedanon.security.keyagree import PairSeeds
from fedanon.security.mixnet import SignedKey
from fedanon.security.pairwise import SumOrder


@dataclass
class PairState:
    """The run's pairwise material (kept in :attr:`PartyRun.pair`, guarded by its lock)."""

    private: x25519.X25519PrivateKey
    signed: SignedKey
    seeds: PairSeeds | None = None
    rejected: Failure | None = None  # a key that failed: every order fails with it
    keys: tuple[bytes, ...] = ()  # the public keys the seeds were derived from
    next_sum: int = 0
    last: tuple[SumOrder, IntArray, PairSeeds] | None = None  # a retry of the last order
