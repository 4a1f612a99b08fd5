"""Faults real networks and operators cause, found by breaking a local 3-hospital federation:
a hospital that begins listening while the leader connects, a hospital killed while the leader
tells it Finish, and what a hospital's ledger records of a run the leader aborted."""

from __future__ import annotations

from concurrent import futures
from pathlib import Path

import grpc
import pytest
from fakes import FakeParty, closed_port, files

from fedanon.leader.config import FederationConfig, PartyAddress
from fedanon.leader.links import connect_links, leader_tls
from fedanon.leader.reach import LeaderTls, check_reachable, wait_ready
from fedanon.net.meta import close_channel
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security import certs

pytestmark = pytest.mark.slow


def _leader_config(pki: Path, parties: dict[str, int]) -> FederationConfig:
    return FederationConfig(
        spec=pki / "unused.toml",
        output=pki / "unused.csv",
        report=None,
        name="leader",
        ca=pki / "ca.pem",
        cert=pki / "leader.pem",
        key=pki / "leader.key",
        parties=tuple(PartyAddress(n, f"127.0.0.1:{p}") for n, p in parties.items()),
        connect_timeout_seconds=8.0,
    )


def test_a_hospital_that_begins_listening_while_the_leader_connects_is_reached(
    tmp_path: Path,
) -> None:
    """A daemon (re)started just before the leader: gRPC's first attempt is refused, the
    daemon listens by the time the leader's diagnostic handshake runs (it works), and the
    leader must then wait for gRPC's next attempt within connect_timeout_seconds.  It gave
    up at once with 'the connection fails (the TLS handshake itself works: a gRPC-level
    problem?)': the channel reports its current state, TRANSIENT_FAILURE, first."""
    pki = tmp_path / "certs"
    certs.init_ca(pki)
    certs.issue(pki, "leader", "leader")
    certs.issue(pki, "q", "party")
    port = closed_port()
    cfg = _leader_config(pki, {"q": port})
    (link,) = connect_links(cfg, leader_tls(cfg), False)
    server = None
    try:
        # the hospital is not up yet: gRPC's attempt is refused
        assert wait_ready(link.channel, 5.0) == grpc.ChannelConnectivity.TRANSIENT_FAILURE
        server = grpc.server(futures.ThreadPoolExecutor(2))
        pb_grpc.add_PartyServicer_to_server(FakeParty("q"), server)
        cert, key = files(pki, "q")
        creds = grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=(pki / "ca.pem").read_bytes(), require_client_auth=True
        )
        assert server.add_secure_port(f"127.0.0.1:{port}", creds) == port
        server.start()  # ... and now it is
        mine = LeaderTls(cfg.ca, cfg.cert, cfg.key)
        why = check_reachable(link.channel, link.address, "q", mine, cfg.connect_timeout_seconds)
        assert why is None, why
    finally:
        close_channel(link.channel)
        if server is not None:
            server.stop(None)
