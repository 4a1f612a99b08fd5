"""A party's side of the pairwise secure sum (:mod:`fedanon.security.pairwise`).

At Prepare the party draws its per-run X25519 key and signs it (:func:`start`); the leader
then hands it every party's signed key (:func:`set_keys`): each is verified and one seed per
pair derived before anything else of the run happens.  A key that fails is recorded as a
failure naming *its holder* (kind ``key``), and every later order of the run fails with it:
no statistics leave the party.

For each sum the leader orders (:func:`contribute`) the party waits for the instructions
the sum was computed after (as a relayed vector does), computes its statistics once, and
streams them masked.  The sum number is the masks' nonce: the party takes each number once,
in order -- a repeat of the last order (a retry) gets the same bytes again, any other
repeat is refused, so the leader never gets two different vectors under one mask.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

import grpc
from cryptography.hazmat.primitives.asymmetric import ec

from fedanon.errors import ProtocolError
from fedanon.logsafe import safe
from fedanon.party.faults import Failure, PeerFailed, TimedOut
from fedanon.party.pairstate import PairState
from fedanon.party.run import PartyRun
from fedanon.security.keyagree import KeyRejected, derive_seeds, new_sum_key, sum_seeds
from fedanon.security.mixnet import SignedKey
from fedanon.security.pairwise import SumOrder, masked_chunks

__all__ = ["PairState", "contribute", "order_bytes", "set_keys", "start"]


def order_bytes(order: SumOrder) -> bytes:
    """The canonical bytes of a sum's order (what its masks are bound to)."""
    fields = (order.sum_no, order.round, int(order.phase), order.size, order.instructions)
    return b"".join(int(f).to_bytes(8, "big", signed=True) for f in fields) + bytes(
        order.layout_hash
    )


def start(run: PartyRun, tls_key: ec.EllipticCurvePrivateKey, cert_pem: bytes) -> SignedKey:
    """This run sums pairwise: draw and sign the party's key (once)."""
    with run.lock:
        if run.pair is None:
            private, signed = new_sum_key(run.name, run.run_id, tls_key, cert_pem)
            run.pair = PairState(private, signed)
        state: PairState = run.pair
        return state.signed


def _state(run: PartyRun) -> PairState:
    if run.pair is None:
        raise ProtocolError("this run sums along the ring, not pairwise")
    state: PairState = run.pair
    return state


def set_keys(run: PartyRun, keys: Sequence[SignedKey], ca_pem: bytes) -> None:
    """Verify every party's key and derive the seeds; a failure names the key's holder."""
    state = _state(run)
    ring = [p.name for p in run.ring]
    with run.cond:
        if state.rejected is not None:
            raise PeerFailed(state.rejected)
        if state.seeds is not None:
            if tuple(k.public_key for k in keys) != state.keys:
                raise ProtocolError("the pairwise keys were already set, differently")
            return
        try:
            state.seeds = derive_seeds(state.private, keys, ring, run.position, ca_pem, run.run_id)
            state.keys = tuple(k.public_key for k in keys)
        except KeyRejected as exc:
            code = grpc.StatusCode.PERMISSION_DENIED
            state.rejected = Failure(exc.holder, "PairKeys", "key", code, safe(exc))
            raise PeerFailed(state.rejected) from None
        finally:
            run.cond.notify_all()


def contribute(
    run: PartyRun,
    order: SumOrder,
    chunk_words: int,
    deadline: float,
    active: Callable[[], bool],
) -> Iterator[tuple[int, bytes]]:
    """This party's masked statistics of ``order``, as (seq, bytes) chunks."""
    state = _state(run)
    with run.cond:

        def ready() -> bool:
            if state.rejected is not None:
                raise PeerFailed(state.rejected)
            if run.failure is not None:
                raise PeerFailed(run.failure)
            if not active():
                raise TimedOut("the leader cancelled Contribute")
            return state.seeds is not None and run.instructions >= order.instructions

        waited = "the keys" + (
            f" and instruction {order.instructions - 1}" if order.instructions else ""
        )
        run.wait(ready, deadline, waited)
        if run.instructions != order.instructions:
            raise ProtocolError(
                f"{order.label} was ordered after {order.instructions} instructions, this "
                f"party has applied {run.instructions}"
            )
        if state.last is not None and order.sum_no == state.next_sum - 1:
            if state.last[0] != order:
                raise ProtocolError(f"{order.label}: a retry that differs from the first order")
            _, stats, seeds = state.last
        elif order.sum_no != state.next_sum:
            raise ProtocolError(f"{order.label}: the next sum here is {state.next_sum}")
        else:
            assert state.seeds is not None
            stats = run.statistics(order.phase, order.round, order.size, order.layout_hash)
            if stats.size != order.size:
                raise ProtocolError(f"{order.label}: statistics of {stats.size} elements")
            # the masks of this sum: bound to the instructions applied and to the order, so
            # they cancel only against parties in the same state answering the same order
            seeds = sum_seeds(state.seeds, run.chain, order_bytes(order))
            state.last = (order, stats, seeds)
            state.next_sum += 1
            run.done += 1
        run.last_used = time.monotonic()
    for seq, data in masked_chunks(stats, seeds, order.sum_no, chunk_words):
        with run.lock:
            run.stats_bytes_sent += len(data)
        yield seq, data
