"""Calls in flight per federation member (fedanon.party.peerlimit) and the interceptor's
slot for each call: taken when the call starts, given back however it ends -- returned,
aborted, a request stream cancelled, a response stream the client stops reading."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from fedanon.errors import ConfigError
from fedanon.party.config import parse_party_config
from fedanon.party.peerlimit import (
    MAX_LEADER_CALLS,
    RESERVED,
    SERVER_THREADS,
    Limits,
    PeerLimit,
    others_share,
)
from fedanon.security import auth
from fedanon.security.auth import Identity, Policy
from fedanon.security.tls import TlsMaterial

LEADER = Identity("leader", "leader")
TIMEOUT = 10.0


def test_each_identity_has_its_own_count_and_the_others_share_one() -> None:
    limit = PeerLimit(Limits("leader", leader_calls=3, peer_calls=2))
    share = others_share(3)
    assert share == SERVER_THREADS - RESERVED - 3
    held = [limit.enter(LEADER) for _ in range(3)]
    assert all(callable(r) for r in held)
    refused = limit.enter(LEADER)
    assert isinstance(refused, str) and "3 calls of this peer" in refused
    a = Identity("a", "party")
    ra = [limit.enter(a), limit.enter(a)]
    assert isinstance(limit.enter(a), str)  # its own limit
    assert callable(limit.enter(Identity("b", "party")))  # another member is not affected
    # a leader certificate that is not this daemon's leader is one of the others
    assert callable(limit.enter(Identity("mallory", "leader")))
    assert callable(limit.enter(Identity("leader", "party")))  # a party named "leader" too
    assert limit.in_flight(LEADER) == 3 and limit.in_flight() == 8
    for release in (*held, *ra):
        assert callable(release)
        release()
        release()  # a second release counts for nothing
    assert limit.in_flight(LEADER) == 0 and limit.in_flight(a) == 0
    assert limit.in_flight() == 3
    assert callable(limit.enter(a)) and limit.refused == 2
    assert limit.peak[LEADER] == 3 and limit.peak[a] == 2


def test_the_others_together_never_take_the_leaders_threads() -> None:
    limit = PeerLimit(Limits("leader", leader_calls=20, peer_calls=2))
    share = others_share(20)
    taken = 0
    for i in range(share):  # many members, each within its own limit
        taken += callable(limit.enter(Identity(f"p{i // 2}", "party")))
    assert taken == share
    refused = limit.enter(Identity("late", "party"))
    assert isinstance(refused, str) and f"{share} calls of the federation's members" in refused
    assert all(callable(limit.enter(LEADER)) for _ in range(20))  # the leader's are intact
    assert limit.in_flight() + RESERVED == SERVER_THREADS


@pytest.mark.parametrize(
    ("leader", "peer"), [(0, 4), (MAX_LEADER_CALLS + 1, 1), (16, 0), (16, others_share(16) + 1)]
)
def test_limits_that_leave_no_thread_free_are_refused(leader: int, peer: int) -> None:
    with pytest.raises(ValueError):
        Limits("leader", leader, peer)


PARTY = """
[party]
name = "hospital-a"
listen = "0.0.0.0:7443"
data = "patients.csv"
{extra}
[tls]
ca = "ca.pem"
cert = "hospital-a.pem"
key = "hospital-a.key"
"""


def test_party_toml_settings() -> None:
    cfg = parse_party_config(PARTY.format(extra=""), "party.toml")
    assert (cfg.max_leader_calls, cfg.max_peer_calls) == (16, 4)
    cfg = parse_party_config(
        PARTY.format(extra="max_leader_calls = 20\nmax_peer_calls = 8"), "party.toml"
    )
    assert (cfg.max_leader_calls, cfg.max_peer_calls) == (20, 8)
    # the leader takes almost every thread: the others' default shrinks to what is left
    cfg = parse_party_config(PARTY.format(extra=f"max_leader_calls = {MAX_LEADER_CALLS}"))
    assert cfg.max_peer_calls == 1
    Limits(cfg.leader, cfg.max_leader_calls, cfg.max_peer_calls)  # the server accepts them


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ("max_leader_calls = 0", r"max_leader_calls is invalid"),
        ("max_leader_calls = 28", r"\[1, 27\]"),
        ("max_leader_calls = 4.0", r"max_leader_calls is invalid"),
        ("max_peer_calls = true", r"max_peer_calls is invalid"),
        ("max_leader_calls = 20\nmax_peer_calls = 9", r"\[1, 8\].*less 4 kept free and max_le"),
    ],
)
def test_party_toml_errors(extra: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as err:
        parse_party_config(PARTY.format(extra=extra), "party.toml")
    assert str(err.value).startswith("party.toml")


# ------------------------------------------------------------ the interceptor, real gRPC


class Handlers:
    """A unary answer waiting for a request stream, a response stream the client may stop
    reading, a response stream whose handler works before its first message."""

    def __init__(self) -> None:
        self.started = threading.Semaphore(0)  # a handler began (its slot is taken)
        self.release_work = threading.Event()
        self.work_done = threading.Event()

    def drain(self, requests: Iterator[bytes], context: Any) -> bytes:
        self.started.release()
        return b"%d" % sum(1 for _ in requests)

    def flood(self, request: bytes, context: Any) -> Iterator[bytes]:
        self.started.release()
        while True:
            yield b"x" * (1 << 20)  # flow control stops gRPC once the client reads no more

    def slow(self, request: bytes, context: Any) -> Iterator[bytes]:
        self.started.release()
        self.release_work.wait(TIMEOUT)  # the thread is busy here, whatever the client does
        self.work_done.set()
        yield b"done"

    def fail(self, request: bytes, context: Any) -> Iterator[bytes]:
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no")
        yield b""


@pytest.fixture
def served(pki: Path) -> Iterator[tuple[int, PeerLimit, Handlers]]:
    table = {f"/t.S/{m}": Policy.of({"party", "leader"}) for m in ("Drain", "Flood", "Slow")}
    table["/t.S/Fail"] = Policy.of({"party", "leader"})
    limit = PeerLimit(Limits("leader", leader_calls=4, peer_calls=2))
    h = Handlers()
    srv = grpc.server(
        futures.ThreadPoolExecutor(SERVER_THREADS),
        interceptors=[auth.AuthInterceptor(table, limit=limit)],
    )
    methods = {
        "Drain": grpc.stream_unary_rpc_method_handler(h.drain),
        "Flood": grpc.unary_stream_rpc_method_handler(h.flood),
        "Slow": grpc.unary_stream_rpc_method_handler(h.slow),
        "Fail": grpc.unary_stream_rpc_method_handler(h.fail),
    }
    srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.S", methods),))
    tls = TlsMaterial.load(pki / "ca.pem", pki / "alice.pem", pki / "alice.key")
    port = srv.add_secure_port("127.0.0.1:0", tls.server_credentials())
    srv.start()
    try:
        yield port, limit, h
    finally:
        h.release_work.set()
        srv.stop(0)


def _channel(pki: Path, name: str, port: int) -> grpc.Channel:
    tls = TlsMaterial.load(pki / "ca.pem", pki / f"{name}.pem", pki / f"{name}.key")
    return tls.channel(f"127.0.0.1:{port}", expected_name="alice")


def _until(cond: Any, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def _never_fed(stop: threading.Event) -> Iterator[bytes]:
    stop.wait(60)
    return
    yield b""


def test_request_streams_never_fed_are_refused_past_the_limit_and_released_on_cancel(
    pki: Path, served: tuple[int, PeerLimit, Handlers]
) -> None:
    port, limit, h = served
    bob = Identity("bob", "party")
    stop = threading.Event()
    with _channel(pki, "bob", port) as chan, _channel(pki, "alice", port) as other:
        drain = chan.stream_unary("/t.S/Drain")
        held = [drain.future(_never_fed(stop), timeout=60) for _ in range(2)]
        assert all(h.started.acquire(timeout=TIMEOUT) for _ in held)
        assert limit.in_flight(bob) == 2
        with pytest.raises(grpc.RpcError) as err:
            drain(_never_fed(stop), timeout=TIMEOUT)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "2 calls of this peer are in flight" in str(err.value.details())
        # another member is answered meanwhile
        assert other.stream_unary("/t.S/Drain")(iter([b"a", b"b"]), timeout=TIMEOUT) == b"2"
        for fut in held:
            fut.cancel()
        assert _until(lambda: limit.in_flight(bob) == 0)  # the slots came back
        assert drain(iter([b"a"]), timeout=TIMEOUT) == b"1"
    stop.set()


def test_a_response_stream_the_client_stops_reading_gives_its_slot_back(
    pki: Path, served: tuple[int, PeerLimit, Handlers]
) -> None:
    port, limit, _ = served
    with _channel(pki, "leader", port) as chan:
        flood = chan.unary_stream("/t.S/Flood")
        streams = [flood(b"", timeout=60) for _ in range(4)]
        for s in streams:
            next(s)  # started, then never read again: gRPC's thread waits to send
        assert limit.in_flight(LEADER) == 4
        with pytest.raises(grpc.RpcError) as err:
            next(flood(b"", timeout=TIMEOUT))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        for s in streams:
            s.cancel()
        assert _until(lambda: limit.in_flight(LEADER) == 0)
        # an aborted stream gives its slot back too
        for _ in range(6):
            with pytest.raises(grpc.RpcError) as err:
                list(chan.unary_stream("/t.S/Fail")(b"", timeout=TIMEOUT))
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert _until(lambda: limit.in_flight() == 0)
        again = flood(b"", timeout=TIMEOUT)  # answered again
        assert len(next(again)) == 1 << 20
        again.cancel()


def test_a_cancelled_call_holds_its_slot_while_its_handler_still_works(
    pki: Path, served: tuple[int, PeerLimit, Handlers]
) -> None:
    # the slot stands for the server thread: a call the client cancelled whose handler has
    # not returned still holds one (else cancel-and-reopen would take every thread)
    port, limit, h = served
    with _channel(pki, "leader", port) as chan:
        call = chan.unary_stream("/t.S/Slow")(b"", timeout=60)
        assert h.started.acquire(timeout=TIMEOUT)
        call.cancel()
        time.sleep(0.3)
        assert limit.in_flight(LEADER) == 1
        h.release_work.set()
        assert h.work_done.wait(TIMEOUT)
        assert _until(lambda: limit.in_flight(LEADER) == 0)
