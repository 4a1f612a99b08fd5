"""Per-run state of a party daemon: its rows, its replica, its ring neighbours, the union.

One :class:`PartyRun` per run id; nothing in here talks gRPC (:mod:`fedanon.party.service`
hands in the function that sends a vector to the successor); errors are :mod:`fedanon.errors`
types.  By concept: the run's state, waits and end (:mod:`fedanon.party.runstate`), the
leader's instructions (here), the statistics ahead of a vector (:mod:`fedanon.party.ahead`),
the ring sum (:mod:`fedanon.party.ringsum`), the union (:mod:`fedanon.party.unionrun`).
Pairwise sums: :mod:`fedanon.party.pairsum`.
"""

from __future__ import annotations

from fedanon.errors import ProtocolError
from fedanon.ledger.transcript import update_bytes
from fedanon.party.ringsum import RingSum
from fedanon.party.runstate import Peer, RunStatus
from fedanon.party.unionrun import RunUnion
from fedanon.security.keyagree import chain_applied
from fedanon.tds.state import Update
from fedanon.union.localparty import LocalParty

__all__ = ["PartyRun", "Peer", "RunStatus"]


class PartyRun(RingSum, RunUnion):
    """A run at a party: :class:`~fedanon.party.runstate.RunState` with its behaviour."""

    # instructions -----------------------------------------------------------------------
    def instruct(
        self, seq: int, update: Update, deadline: float, chained: bool = False, ahead: bool = True
    ) -> bool:
        """Apply the leader's instruction number ``seq`` (0, 1, ...) in order; a repeat is a
        no-op (returns False).  ``chained``: another specialization of the same round
        follows; the statistics of the state right after this one are counted now (the
        first segment(s) of the next COUNTS vector).  ``ahead``: compute the next statistics
        in the background (not for a decision carried in a pairwise ``Contribute``)."""
        with self.cond:
            self.wait(lambda: self.instructions >= seq, deadline, f"instruction {seq - 1}")
            if seq < self.instructions:
                return False
            self._settle_ahead()  # the state must not change under a computation ahead
            if chained and (self.dp is not None or type(self.party) is not LocalParty):
                raise ProtocolError("a chained instruction in a run that has no such rounds")
            if self.spec.m > 0:  # m-privacy: only what passed the coalition check
                if self.mpc is None or chained:
                    raise ProtocolError("an m-private run's instruction without its MPC check")
                self.mpc.admit(seq, update)
            self.party.apply(update)
            if self.transcript is not None:  # the ledger's chain of what the leader decided
                self.transcript.applied(update, chained)
            # the state reached: binds the pairwise masks; no state's statistics twice
            self.chain = chain_applied(self.chain, update_bytes(update, chained))
            if chained:
                self.party.keep_segment()
            self.instructions += 1
            if update.union is None and not chained and ahead:
                self.speculate()
            self.cond.notify_all()
        return True

    def wait_ended(self, deadline: float) -> None:  # until the final instruction is applied
        with self.cond:
            self.wait(lambda: self.party.state.ended, deadline, "the final instruction")
