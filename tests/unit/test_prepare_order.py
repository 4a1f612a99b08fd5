"""Issue 24 attack, finding 6: which hospital the leader names does not depend on whose
refusal arrives first.

The order of the answers follows the data (where each table's first failing record is, and
how large the tables are); the leader named whichever refusal came first, so the same
inputs named hospital-b in one run and hospital-c in the next.  Now it waits for every
Prepare and names the first refusal in ring order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from test_links import FakeError, md

from fedanon.leader.links import Link, PartyRejected, Traffic
from fedanon.leader.opening import _prepare
from fedanon.net import rpc
from fedanon.pb.fedanon.v1 import party_pb2 as pb

NAMES = ("hospital-a", "hospital-b", "hospital-c")
WANT = b"\x07" * 32


class _Call:
    """A Prepare future that ends after ``delay`` seconds (or when cancelled)."""

    def __init__(self, name: str, delay: float, error: grpc.RpcError | None) -> None:
        self.name, self.error = name, error
        self.cancelled = False
        self._done = threading.Event()
        self._callbacks: list[Callable[[Any], None]] = []
        self._lock = threading.Lock()
        threading.Timer(delay, self._finish).start()

    def _finish(self) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._done.set()
            callbacks = list(self._callbacks)
        for fn in callbacks:
            fn(self)

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def cancel(self) -> bool:
        self.cancelled = True
        self._finish()
        return True

    def result(self) -> pb.PrepareReply:
        self._done.wait()
        if self.cancelled:
            raise grpc.FutureCancelledError()
        if self.error is not None:
            raise self.error
        return pb.PrepareReply(run_hash=WANT, name=self.name)


def _refusal(name: str) -> FakeError:
    return FakeError(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"{name}'s data does not fit the spec (the hospital's own log says why)",
        md(name, "input"),
    )


def _links(plan: dict[str, tuple[float, bool]], calls: list[_Call]) -> list[Link]:
    links = []
    for name in NAMES:
        delay, refuses = plan[name]

        def future(_req: Any, timeout: float, name: str = name, delay: float = delay,
                   refuses: bool = refuses) -> _Call:  # fmt: skip
            call = _Call(name, delay, _refusal(name) if refuses else None)
            calls.append(call)
            return call

        stub = SimpleNamespace(Prepare=SimpleNamespace(future=future))
        links.append(Link(name, f"{name}:1", None, stub, frozenset(NAMES)))  # type: ignore[arg-type]
    return links


@pytest.mark.parametrize(
    "plan",
    [  # (seconds until the answer, refuses): hospital-c's refusal arrives first
        {"hospital-a": (0.3, False), "hospital-b": (0.2, True), "hospital-c": (0.0, True)},
        {"hospital-a": (0.0, False), "hospital-b": (0.0, True), "hospital-c": (0.2, True)},
    ],
)
def test_the_first_refusal_in_ring_order_is_named(plan: dict[str, tuple[float, bool]]) -> None:
    calls: list[_Call] = []
    links = _links(plan, calls)
    schema = SimpleNamespace(files={})
    with pytest.raises(PartyRejected) as err:
        _prepare(b"r" * 16, "", schema, WANT, links, Traffic(), rpc.Deadline(30))  # type: ignore[arg-type]
    assert err.value.party == "hospital-b", str(err.value)
    assert not any(c.cancelled for c in calls)  # every answer was waited for
