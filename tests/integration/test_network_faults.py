"""Faults real networks and operators cause, found by breaking a local 3-hospital federation:
a hospital that begins listening while the leader connects, a hospital killed while the leader
tells it Finish, and what a hospital's ledger records of a run the leader aborted."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from conftest import EXAMPLES, TEST_POLICY, read_rows, table1_spec, write_rows
from fakes import FakeParty, closed_port, files

from fedanon.errors import RunAborted
from fedanon.leader import opening
from fedanon.leader.config import FederationConfig, PartyAddress
from fedanon.leader.federate import daemons, federation_config
from fedanon.leader.links import connect_links, leader_tls
from fedanon.leader.reach import LeaderTls, check_reachable, wait_ready
from fedanon.leader.run import run_federation
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


def _table1_parties(tmp: Path, n: int = 3) -> list[tuple[str, Path]]:
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    out = []
    for i in range(n):
        write_rows(tmp / f"d{i}.csv", header, rows[i::n])
        out.append((f"h{i}", tmp / f"d{i}.csv"))
    return out


def test_a_hospital_killed_at_finish_is_named_by_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A hospital dying as the leader tells it Finish: every record came before, so the
    release is published (docs/federation.md: a party that misses Finish drops the run when
    idle), and the leader's warning says which hospital, the status and what its ledger will
    say -- it said 'finish at h1 failed: _MultiThreadedRendezvous' (a gRPC internal class)."""
    spec = table1_spec(tmp_path)
    work = tmp_path / "w"
    work.mkdir()
    with daemons(_table1_parties(tmp_path), work, policy=TEST_POLICY) as ds:
        victim = ds[1]
        out = tmp_path / "out.csv"
        cfg = federation_config(ds, work, spec, out, tmp_path / "rep.json")
        finish = opening.OpenRun.finish

        def kill_then_finish(self: opening.OpenRun, publish: Callable[[], None]) -> None:
            os.kill(victim.proc.pid, signal.SIGKILL)
            victim.proc.wait()
            finish(self, publish)

        monkeypatch.setattr(opening.OpenRun, "finish", kill_then_finish)
        with caplog.at_level(logging.WARNING, logger="fedanon.leader.opening"):
            assert run_federation(cfg).records > 0
        assert out.exists() and (tmp_path / "rep.json").exists()
        warned = [r.getMessage() for r in caplog.records if "Finish" in r.getMessage()]
        assert len(warned) == 1, caplog.text
        assert warned[0].startswith(f"{victim.name} did not acknowledge Finish (UNAVAILABLE)")
        assert "aborted" in warned[0] and "Rendezvous" not in warned[0]


def _ledger_rows(cfg: Path) -> list[dict[str, object]]:
    cmd = [sys.executable, "-m", "fedanon.cli", "party", "ledger", "show", "--config", str(cfg)]
    proc = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_a_run_the_leader_aborted_is_ledgered_with_its_phase(tmp_path: Path) -> None:
    """docs/federation.md: the ledger records the outcome 'aborted + phase'.  A run the
    leader aborted (a hospital killed in round 2) was recorded at the others as 'aborted,
    phase: aborted' -- no phase; the leader's reason, which starts with its phase and names
    the failed hospital, was only in the log.  Every daemon's ledger stays intact."""
    spec = table1_spec(tmp_path)
    work = tmp_path / "w"
    work.mkdir()
    with daemons(_table1_parties(tmp_path), work, policy=TEST_POLICY) as ds:
        victim = ds[2]
        cfg = federation_config(ds, work, spec, tmp_path / "out.csv", None)

        def kill(round_: int, _spec: object) -> None:
            if round_ >= 2 and victim.proc.poll() is None:
                os.kill(victim.proc.pid, signal.SIGKILL)
                victim.proc.wait()

        with pytest.raises(RunAborted, match=f"party {victim.name} failed during round 2"):
            run_federation(cfg, progress=kill)
        assert not (tmp_path / "out.csv").exists()
        for d in ds[:2]:
            rows = _ledger_rows(work / f"{d.name}.toml")
            [ended] = [r for r in rows if r["event"] in ("released", "aborted")]
            assert ended["event"] == "aborted", ended
            phase = str(ended["phase"])
            assert phase.startswith("aborted by the leader: rounds: "), phase
            assert f"party {victim.name} failed during round 2" in phase, phase
            verify = [sys.executable, "-m", "fedanon.cli", "party", "ledger", "verify"]
            proc = subprocess.run(
                [*verify, "--config", str(work / f"{d.name}.toml")],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_hung_hospital_times_out_named_plainly_and_serves_the_next_run(tmp_path: Path) -> None:
    """SIGSTOP one daemon in round 2 (a hung hospital): the leader stops within the status
    probe's and Abort's deadlines, names the hospital and the phase and says it did not
    answer -- it said only 'DEADLINE_EXCEEDED: Deadline Exceeded'; nothing is published.
    After SIGCONT the daemon serves the next run."""
    spec = table1_spec(tmp_path)
    work = tmp_path / "w"
    work.mkdir()
    out = tmp_path / "out.csv"
    with daemons(_table1_parties(tmp_path), work, policy=TEST_POLICY) as ds:
        victim = ds[1]
        cfg = federation_config(ds, work, spec, out, tmp_path / "rep.json")

        def stop(round_: int, _spec: object) -> None:
            if round_ >= 2 and not stopped:
                os.kill(victim.proc.pid, signal.SIGSTOP)
                stopped.append(time.monotonic())

        stopped: list[float] = []
        try:
            with pytest.raises(RunAborted) as err:
                run_federation(cfg, progress=stop)
        finally:
            os.kill(victim.proc.pid, signal.SIGCONT)
        took = time.monotonic() - stopped[0]
        msg = str(err.value)
        assert msg.startswith(f"party {victim.name} failed during round 2"), msg
        assert "no answer at 127.0.0.1:" in msg and "hung" in msg, msg
        assert took < 15.0, took  # 1 s late, the 5 s status probe, the 5 s Abort
        assert not out.exists() and not (tmp_path / "rep.json").exists()
        assert run_federation(cfg).records > 0  # the resumed daemon serves the next run
        assert out.exists()
