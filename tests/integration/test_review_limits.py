"""Review of the per-peer call limit (cfa4983) and the capped waits (ff3e300): every way a
call can end gives its slot back exactly once, and an honest Prepare that reads its table
for longer than ``max_wait_seconds`` is not cut by the watchdog."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import hospital_h, table1_spec

from fedanon.model.spec import load_spec
from fedanon.party import service as service_mod
from fedanon.party.config import load_party_config
from fedanon.party.peerlimit import SERVER_THREADS, Limits, PeerLimit
from fedanon.party.server import PartyServer
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security import auth
from fedanon.security.auth import Identity, Policy
from fedanon.security.tls import TlsMaterial

pytestmark = pytest.mark.slow
LEADER = Identity("leader", "leader")


def _channel(pki: Path, name: str, port: int) -> grpc.Channel:
    tls = TlsMaterial.load(pki / "ca.pem", pki / f"{name}.pem", pki / f"{name}.key")
    return tls.channel(f"127.0.0.1:{port}", expected_name="alice")


class _Counting(PeerLimit):
    """A PeerLimit that records every count it ever held (a negative one would let a peer
    past its limit)."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.lowest = 0

    def _leave(self, who: Identity, leader: bool) -> None:
        super()._leave(who, leader)
        with self._lock:
            self.lowest = min(self.lowest, self._others, *self._held.values(), 0)


def _slowly(n: int) -> Iterator[bytes]:
    for _ in range(n):
        time.sleep(random.random() * 0.01)
        yield b"x"


def test_slots_come_back_exactly_once_however_calls_end(pki: Path) -> None:
    # every handler shape, ended every way at random times: returned, aborted inside the
    # handler, cancelled before the first message, while the handler works, while gRPC
    # waits to send (the client reads no more), while the client still streams requests
    def unary(req: bytes, ctx: Any) -> bytes:
        time.sleep(random.random() * 0.02)
        if req == b"abort":
            ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, "no")
        return b"ok"

    def server_stream(req: bytes, ctx: Any) -> Iterator[bytes]:
        time.sleep(random.random() * 0.02)  # work before the first message
        if req == b"abort":
            ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, "no")
        for _ in range(10**6 if req == b"forever" else 50):
            yield b"y" * (1 << 16)  # flow control holds gRPC once the client stops reading

    def client_stream(reqs: Iterator[bytes], ctx: Any) -> bytes:
        return b"%d" % sum(1 for _ in reqs)

    def both(reqs: Iterator[bytes], ctx: Any) -> Iterator[bytes]:
        for r in reqs:
            yield r * (1 << 15)

    methods = {
        "U": grpc.unary_unary_rpc_method_handler(unary),
        "S": grpc.unary_stream_rpc_method_handler(server_stream),
        "C": grpc.stream_unary_rpc_method_handler(client_stream),
        "B": grpc.stream_stream_rpc_method_handler(both),
    }
    table = {f"/t.S/{m}": Policy.of({"party", "leader"}) for m in methods}
    limit = _Counting(Limits("leader", leader_calls=8, peer_calls=4))
    srv = grpc.server(
        futures.ThreadPoolExecutor(SERVER_THREADS),
        interceptors=[auth.AuthInterceptor(table, limit=limit)],
    )
    srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.S", methods),))
    tls = TlsMaterial.load(pki / "ca.pem", pki / "alice.pem", pki / "alice.key")
    port = srv.add_secure_port("127.0.0.1:0", tls.server_credentials())
    srv.start()
    rng = random.Random(7)
    try:
        with _channel(pki, "leader", port) as lead, _channel(pki, "bob", port) as bob:

            def one(i: int) -> None:
                try:
                    call_once(i)
                except grpc.RpcError as exc:
                    assert exc.code() in (
                        grpc.StatusCode.FAILED_PRECONDITION,
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        grpc.StatusCode.CANCELLED,
                    ), exc

            def call_once(i: int) -> None:
                chan = lead if i % 2 else bob
                kind = rng.choice("USCB")
                cancel_after = rng.choice([0.0, 0.001, 0.005, 0.02, None])
                req = b"abort" if rng.random() < 0.2 else b"r"
                if kind == "U":
                    call: Any = chan.unary_unary("/t.S/U").future(req, timeout=10)
                elif kind == "S":
                    call = chan.unary_stream("/t.S/S")(req, timeout=10)
                    if rng.random() < 0.5:
                        next(call, None)  # one message, then never read again
                elif kind == "C":
                    call = chan.stream_unary("/t.S/C").future(_slowly(20), timeout=10)
                else:
                    call = chan.stream_stream("/t.S/B")(_slowly(20), timeout=10)
                if cancel_after is not None:
                    time.sleep(cancel_after)
                    call.cancel()
                    return
                if kind in "UC":
                    call.result()
                else:
                    for _ in call:
                        pass

            with futures.ThreadPoolExecutor(24) as pool:
                list(pool.map(one, range(400)))
            end = time.monotonic() + 10
            while limit.in_flight() and time.monotonic() < end:
                time.sleep(0.02)
            assert limit.in_flight() == 0, limit._held  # no slot leaked
            assert limit._others == 0 and limit.lowest == 0  # none released twice
            # the leader is answered at its full limit afterwards
            calls = [lead.unary_stream("/t.S/S")(b"forever", timeout=10) for _ in range(8)]
            for c in calls:
                next(c)
            assert limit.in_flight(LEADER) == 8
            for c in calls:
                c.cancel()
    finally:
        srv.stop(0)


# ------------------------------------------------- a long honest Prepare and the watchdog

READ_S = 2.5  # the table read of this Prepare (a large table on a slow disk, scaled down)
MAX_WAIT_S = 1.0


def test_an_honest_prepare_reading_longer_than_the_maximum_wait_is_not_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pki, cfg = hospital_h(tmp_path, f"max_wait_seconds = {MAX_WAIT_S}\n")
    spec_path = table1_spec(tmp_path)
    real = service_mod.prepare_run

    def slow_read(*args: Any, **kw: Any) -> Any:  # the read takes longer than the maximum
        time.sleep(READ_S)
        return real(*args, **kw)

    monkeypatch.setattr(service_mod, "prepare_run", slow_read)
    server = PartyServer(load_party_config(cfg))
    server.start()
    server.service.cap.grace_s = 0.5  # cancelled at 1.5 s, the read ends at 2.5 s
    tls = TlsMaterial.load(pki / "ca.pem", pki / "leader.pem", pki / "leader.key")
    chan = tls.channel(f"127.0.0.1:{server.port}", "h")
    try:
        spec, reader = load_spec(spec_path)
        files = {a.taxonomy: reader(a.taxonomy).encode() for a in spec.qids if a.taxonomy}
        req = pb.PrepareRequest(
            run_id=b"P" * 16,
            spec_toml=spec_path.read_text(),
            files=files,
            ring=[pb.PartyRef(name=n, address="127.0.0.1:1") for n in ("h", "x", "y")],
            ring_position=0,
            secure_sum=pb.SECURE_SUM_PAIRWISE,
        )
        # the leader's Prepare gets the run's remaining budget (here a minute)
        reply = pb_grpc.PartyStub(chan).Prepare(req, timeout=60)
        assert reply.name == "h"
        assert server.service.cap.cancelled == 0
    finally:
        chan.close()
        server.stop(0)
