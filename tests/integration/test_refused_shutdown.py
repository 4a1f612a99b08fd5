"""A daemon that refused Prepares for its data stops on SIGTERM like any other (attack a10).

A spec whose numeric domain excludes a record makes Prepare fail while the table is read.
Before, Arrow's reader of that read stayed open (its generator suspended, kept by the
refusal's traceback through a reference cycle) until the interpreter's exit, where each one
waited 10 s in vain for Arrow's threads ("Arrow's reader still holds 3 input blocks"): 10.6 s
to stop after one refusal, over 30 s after 40, past the watchdog, which no longer runs once
the interpreter exits.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import time
from pathlib import Path

import grpc
import pytest
from conftest import serve_party

from fedanon.leader.localdaemons import party_toml
from fedanon.model.spec import load_spec
from fedanon.net.convert import secure_sum_to_pb
from fedanon.party.server import SHUTDOWN_LIMIT_S
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security import certs
from fedanon.security.policy import PartyPolicy
from fedanon.security.tls import TlsMaterial

pytestmark = pytest.mark.slow
ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"
NAME = "hospital-a"
REFUSALS = 12  # before: about 10 s each at the daemon's exit
POLICY = PartyPolicy(
    min_K=2,
    min_L=1,
    max_C=1.0,
    release_unchanged=("salary-class", "marital-status"),
    max_refusals_per_hour=1000,  # the ledger's lockout is not what this test is about
)


def _setup(work: Path) -> tuple[Path, Path]:
    with gzip.open(ADULT / "adult.csv.gz", "rt", encoding="utf-8") as fh:
        lines = [next(fh) for _ in range(3001)]  # over 64 KB: Arrow reads it
    data = work / f"{NAME}.csv"
    data.write_text("".join(lines))
    certdir = work / "certs"
    certs.init_ca(certdir)
    certs.issue(certdir, "leader", "leader")
    certs.issue(certdir, NAME, "party")
    cfg = work / f"{NAME}.toml"
    cfg.write_text(party_toml(NAME, data, certdir, None, POLICY))
    spec = work / "spec.toml"
    body = (ADULT / "run-discernibility.toml").read_text()
    spec.write_text(body.replace("domain = [17, 91]", "domain = [17, 30]", 1))  # ages above 30
    (work / "taxonomies").symlink_to(ADULT / "taxonomies")
    return cfg, spec


def _prepare(work: Path, port: int, spec: Path) -> grpc.RpcError:
    run, _ = load_spec(spec)
    files = {a.taxonomy: (spec.parent / a.taxonomy).read_bytes() for a in run.qids if a.taxonomy}
    ring = [NAME, "hospital-x", "hospital-y"]
    req = pb.PrepareRequest(
        run_id=os.urandom(16),
        spec_toml=spec.read_text(),
        files=files,
        ring=[pb.PartyRef(name=n, address=f"127.0.0.1:{port}") for n in ring],
        ring_position=0,
        secure_sum=secure_sum_to_pb("pairwise"),
    )
    c = work / "certs"
    tls = TlsMaterial.load(c / "ca.pem", c / "leader.pem", c / "leader.key")
    with tls.channel(f"127.0.0.1:{port}", NAME) as chan, pytest.raises(grpc.RpcError) as err:
        pb_grpc.PartyStub(chan).Prepare(req, timeout=60)
    return err.value


def test_sigterm_after_data_refusals_stops_within_the_limit(tmp_path: Path) -> None:
    cfg, spec = _setup(tmp_path)
    log = tmp_path / f"{NAME}.log"
    proc, port = serve_party(cfg, tmp_path / "port", log)
    try:
        for _ in range(REFUSALS):
            err = _prepare(tmp_path, port, spec)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
            assert "data does not fit the spec" in (err.details() or "")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(SHUTDOWN_LIMIT_S + 5)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {SHUTDOWN_LIMIT_S + 5:.0f} s after SIGTERM")
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    text = log.read_text()
    assert text.count("data does not fit the spec") == REFUSALS, text[-3000:]
    assert "still holds" not in text, text[-3000:]
    assert rc == 0, text[-3000:]  # a graceful stop, not the watchdog's
    assert took < SHUTDOWN_LIMIT_S / 2, f"{took:.1f} s after SIGTERM"
