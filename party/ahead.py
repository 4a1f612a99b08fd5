"""The next round's count statistics, computed ahead of the vector that asks for them.

In the ring every party would otherwise compute in turn, one after the other; pairwise, a
decision carried in ``Contribute`` is computed in the same call instead
(:meth:`fedanon.party.run.PartyRun.instruct`, ``ahead=False``).
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import Future

from fedanon.arrays import IntArray
from fedanon.errors import ProtocolError
from fedanon.net.rpc import MAX_VECTOR_LEN
from fedanon.party.runstate import RunState
from fedanon.tds.state import Phase
from fedanon.union.localparty import LocalParty


class StatsAhead(RunState):
    def speculate(self) -> None:
        """Start computing the count statistics the leader will ask for next, in the
        background, so that a vector finds them ready instead of waiting for them (in the
        ring every party would otherwise compute in turn, one after the other).

        Only where the next sum is certainly a count sum of the current round: an LKC run,
        not ended, no split pending (the rule of :func:`fedanon.tds.engine.run`: counts follow
        every applied decision once no split is pending).  The computation is the one
        :meth:`relay` would make -- same state, same call, once -- and its result is used
        only by the vector of exactly that round, size and layout."""
        party = self.party
        st = party.state
        if self.dp is not None or type(party) is not LocalParty or st.ended:
            return
        if st.pending_splits():
            return
        size, digest = party.counts_key()
        key = (st.round, size, digest)
        fut: Future[IntArray] = Future()

        def compute() -> None:
            try:
                fut.set_result(party.stats(Phase.COUNTS, key[0], key[1], key[2]))
            except BaseException as exc:
                fut.set_exception(exc)

        self.ahead = (key, fut)
        threading.Thread(target=compute, name="stats-ahead", daemon=True).start()

    def _settle_ahead(self) -> None:
        """Wait for a computation ahead still running (its result stays usable)."""
        if self.ahead is not None:
            self.ahead[1].exception()  # waits; an error surfaces when the result is used

    def statistics(self, phase: Phase, round_: int, size: int, digest: bytes) -> IntArray:
        """This party's statistics for a sum: computed ahead if they were, else now.
        (Holding ``cond``.)  A free re-run whose state left the released runs' path
        reserves a new release first, or is refused (the ledger's transcript).  A vector
        longer than :data:`~fedanon.net.rpc.MAX_VECTOR_LEN` (a union sketch whose layout the
        leader inflated) is refused before anything is allocated."""
        if not 0 <= size <= MAX_VECTOR_LEN:
            raise ProtocolError(
                f"a sum of {size} elements: more than this party computes ({MAX_VECTOR_LEN})"
            )
        # the same statistics of one state twice, under two sums, would let a leader that
        # keeps the other hospitals in step subtract this one's change of statistics (ring
        # or pairwise): each (state, phase, size, layout) is computed once (retries are
        # answered from the first computation, never from here)
        what = hashlib.sha256(
            self.chain + f"{int(phase)};{int(size)};".encode() + bytes(digest)
        ).digest()
        if what in self.stats_sent:
            raise ProtocolError(f"the statistics of this state were already sent ({phase.name})")
        self.stats_sent.add(what)
        if self.transcript is not None:
            self.transcript.sending(phase.name, round_, size, digest)
        ahead, self.ahead = self.ahead, None
        if ahead is not None:
            (a_round, a_size, a_digest), fut = ahead
            if phase == Phase.COUNTS and round_ == a_round:
                stats = fut.result()
                if (a_size, a_digest) != (size, digest):
                    raise ProtocolError("statistics layout differs between leader and party")
                self.ahead_used += 1
                return stats
            fut.exception()  # another sum than foreseen: never two computations at once
        return self.party.stats(phase, round_, size, digest)
