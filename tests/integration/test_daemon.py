"""The party daemon on its own: start-up refusals (exit 2), exclusive port, hostile input
from the leader (non-UTF-8 taxonomy, forged log lines), orphaned runs reaped in the background."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from conftest import EXAMPLES, TEST_POLICY, table1_spec

from fedanon.leader.federate import daemons
from fedanon.leader.links import Link, PartyRejected
from fedanon.leader.localdaemons import party_toml
from fedanon.model.spec import load_spec
from fedanon.net import rpc
from fedanon.party.config import load_party_config
from fedanon.party.server import PartyServer
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security import certs
from fedanon.security.tls import TlsMaterial

pytestmark = pytest.mark.slow


def _serve(config: Path, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`fedanon party serve`; a daemon that starts anyway runs into the timeout."""
    cmd = [sys.executable, "-m", "fedanon.cli", "party", "serve", "--config", str(config)]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"party serve --config {config.name} started instead of refusing")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    out = tmp_path / "data.csv"
    out.write_text((EXAMPLES / "table1" / "table1.csv").read_text())
    return out


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    d = tmp_path / "certs"
    certs.init_ca(d)
    certs.issue(d, "leader", "leader")
    certs.issue(d, "h", "party")
    return d


def test_second_daemon_on_the_same_port_fails_at_start_up(tmp_path: Path, data: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    with daemons([("h", data)], work, policy=TEST_POLICY) as [first]:
        certs.issue(work / "certs", "h2", "party")
        text = party_toml("h2", data, work / "certs", None, TEST_POLICY)
        cfg = work / "h2.toml"
        cfg.write_text(text.replace("127.0.0.1:0", f"127.0.0.1:{first.port}"))
        proc = _serve(cfg)
        assert proc.returncode == 2, proc.stderr
        assert f"cannot listen on 127.0.0.1:{first.port}" in proc.stderr
        assert "in use" in proc.stderr
        assert first.proc.poll() is None  # the first daemon keeps serving
    # the daemon that never served left no 'daemon started' row in its ledger
    with contextlib.closing(sqlite3.connect(work / "h2.ledger.sqlite")) as db:
        events = [e for (e,) in db.execute("SELECT event FROM entries")]
    assert "start" not in events, events


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("no-policy", "add a [policy] table"),
        ("missing-data", "[party] data does not exist"),
        ("data-is-a-directory", "[party] data is not a regular file"),
        ("leader-certificate", "a leader certificate; a daemon needs a party certificate"),
        ("pinned-spec-against-policy", "the pinned spec is refused by this party's own [policy]"),
    ],
)
def test_start_up_refusals(case: str, needle: str, tmp_path: Path, data: Path, pki: Path) -> None:
    name, policy, pin = "h", TEST_POLICY, None
    if case == "no-policy":
        policy = None
    elif case == "missing-data":
        data = tmp_path / "nowhere.csv"
    elif case == "data-is-a-directory":
        data = tmp_path
    elif case == "leader-certificate":
        name = "leader"
    else:
        pin = table1_spec(tmp_path)
        pin.write_text(pin.read_text().replace("K = 2", "K = 1"))  # below min_K = 2
    cfg = tmp_path / "party.toml"
    text = party_toml(name, data, pki, pin, policy)
    cfg.write_text(text.replace('leader = "leader"', 'leader = "boss"'))
    proc = _serve(cfg)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def _leader(pki: Path, port: int) -> tuple[grpc.Channel, pb_grpc.PartyStub]:
    tls = TlsMaterial.load(pki / "ca.pem", pki / "leader.pem", pki / "leader.key")
    chan = tls.channel(f"127.0.0.1:{port}", "h")
    return chan, pb_grpc.PartyStub(chan)


def _prepare_request(spec_path: Path, port: int, run_id: bytes) -> pb.PrepareRequest:
    spec, reader = load_spec(spec_path)
    files = {a.taxonomy: reader(a.taxonomy).encode() for a in spec.qids if a.taxonomy}
    ring = [pb.PartyRef(name=n, address=f"127.0.0.1:{port}") for n in ("h", "x", "y")]
    return pb.PrepareRequest(
        run_id=run_id, spec_toml=spec_path.read_text(), files=files, ring=ring, ring_position=0
    )


def test_hostile_leader_input_is_refused_cleanly_and_never_forges_log_lines(
    tmp_path: Path, data: Path
) -> None:
    work = tmp_path / "w"
    work.mkdir()
    spec_path = table1_spec(tmp_path)
    with daemons([("h", data)], work, policy=TEST_POLICY) as [h]:
        chan, stub = _leader(work / "certs", h.port)
        with chan:
            # a taxonomy that is not UTF-8: INVALID_ARGUMENT naming the party, no traceback
            req = _prepare_request(spec_path, h.port, b"T" * 16)
            req.files["job.txt"] = b"ANY\n  \xff\xfeJanitor\n"
            with pytest.raises(grpc.RpcError) as err:
                stub.Prepare(req, timeout=30)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            md = rpc.failure_metadata(err.value)
            assert md[rpc.MD_PARTY] == "h" and md[rpc.MD_KIND] == "input"
            link = Link("h", "-", chan, stub, frozenset({"h"}))
            mapped = link.failure("prepare", err.value)
            assert isinstance(mapped, PartyRejected) and mapped.exit_code == 2
            assert str(mapped).startswith("party h rejected the run during prepare: ")
            assert "taxonomy file 'job.txt' sent by the leader is not UTF-8" in str(mapped)

            # an Abort reason with a newline must not write a second (forged) log line
            forged = "2026-01-01 00:00:00,000 INFO fedanon.audit: decision=allow FORGED"
            stub.Abort(pb.AbortRequest(run_id=b"A" * 16, reason=f"x\n{forged}\x1b[2J"), timeout=10)
            # so must not a spec's column name (logged in the accepted-run line)
            evil = spec_path.read_text().replace('name = "Transfuse"', 'name = "Tr\\nFORGED2"')
            ok = _prepare_request(spec_path, h.port, b"U" * 16)
            ok.spec_toml = evil
            with pytest.raises(grpc.RpcError) as err2:  # TEST_POLICY does not list that column
                stub.Prepare(ok, timeout=30)
            assert rpc.failure_metadata(err2.value)[rpc.MD_KIND] == "policy"
    log = (work / "h.log").read_text()
    assert "Traceback" not in log
    lines = log.splitlines()
    assert not any(ln.startswith(("2026-01-01", "FORGED")) for ln in lines)
    assert any("aborted by the leader: x\\x0a2026-01-01" in ln and "\\x1b[2J" in ln for ln in lines)
    assert "not UTF-8" in log and "\x1b" not in log
    assert any("column 'Tr\\nFORGED2' would be released" in ln for ln in lines), log
    assert not any(ln.startswith("FORGED2") for ln in lines)


def test_orphaned_runs_are_reaped_in_the_background(
    tmp_path: Path, data: Path, pki: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    cfg_path = tmp_path / "h.toml"
    text = party_toml("h", data, pki, None, TEST_POLICY)
    cfg_path.write_text(
        text.replace("[tls]", "[tls]", 1).replace(
            'listen = "127.0.0.1:0"', 'listen = "127.0.0.1:0"\nrun_idle_timeout_seconds = 0.5'
        )
    )
    server = PartyServer(load_party_config(cfg_path))
    server.start()
    try:
        chan, stub = _leader(pki, server.port)
        with chan:
            stub.Prepare(
                _prepare_request(table1_spec(tmp_path), server.port, b"O" * 16), timeout=30
            )
            assert b"O" * 16 in server.service.runs
            # the leader "crashes": no Abort, no Finish, no further RPC.  Nothing else calls
            # into the daemon, yet the run (and its table) is dropped.
            end = time.monotonic() + 10
            while b"O" * 16 in server.service.runs and time.monotonic() < end:
                time.sleep(0.1)
            assert b"O" * 16 not in server.service.runs
            assert len(server.service.runs) == 0
            with pytest.raises(grpc.RpcError) as err:
                stub.Instruct(pb.Instruction(run_id=b"O" * 16), timeout=10)
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        server.stop(0)
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        "nothing new from the leader (instruction, sum or check) for 0.5s" in m for m in messages
    )
    assert any("reaped: 0 bytes of statistics sent" in m for m in messages)
