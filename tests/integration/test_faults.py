"""Failures: a party dying mid-run, bad peers, spec mismatch, too few parties."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from conftest import EXAMPLES, TEST_POLICY, read_rows, table1_spec, write_rows

from fedanon.errors import ConfigError, RunAborted
from fedanon.leader.federate import daemons, federation_config
from fedanon.leader.run import run_federation
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security import certs
from fedanon.security.tls import TlsMaterial

pytestmark = pytest.mark.slow


def _fedanon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedanon.cli", *args], capture_output=True, text=True, timeout=60
    )


def _split(tmp: Path, n: int) -> list[tuple[str, Path]]:
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    out = []
    for i in range(n):
        write_rows(tmp / f"d{i}.csv", header, rows[i::n])
        out.append((f"q{i}", tmp / f"d{i}.csv"))
    return out


def _health(work: Path, name: str, port: int) -> int:
    return _fedanon(
        "health", "--address", f"127.0.0.1:{port}", "--config", str(work / f"{name}.toml")
    ).returncode


def test_party_killed_mid_run(tmp_path: Path) -> None:
    spec = table1_spec(tmp_path)
    work = tmp_path / "w"
    work.mkdir()
    with daemons(_split(tmp_path, 4), work, policy=TEST_POLICY) as ds:
        victim = ds[1]
        out = tmp_path / "out.csv"
        cfg = federation_config(ds, work, spec, out, tmp_path / "rep.json")

        def kill(round_: int, _spec: object) -> None:
            if victim.proc.poll() is None:
                os.kill(victim.proc.pid, signal.SIGKILL)
                victim.proc.wait()

        with pytest.raises(RunAborted) as err:
            run_federation(cfg, progress=kill)
        msg = str(err.value)
        assert RunAborted.exit_code == 1
        assert f"party {victim.name}" in msg and "round" in msg, msg
        assert not out.exists() and not (tmp_path / "rep.json").exists()
        alive = [d for d in ds if d is not victim]
        for d in alive:
            assert _health(work, d.name, d.port) == 0
            log = (work / f"{d.name}.log").read_text()
            assert "aborted by the leader" in log
        cfg2 = federation_config(alive, work, spec, out, None)
        assert run_federation(cfg2).records > 0
        assert out.exists()


def test_peers_without_the_right_certificate_are_rejected(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    with daemons(_split(tmp_path, 3), work, policy=TEST_POLICY) as ds:
        target = f"127.0.0.1:{ds[0].port}"
        ca = (work / "certs" / "ca.pem").read_bytes()
        req = pb.PrepareRequest(run_id=b"x" * 16)

        # 1. no client certificate: the TLS handshake fails
        creds = grpc.ssl_channel_credentials(root_certificates=ca)
        opts = [("grpc.ssl_target_name_override", ds[0].name)]
        with (
            grpc.secure_channel(target, creds, options=opts) as chan,
            pytest.raises(grpc.RpcError) as e1,
        ):
            pb_grpc.PartyStub(chan).Prepare(req, timeout=5)
        assert e1.value.code() == grpc.StatusCode.UNAVAILABLE

        # 2. a certificate from another CA (a self-made "leader"): rejected at the handshake
        other = tmp_path / "other"
        certs.init_ca(other)
        certs.issue(other, "leader", "leader")
        creds2 = grpc.ssl_channel_credentials(
            root_certificates=ca,
            private_key=(other / "leader.key").read_bytes(),
            certificate_chain=(other / "leader.pem").read_bytes(),
        )
        with (
            grpc.secure_channel(target, creds2, options=opts) as chan,
            pytest.raises(grpc.RpcError) as e2,
        ):
            pb_grpc.PartyStub(chan).Prepare(req, timeout=5)
        assert e2.value.code() == grpc.StatusCode.UNAVAILABLE

        # 3. a valid party certificate calling a leader-only method: PERMISSION_DENIED + audit
        tls = TlsMaterial.load(
            work / "certs" / "ca.pem",
            work / "certs" / f"{ds[1].name}.pem",
            work / "certs" / f"{ds[1].name}.key",
        )
        with tls.channel(target, ds[0].name) as chan:
            with pytest.raises(grpc.RpcError) as e3:
                pb_grpc.PartyStub(chan).Prepare(req, timeout=5)
            assert e3.value.code() == grpc.StatusCode.PERMISSION_DENIED
            # and a party that is not the ring predecessor may not Relay
            chunk = pb.VectorChunk(header=pb.VectorHeader(run_id=b"y" * 16, phase=pb.PHASE_SPLIT))
            with pytest.raises(grpc.RpcError) as e4:
                pb_grpc.PartyStub(chan).Relay(iter([chunk]), timeout=5)
            assert e4.value.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED)
        log = (work / f"{ds[0].name}.log").read_text()
        assert "decision=deny" in log and f"name={ds[1].name}" in log and "role=party" in log
        assert "method=/fedanon.v1.Party/Prepare" in log


def test_spec_mismatch_is_a_config_error(tmp_path: Path) -> None:
    spec = table1_spec(tmp_path)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = table1_spec(other_dir)
    other.write_text(other.read_text().replace("K = 2", "K = 3"))
    work = tmp_path / "w"
    work.mkdir()
    parties = _split(tmp_path, 3)
    with daemons(parties, work, pins={parties[2][0]: other}, policy=TEST_POLICY) as ds:
        out = tmp_path / "out.csv"
        with pytest.raises(ConfigError) as err:
            run_federation(federation_config(ds, work, spec, out, None))
        assert parties[2][0] in str(err.value) and "different spec" in str(err.value)
        assert err.value.exit_code == 2 and not out.exists()


def test_fewer_than_three_parties(tmp_path: Path) -> None:
    spec = table1_spec(tmp_path)
    parts = _split(tmp_path, 2)
    args = [a for n, p in parts for a in ("--party", f"{n}={p}")]
    proc = _fedanon("federate", "--spec", str(spec), *args, "--output", str(tmp_path / "o.csv"))
    assert proc.returncode == 2 and "at least 3" in proc.stderr
    conf = tmp_path / "federation.toml"
    conf.write_text(
        f'[run]\nspec = "{spec}"\noutput = "o.csv"\n\n[tls]\nca = "ca.pem"\ncert = "l.pem"\n'
        'key = "l.key"\n\n[[party]]\nname = "a"\naddress = "127.0.0.1:1"\n\n'
        '[[party]]\nname = "b"\naddress = "127.0.0.1:2"\n'
    )
    proc = _fedanon("leader", "run", "--config", str(conf))
    assert proc.returncode == 2 and "at least 3" in proc.stderr
    assert not (tmp_path / "o.csv").exists()


def test_class_values_required(tmp_path: Path) -> None:
    parts = _split(tmp_path, 3)
    args = [a for n, p in parts for a in ("--party", f"{n}={p}")]
    spec = table1_spec(tmp_path)
    spec.write_text(re.sub(r'values = \["N", "Y"\].*\n', "", spec.read_text()))
    proc = _fedanon("federate", "--spec", str(spec), *args, "--output", str(tmp_path / "o.csv"))
    assert proc.returncode == 2 and "values" in proc.stderr, proc.stderr


def test_bad_value_at_a_party_is_named_without_the_value(tmp_path: Path) -> None:
    spec = table1_spec(tmp_path)
    parts = _split(tmp_path, 3)
    text = parts[1][1].read_text().splitlines()
    cells = text[1].split(",")
    cells[1] = "Astronaut-4711"  # not in the Job taxonomy
    text[1] = ",".join(cells)
    parts[1][1].write_text("\n".join(text) + "\n")
    args = [a for n, p in parts for a in ("--party", f"{n}={p}")]
    out = tmp_path / "o.csv"
    proc = _fedanon("federate", "--spec", str(spec), *args, "--output", str(out))
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert f"party {parts[1][0]}" in last and "prepare" in last and "Job" in last, last
    assert "Astronaut-4711" not in proc.stderr
    assert not out.exists()


def test_record_too_long_for_the_pad(tmp_path: Path) -> None:
    spec = table1_spec(tmp_path)
    parts = _split(tmp_path, 3)
    args = [a for n, p in parts for a in ("--party", f"{n}={p}")]
    out = tmp_path / "o.csv"
    pad = ("--union", "mixnet", "--max-field-bytes", "1")  # the mix-net's pad: sketch has none
    proc = _fedanon("federate", "--spec", str(spec), *args, "--output", str(out), *pad)
    assert proc.returncode == 2, proc.stderr
    assert "max_field_bytes" in proc.stderr and not out.exists()
