"""The privacy ledger in real party daemons (separate processes, mTLS): a second DP run over
a hospital's max_total_epsilon is refused (exit 2 at the leader, naming the budget, what is
spent and by which run); a daemon killed (SIGKILL) between reservation and release restarts
with the run aborted and its epsilon spent; a corrupt ledger stops the start; the officer's
``ledger show`` / ``verify`` (exit 3 on an edited row)."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
from conftest import EXAMPLES
from test_dp_daemons import CLS, _adult, _conf, _deal, _leader_run, _spec

from fedanon.dp.spec import load_dp_spec
from fedanon.leader.localdaemons import party_toml
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.pb.fedanon.v1 import party_pb2_grpc as pb_grpc
from fedanon.security import certs
from fedanon.security.policy import PartyPolicy
from fedanon.security.tls import TlsMaterial

pytestmark = pytest.mark.slow
POLICY = PartyPolicy(
    min_K=2,
    min_L=1,
    max_C=1.0,
    release_unchanged=(CLS,),
    max_epsilon=1.0,
    max_total_epsilon=1.5,
    secure_sum=("pairwise", "ring"),  # _prepare's request sums along the ring
)
FEDANON = [sys.executable, "-m", "fedanon.cli"]


class Proc:
    def __init__(self, name: str, cfg: Path, work: Path) -> None:
        self.name, self.cfg, self.work = name, cfg, work
        self.port_file = work / f"{name}.port"
        self.port_file.unlink(missing_ok=True)
        with (work / f"{name}.log").open("ab") as log:
            cmd = [*FEDANON, "party", "serve", "--config", str(cfg)]
            self.proc = subprocess.Popen(
                [*cmd, "--port-file", str(self.port_file)], stdout=log, stderr=subprocess.STDOUT
            )
        end = time.monotonic() + 30
        while not self.port_file.exists():
            assert self.proc.poll() is None, (work / f"{name}.log").read_text()
            assert time.monotonic() < end
            time.sleep(0.02)
        self.port = int(self.port_file.read_text())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)


def _configs(names: list[str], paths: list[Path], work: Path) -> list[Path]:
    certdir = work / "certs"
    certs.init_ca(certdir)
    certs.issue(certdir, "leader", "leader")
    out = []
    for name, data in zip(names, paths, strict=True):
        certs.issue(certdir, name, "party")
        text = party_toml(name, data, certdir, None, POLICY)  # [policy] with its budgets
        cfg = work / f"{name}.toml"
        cfg.write_text(text)
        out.append(cfg)
    return out


@contextmanager
def _daemons(names: list[str], cfgs: list[Path], work: Path) -> Iterator[list[Proc]]:
    started: list[Proc] = []
    try:
        for n, c in zip(names, cfgs, strict=True):
            started.append(Proc(n, c, work))
        yield started
    finally:
        for p in started:
            p.stop()


def _ledger(cmd: str, cfg: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    full = [*FEDANON, "party", "ledger", cmd, "--config", str(cfg), *extra]
    return subprocess.run(full, capture_output=True, text=True, timeout=60)


def _rows(cfg: Path) -> list[dict[str, object]]:
    proc = _ledger("show", cfg, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_second_dp_run_over_the_budget_is_refused(tmp_path: Path) -> None:
    names = ["hospital-a", "hospital-b", "hospital-c"]
    work = tmp_path / "w"
    work.mkdir()
    header, rows = _adult(3000)
    paths = [tmp_path / f"{n}.csv" for n in names]
    _deal(header, rows, paths, tmp_path)
    cfgs = _configs(names, paths, work)
    out, report = tmp_path / "released.csv", tmp_path / "report.json"
    spec = _spec(tmp_path, "1.0", "max", h=3)
    with _daemons(names, cfgs, work) as ds:
        conf = _conf(ds, work, spec, out, report)  # type: ignore[arg-type]
        first = _leader_run(conf)
        assert first.returncode == 0, first.stderr
        out.unlink()
        report.unlink()
        second = _leader_run(conf)
        assert second.returncode == 2, second.stderr
        last = second.stderr.strip().splitlines()[-1]
        run1 = next(r for r in _rows(cfgs[0]) if r["event"] == "reserved")["run_id"]
        assert isinstance(run1, str)
        assert re.fullmatch(
            r"fedanon: error: hospital-[abc] refuses: epsilon 1\.0 would bring this table's "
            rf"total to 2\.0 > max_total_epsilon = 1\.5 \(spent 1\.0 in runs {run1[:8]}\)",
            last,
        ), last
        assert not out.exists() and not report.exists()
    for cfg in cfgs:  # every hospital: reserved, released (bytes sent), then the refusal
        events = [(r["event"], r["run_id"]) for r in _rows(cfg) if r["event"] != "start"]
        assert events[:2] == [("reserved", run1), ("released", run1)], events
        assert events[2:] in ([], [("refused", events[2][1] if events[2:] else None)])
        released = next(r for r in _rows(cfg) if r["event"] == "released")
        assert isinstance(released["bytes"], int) and released["bytes"] > 0
    refusals = [r for cfg in cfgs for r in _rows(cfg) if r["event"] == "refused"]
    assert refusals and all("max_total_epsilon" in str(r["reason"]) for r in refusals)
    # the officer's verify: intact, then a row edited by hand
    ok = _ledger("verify", cfgs[0])
    assert ok.returncode == 0 and "intact" in ok.stdout, ok.stdout + ok.stderr
    db = sqlite3.connect(work / "hospital-a.ledger.sqlite")
    db.execute("UPDATE entries SET epsilon = '1/10' WHERE event = 'reserved'")
    db.commit()
    seq = db.execute("SELECT seq FROM entries WHERE event = 'reserved'").fetchone()[0]
    db.close()
    bad = _ledger("verify", cfgs[0])
    assert bad.returncode == 3, bad.stdout + bad.stderr
    assert f"NOT intact: row {seq}:" in bad.stdout
    text = _ledger("show", cfgs[0], "--since", "2000-01-01")
    assert text.returncode == 0 and "released" in text.stdout
    csv_out = _ledger("show", cfgs[0], "--csv")
    assert csv_out.stdout.splitlines()[0].startswith("seq,time,event,run_id")


def _prepare(port: int, pki: Path, spec_path: Path, run_id: bytes) -> None:
    tls = TlsMaterial.load(pki / "ca.pem", pki / "leader.pem", pki / "leader.key")
    spec, _ = load_dp_spec(spec_path)
    files = {
        a.taxonomy: (spec_path.parent / a.taxonomy).read_bytes()
        for a in spec.run.qids
        if a.taxonomy
    }
    ring = [pb.PartyRef(name=n, address=f"127.0.0.1:{port}") for n in ("h", "x", "y")]
    req = pb.PrepareRequest(
        run_id=run_id, spec_toml=spec_path.read_text(), files=files, ring=ring, ring_position=0
    )
    with tls.channel(f"127.0.0.1:{port}", "h") as chan:
        pb_grpc.PartyStub(chan).Prepare(req, timeout=60)  # type: ignore[no-untyped-call]


def test_sigkill_between_reservation_and_release(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    header, rows = _adult(1000)
    data = tmp_path / "h.csv"
    data.write_text("\n".join([header, *rows]) + "\n")
    [cfg] = _configs(["h"], [data], work)
    spec = _spec(tmp_path, "1.0", "max", h=3)
    d = Proc("h", cfg, work)
    try:
        _prepare(d.port, work / "certs", spec, b"K" * 16)  # reserved: epsilon 1.0 spent
        d.proc.kill()  # SIGKILL: no Finish, no Abort, no clean shutdown
        d.proc.wait(10)
        d = Proc("h", cfg, work)
        with pytest.raises(grpc.RpcError) as err:
            _prepare(d.port, work / "certs", spec, b"L" * 16)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "total to 2.0 > max_total_epsilon = 1.5" in str(err.value.details())
    finally:
        d.stop()
    events = [(r["event"], r["run_id"]) for r in _rows(cfg) if r["event"] != "start"]
    k, l_ = (b"K" * 16).hex(), (b"L" * 16).hex()
    assert events == [("reserved", k), ("aborted", k), ("refused", l_)], events
    aborted = next(r for r in _rows(cfg) if r["event"] == "aborted")
    assert "stopped before the run ended" in str(aborted["phase"])


def test_corrupt_ledger_stops_the_daemon_start(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    data = tmp_path / "h.csv"
    data.write_text((EXAMPLES / "table1" / "table1.csv").read_text())
    [cfg] = _configs(["h"], [data], work)
    (work / "h.ledger.sqlite").write_bytes(b"not a database at all " * 200)
    cmd = [*FEDANON, "party", "serve", "--config", str(cfg)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert "privacy ledger" in proc.stderr and "corrupt" in proc.stderr, proc.stderr
