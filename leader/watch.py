"""Waiting for the calls of a secure sum, and naming the party that failed when one is late.

While a sum travels the ring the leader has several calls in flight: the Relay to the first
party, the Collect at the last one (answered when the sum exists) and the Instructions of
the previous decision (acknowledged by every party).  :func:`wait_all` waits for all of them
and stops at the first failure.  A party that fails *inside* the ring (its relay worker could
not add or forward) answers no call of the leader's, so while the calls are outstanding the
leader asks every party for its ``Status`` every :data:`PROBE_S` seconds, and again after any
failure: a party that does not answer, or the failure a party recorded, names who failed.
Nothing in a status depends on another party's statistics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import grpc

from fedanon.errors import FedanonError, RunAborted
from fedanon.leader.links import Link, PartyFailed, Traffic
from fedanon.logsafe import safe
from fedanon.net import rpc
from fedanon.pb.fedanon.v1 import party_pb2 as pb

log = logging.getLogger(__name__)
PROBE_S = 1.0  # a sum taking longer than this gets a Status round (then every PROBE_S)
PROBE_TIMEOUT_S = 5.0  # a party that does not answer Status within this is named


@dataclass(frozen=True)
class Call:
    """One call in flight: a future from ``pool.submit(link.call, ...)`` (raises
    :class:`FedanonError`) or a gRPC future (raises :class:`grpc.RpcError`)."""

    link: Link
    label: str
    future: Future[Any] | grpc.Future[Any]

    def failure(self) -> FedanonError | None:
        """The call's failure, attributed; None while running or if it succeeded."""
        if not self.future.done() or self.future.cancelled():
            return None
        exc = self.future.exception()
        if exc is None:
            return None
        if isinstance(exc, grpc.RpcError):
            return self.link.failure(self.label, exc)
        if isinstance(exc, FedanonError):
            return exc
        return RunAborted(f"{self.label} at {self.link.name}: {type(exc).__name__}: {exc}")


Probe = Callable[[], FedanonError | None]


def wait_all(
    calls: Sequence[Call], probe: Probe, deadline: rpc.Deadline, probe_s: float = PROBE_S
) -> None:
    """Until every call succeeded; raise the first failure (or what a probe finds)."""
    wake = threading.Event()
    for c in calls:
        c.future.add_done_callback(lambda _f: wake.set())
    next_probe = time.monotonic() + probe_s
    while True:
        wake.clear()
        failed = next((f for c in calls if (f := c.failure()) is not None), None)
        if failed is not None:
            # the call that failed may only have waited for someone else: ask everyone
            raise probe() or failed
        if all(c.future.done() for c in calls):
            return
        left = next_probe - time.monotonic()
        if left <= 0:
            found = probe()
            if found is not None:
                raise found
            next_probe = time.monotonic() + probe_s
            continue
        wake.wait(min(left, deadline.remaining()))


def probe_status(
    run_id: bytes,
    links: Sequence[Link],
    label: str,
    deadline: rpc.Deadline,
    traffic: Traffic,
    step: str,
) -> FedanonError | None:
    """Ask every party for its status; the party that failed, or None if none did.

    A party that does not answer is named first (ring order), then the first failure a
    party recorded -- credible only if it names the reporter itself or a party after it.
    """
    req = pb.StatusRequest(run_id=run_id)
    timeout = min(PROBE_TIMEOUT_S, deadline.remaining())
    futs = [(lk, lk.stub.Status.future(req, timeout=timeout)) for lk in links]
    silent: FedanonError | None = None
    recorded: FedanonError | None = None
    for i, (lk, fut) in enumerate(futs):
        try:
            st: pb.RunStatus = fut.result()
        except grpc.RpcError as exc:
            silent = silent or lk.failure(f"{label} (status)", exc)
            continue
        traffic.add(step, sent=req.ByteSize(), received=st.ByteSize())
        if st.failed_party and recorded is None:
            recorded = _recorded(lk, [x.name for x in links[i:]], st, label)
    found = silent or recorded
    if found is not None:
        log.info("%s: status names %s", label, found)
    return found


def _recorded(reporter: Link, names: list[str], st: pb.RunStatus, label: str) -> PartyFailed:
    """A failure a party recorded, attributed (``names``: the reporter and its successors)."""
    who, kind = st.failed_party, st.failed_kind
    detail = safe(st.failed_detail or "no details")
    if who not in names or kind not in rpc.KINDS:  # not credible: the reporter failed
        return PartyFailed(reporter.name, label, f"reported a failure it may not: {detail}")
    if who == reporter.name:
        return PartyFailed(who, label, f"{kind}: {detail}")
    return PartyFailed(who, label, f"{kind} from its ring predecessor {reporter.name}: {detail}")
