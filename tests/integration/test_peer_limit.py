"""One federation member cannot take the party daemon's server threads (threat model:
calls in flight per peer): a hospital opening Relay streams it never feeds gets
RESOURCE_EXHAUSTED past its limit while the other members and the leader are answered; its
cancelled streams give their slots back; the leader's own calls past its limit are refused
the same way, and none of those refusals counts towards a lockout.  One real daemon in this
process (mTLS), its limits small: the leader 4 calls, any other member 2."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from conftest import EXAMPLES, TEST_POLICY, table1_spec
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fedanon.leader.localdaemons import party_toml
from fedanon.model.spec import load_spec
from fedanon.net.meta import MD_LOCKED_OUT
from fedanon.party.config import load_party_config
from fedanon.party.server import PartyServer
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security import certs
from fedanon.security.auth import Identity
from fedanon.security.tls import TlsMaterial

pytestmark = pytest.mark.slow
LEADER_CALLS, PEER_CALLS = 4, 2
REFUSALS = 2  # max_refusals_per_hour: refusals over the limit must not count towards it
RUN = b"R" * 16
DAY_S = 86400.0


@pytest.fixture
def hospital(tmp_path: Path) -> Iterator[tuple[PartyServer, Path]]:
    """Hospital h, last of the ring x, y, h (y relays to it) in a prepared ring run."""
    pki = tmp_path / "certs"
    certs.init_ca(pki)
    certs.issue(pki, "leader", "leader")
    for name in ("h", "x", "y"):
        certs.issue(pki, name, "party")
    data = tmp_path / "table1.csv"
    data.write_text((EXAMPLES / "table1" / "table1.csv").read_text())
    policy = dataclasses.replace(TEST_POLICY, max_refusals_per_hour=REFUSALS)
    text = party_toml("h", data, pki, None, policy).replace(
        'listen = "127.0.0.1:0"\n',
        'listen = "127.0.0.1:0"\n'
        f"max_leader_calls = {LEADER_CALLS}\nmax_peer_calls = {PEER_CALLS}\n",
        1,
    )
    assert f"max_refusals_per_hour = {REFUSALS}" in text
    cfg = tmp_path / "h.toml"
    cfg.write_text(text)
    server = PartyServer(load_party_config(cfg))
    server.start()
    try:
        spec, reader = load_spec(table1_spec(tmp_path))
        files = {a.taxonomy: reader(a.taxonomy).encode() for a in spec.qids if a.taxonomy}
        ring = [pb.PartyRef(name=n, address="127.0.0.1:1") for n in ("x", "y", "h")]
        req = pb.PrepareRequest(
            run_id=RUN,
            spec_toml=(tmp_path / "run.toml").read_text(),
            files=files,
            ring=ring,
            ring_position=2,
            secure_sum=pb.SECURE_SUM_RING,
        )
        with _channel(pki, "leader", server) as chan:
            pb_grpc.PartyStub(chan).Prepare(req, timeout=60)
        yield server, pki
    finally:
        server.stop(0)


def _channel(pki: Path, name: str, server: PartyServer) -> grpc.Channel:
    tls = TlsMaterial.load(pki / "ca.pem", pki / f"{name}.pem", pki / f"{name}.key")
    return tls.channel(f"127.0.0.1:{server.port}", "h")


def _never_fed(stop: threading.Event) -> Iterator[pb.VectorChunk]:
    """A Relay stream that sends nothing, not even its header, until ``stop``."""
    stop.wait(DAY_S)
    return
    yield pb.VectorChunk()


def _unknown_run() -> Iterator[pb.VectorChunk]:
    yield pb.VectorChunk(header=pb.VectorHeader(run_id=b"U" * 16))


def _code(fn: object) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        fn()  # type: ignore[operator]
    return err.value.code()  # type: ignore[no-any-return]


def _until(cond: object, seconds: float = 10.0) -> bool:
    import time

    end = time.monotonic() + seconds
    while not cond():  # type: ignore[operator]
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def _not_locked_out(exc: grpc.RpcError) -> bool:
    return MD_LOCKED_OUT not in dict(exc.trailing_metadata() or ())


def test_relay_streams_never_fed_are_refused_past_the_limit_and_others_are_answered(
    hospital: tuple[PartyServer, Path],
) -> None:
    server, pki = hospital
    x = Identity("x", "party")
    stop = threading.Event()
    with (
        _channel(pki, "x", server) as cx,
        _channel(pki, "y", server) as cy,
        _channel(pki, "leader", server) as cl,
    ):
        sx, sy, lead = pb_grpc.PartyStub(cx), pb_grpc.PartyStub(cy), pb_grpc.PartyStub(cl)
        held = [sx.Relay.future(_never_fed(stop), timeout=DAY_S) for _ in range(PEER_CALLS)]
        try:
            assert _until(lambda: server.limit.in_flight(x) == PEER_CALLS)
            for _ in range(REFUSALS + 2):  # more refusals than would lock a peer out
                with pytest.raises(grpc.RpcError) as err:
                    sx.Relay(_unknown_run(), timeout=10)
                assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "calls of this peer are in flight" in str(err.value.details())
                assert _not_locked_out(err.value)
            # the other members and the leader are answered meanwhile
            assert _code(lambda: sy.Relay(_unknown_run(), timeout=10)) == (
                grpc.StatusCode.NOT_FOUND  # y's Relay reached the servicer: no such run
            )
            check = health_pb2_grpc.HealthStub(cy).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
            assert check.status == health_pb2.HealthCheckResponse.SERVING
            status = lead.Status(pb.StatusRequest(run_id=RUN), timeout=10)
            assert status.instructions == 0 and not status.failed_party
            lead.Instruct(pb.Instruction(run_id=RUN, seq=0, round=0), timeout=10)
            assert not any(f.done() for f in held)  # still holding their threads
        finally:
            for f in held:
                f.cancel()
            stop.set()
        assert _until(lambda: server.limit.in_flight(x) == 0)  # cancelled: slots given back
        # x is answered again (the servicer's own answer), and was never locked out
        assert _code(lambda: sx.Relay(_unknown_run(), timeout=10)) == grpc.StatusCode.NOT_FOUND
    assert server.limit.refused == REFUSALS + 2
    assert server.limit.in_flight() == 0


def test_the_leaders_calls_past_its_limit_are_refused_and_never_lock_it_out(
    hospital: tuple[PartyServer, Path],
) -> None:
    # Collect answers once the round's sum exists (here: never): each holds a thread; the
    # leader's call past its limit is refused, however often, without a lockout, and its
    # cancelled response streams give their slots back
    server, pki = hospital
    leader = Identity("leader", "leader")
    with _channel(pki, "leader", server) as cl:
        lead = pb_grpc.PartyStub(cl)
        req = pb.CollectRequest(run_id=RUN, round=7, phase=pb.PHASE_COUNTS)
        waiting = [lead.Collect(req, timeout=DAY_S) for _ in range(LEADER_CALLS)]
        try:
            assert _until(lambda: server.limit.in_flight(leader) == LEADER_CALLS)
            for _ in range(REFUSALS + 2):
                with pytest.raises(grpc.RpcError) as err:
                    lead.Status(pb.StatusRequest(run_id=RUN), timeout=10)
                assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert _not_locked_out(err.value)
            with pytest.raises(grpc.RpcError) as err:  # a response stream is refused too
                next(lead.Collect(req, timeout=10))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            # a hospital is still answered
            with _channel(pki, "y", server) as cy:
                health = health_pb2_grpc.HealthStub(cy)
                assert health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == (
                    health_pb2.HealthCheckResponse.SERVING
                )
        finally:
            for w in waiting:
                w.cancel()
        assert _until(lambda: server.limit.in_flight(leader) == 0)
        assert lead.Status(pb.StatusRequest(run_id=RUN), timeout=10).instructions == 0
        lead.Finish(pb.FinishRequest(run_id=RUN), timeout=10)
    assert server.limit.peak[leader] == LEADER_CALLS
