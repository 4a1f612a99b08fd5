"""A hostile leader cannot hold a hospital's MPC port (second review, R2): re-sending an old
Instruct inside every idle timeout, or keeping a call waiting with a days-long deadline, is
no progress; the run is dropped after the idle timeout and a second m-private run gets the
port.  No call waits longer than the daemon's maximum (``max_wait_seconds``), whatever its
deadline: a wait is cut at the maximum, a response stream the leader never reads is
cancelled after it.  One real daemon in this process, with a short idle timeout and
maximum wait."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from conftest import TEST_POLICY, hospital_h, table1_spec

from fedanon.leader.federate import free_ports
from fedanon.model.spec import load_spec
from fedanon.net import rpc
from fedanon.party.config import load_party_config
from fedanon.party.mpcrun import BUSY, CLOSE_S, PORT
from fedanon.party.server import PartyServer
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security.tls import TlsMaterial

pytestmark = pytest.mark.slow
IDLE_S = 2.0
MAX_WAIT_S = 1.0
DAY_S = 86400.0


@pytest.fixture
def hospital(tmp_path: Path) -> Iterator[tuple[PartyServer, pb_grpc.PartyStub, Path, int]]:
    """Hospital h (MPC allowed, idle timeout IDLE_S, maximum wait MAX_WAIT_S) and the
    leader's stub; the spec of an m = 1 run over Table I; h's MPC port."""
    spec = table1_spec(tmp_path)
    spec.write_text(spec.read_text().replace("[privacy]\n", "[privacy]\nm = 1\n", 1))
    (mpc_port,) = free_ports(1)
    policy = dataclasses.replace(TEST_POLICY, allow_mpc=True)
    lines = f"run_idle_timeout_seconds = {IDLE_S}\nmax_wait_seconds = {MAX_WAIT_S}\n"
    pki, cfg = hospital_h(tmp_path, lines, policy, mpc_port)
    server = PartyServer(load_party_config(cfg))
    server.start()
    tls = TlsMaterial.load(pki / "ca.pem", pki / "leader.pem", pki / "leader.key")
    chan = tls.channel(f"127.0.0.1:{server.port}", "h")
    try:
        yield server, pb_grpc.PartyStub(chan), spec, mpc_port
    finally:
        chan.close()
        server.stop(0)
    assert PORT.holder is None  # every run ended with the daemon


def prepare(
    stub: pb_grpc.PartyStub, spec_path: Path, mpc_port: int, run_id: bytes, pairwise: bool = True
) -> None:
    """An m = 1 run of hospitals h, x, y with h first (x and y need not exist: h's worker
    keeps trying to reach them)."""
    spec, reader = load_spec(spec_path)
    files = {a.taxonomy: reader(a.taxonomy).encode() for a in spec.qids if a.taxonomy}
    peers = free_ports(2)
    ring = [
        pb.PartyRef(name=n, address="127.0.0.1:1", mpc_address=f"127.0.0.1:{p}")
        for n, p in (("h", mpc_port), ("x", peers[0]), ("y", peers[1]))
    ]
    req = pb.PrepareRequest(
        run_id=run_id,
        spec_toml=spec_path.read_text(),
        files=files,
        ring=ring,
        ring_position=0,
        secure_sum=pb.SECURE_SUM_PAIRWISE if pairwise else pb.SECURE_SUM_RING,
    )
    stub.Prepare(req, timeout=60)


def refused_busy(stub: pb_grpc.PartyStub, spec: Path, mpc_port: int, run_id: bytes) -> bool:
    """Prepare ``run_id``: False if accepted, True if refused because the port is held."""
    try:
        prepare(stub, spec, mpc_port, run_id)
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc.details()
        assert rpc.failure_metadata(exc).get(rpc.MD_RULE) == "mpc"
        assert exc.details().endswith(BUSY)  # the port, nothing of the data
        return True
    return False


def test_an_old_instruct_resent_and_a_call_kept_waiting_do_not_hold_the_mpc_port(
    hospital: tuple[PartyServer, pb_grpc.PartyStub, Path, int],
) -> None:
    server, stub, spec, mpc_port = hospital
    first = b"A" * 16
    prepare(stub, spec, mpc_port, first)
    assert PORT.holder == first
    old = pb.Instruction(run_id=first, seq=0, round=0)
    stub.Instruct(old, timeout=10)  # applied: progress
    progressed = time.monotonic()
    waiting: list[grpc.RpcError] = []

    def wait_ahead() -> None:  # an Instruct one ahead of sequence, a day's deadline
        try:
            stub.Instruct(pb.Instruction(run_id=first, seq=5, round=0), timeout=DAY_S)
        except grpc.RpcError as exc:
            waiting.append(exc)

    accepted_at = None
    refusals = 0
    end = progressed + IDLE_S + 15
    while time.monotonic() < end:
        threading.Thread(target=wait_ahead, daemon=True).start()  # always one waiting
        try:
            stub.Instruct(old, timeout=DAY_S)  # the old one again: a no-op, no progress
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND  # the run was dropped
        if not refused_busy(stub, spec, mpc_port, bytes([66, refusals]) * 8):
            accepted_at = time.monotonic()
            break
        refusals += 1
        time.sleep(IDLE_S / 5)  # the leader calls well inside every idle timeout
    assert accepted_at is not None, "the re-sent Instruct kept the MPC port"
    assert refusals > 0  # the first run did hold it
    assert accepted_at - progressed >= IDLE_S  # ... until it was idle for the timeout
    # ... and not much longer: the reaper's round, the worker's stop (killed after CLOSE_S)
    assert accepted_at - progressed < IDLE_S + CLOSE_S + 3
    assert PORT.holder == bytes([66, refusals]) * 8
    assert first not in server.service.runs
    with pytest.raises(grpc.RpcError) as err:
        stub.Instruct(old, timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    time.sleep(MAX_WAIT_S + 0.5)
    # each waiting call ended at the maximum wait (or when its run was dropped), never its day
    assert waiting and all(
        e.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.NOT_FOUND) for e in waiting
    )


def test_a_wait_with_a_days_long_deadline_is_cut_at_the_maximum_and_honest_calls_go_on(
    hospital: tuple[PartyServer, pb_grpc.PartyStub, Path, int],
) -> None:
    server, stub, spec, mpc_port = hospital
    run = b"C" * 16
    prepare(stub, spec, mpc_port, run)
    t0 = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:  # instruction 0 never comes
        stub.Instruct(pb.Instruction(run_id=run, seq=1, round=0), timeout=DAY_S)
    took = time.monotonic() - t0
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert rpc.failure_metadata(err.value)[rpc.MD_KIND] == "timeout"
    assert MAX_WAIT_S - 0.1 <= took < MAX_WAIT_S + 2
    # the honest sequence goes on: instruction 0, then 1 (a wait that ends in time)
    stub.Instruct(pb.Instruction(run_id=run, seq=0, round=0), timeout=10)
    stub.Instruct(pb.Instruction(run_id=run, seq=1, round=0), timeout=10)
    assert server.service.runs.peek(run).instructions == 2
    stub.Finish(pb.FinishRequest(run_id=run), timeout=10)
    assert PORT.holder is None


def test_a_stream_the_leader_never_finishes_is_cancelled_after_the_maximum(
    hospital: tuple[PartyServer, pb_grpc.PartyStub, Path, int],
) -> None:
    # a Relay whose request stream the leader opens with a day's deadline, sends the header
    # of a vector of a million elements and never sends the rest: the call is held inside
    # gRPC (reading), where no wait of the run runs; the daemon cancels it once the maximum
    # wait and the grace have passed, and the run is not held by it
    server, stub, spec, mpc_port = hospital
    cap = server.service.cap
    cap.grace_s = 0.5
    run = b"E" * 16
    prepare(stub, spec, mpc_port, run, pairwise=False)  # a ring run: the leader Relays
    vector = np.zeros(1 << 20, dtype=np.uint64)
    first = next(
        rpc.encode_vector(vector, run_id=run, round=0, phase=pb.PHASE_COUNTS, layout_hash=b"")
    )
    stalled = threading.Event()

    def never_finished() -> Iterator[pb.VectorChunk]:
        yield first
        stalled.wait(DAY_S)  # nothing more, and no end of the stream

    t0 = time.monotonic()
    fut = stub.Relay.future(never_finished(), timeout=DAY_S)
    try:
        with pytest.raises(grpc.RpcError) as err:
            fut.result(timeout=30)
        took = time.monotonic() - t0
    finally:
        stalled.set()
    assert err.value.code() == grpc.StatusCode.CANCELLED
    assert MAX_WAIT_S + cap.grace_s - 0.1 <= took < MAX_WAIT_S + cap.grace_s + 3
    assert cap.cancelled == 1
    end = time.monotonic() + 5
    while (cap.pending() or server.service.runs.peek(run).busy) and time.monotonic() < end:
        time.sleep(0.02)
    assert cap.pending() == 0  # the watchdog holds no ended call
    assert server.service.runs.peek(run).busy == 0  # the call let go of the run
    stub.Abort(pb.AbortRequest(run_id=run, reason="test"), timeout=10)


def test_health_watch_streams_cannot_take_the_daemons_threads(
    hospital: tuple[PartyServer, pb_grpc.PartyStub, Path, int], tmp_path: Path
) -> None:
    # a health Watch is a stream that blocks one of the daemon's server threads for as long
    # as the caller keeps it open (grpc_health's blocking watcher): forty of them, by any
    # federation member, would leave no thread for the leader's calls.  Watch is refused; the
    # unary Check (what fedanon health and probes use) is answered
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    server, stub, spec, mpc_port = hospital
    pki = tmp_path / "certs"
    tls = TlsMaterial.load(pki / "ca.pem", pki / "leader.pem", pki / "leader.key")
    chan = tls.channel(f"127.0.0.1:{server.port}", "h")
    health = health_pb2_grpc.HealthStub(chan)
    watches = [health.Watch(health_pb2.HealthCheckRequest(), timeout=DAY_S) for _ in range(40)]
    try:
        for w in watches:
            with pytest.raises(grpc.RpcError) as err:
                next(w)
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        reply = health.Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        prepare(stub, spec, mpc_port, b"W" * 16)  # the leader's calls are answered
        stub.Abort(pb.AbortRequest(run_id=b"W" * 16, reason="test"), timeout=10)
    finally:
        for w in watches:
            w.cancel()
        chan.close()
