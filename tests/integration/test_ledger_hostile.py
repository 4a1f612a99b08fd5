"""``max_releases`` against a hostile leader, in real daemons (mTLS, separate processes).

The leader alone chooses every specialization.  A re-run of a released spec on the same ring
over unchanged tables used to be "the same release" (free) whatever the leader steered: with
``max_releases = 1`` a leader that took other specializations got other tables of the same
records.  Now a re-run is free only while each hospital's statistics stay those it sent in
the released run: an honest re-run is free and gives the same table; the hostile one is
refused (``max_releases``, exit 2) before any statistic of a new state leaves."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_dp_daemons import CLS, _adult, _conf, _deal, _leader_run
from test_ledger_daemons import FEDANON, Proc, _daemons

from fedanon.leader.localdaemons import party_toml
from fedanon.security import certs
from fedanon.security.policy import PartyPolicy

pytestmark = pytest.mark.slow
ADULT = Path(__file__).parents[2] / "examples" / "adult"
HOSTILE = Path(__file__).parent / "hostile_leader.py"
POLICY = PartyPolicy(
    min_K=2, min_L=1, max_C=1.0, release_unchanged=(CLS, "marital-status"), max_releases=1
)


def _rows(cfg: Path) -> list[dict[str, object]]:
    cmd = [*FEDANON, "party", "ledger", "show", "--config", str(cfg), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def kanon_federation(
    tmp_path: Path, policy: PartyPolicy
) -> tuple[list[str], Path, list[Path], Path]:
    """Three hospitals' party.toml (3,000 Adult rows dealt out, ``policy``) with fresh
    certificates in ``tmp_path / "w"``, and run-kanon.toml beside its taxonomies: (names, work
    directory, configs, spec)."""
    names = ["hospital-a", "hospital-b", "hospital-c"]
    work = tmp_path / "w"
    work.mkdir()
    header, rows = _adult(3000)
    paths = [tmp_path / f"{n}.csv" for n in names]
    _deal(header, rows, paths, tmp_path)
    certdir = work / "certs"
    certs.init_ca(certdir)
    certs.issue(certdir, "leader", "leader")
    cfgs = []
    for name, data in zip(names, paths, strict=True):
        certs.issue(certdir, name, "party")
        cfg = work / f"{name}.toml"
        cfg.write_text(party_toml(name, data, certdir, None, policy))
        cfgs.append(cfg)
    spec = tmp_path / "kanon.toml"
    shutil.copy(ADULT / "run-kanon.toml", spec)
    (tmp_path / "taxonomies").symlink_to(ADULT / "taxonomies")
    return names, work, cfgs, spec


def test_a_hostile_rerun_is_a_new_release(tmp_path: Path) -> None:
    names, work, cfgs, spec = kanon_federation(tmp_path, POLICY)
    out, report = tmp_path / "released.csv", tmp_path / "report.json"
    digests = []
    with _daemons(names, cfgs, work) as ds:
        conf = _conf(ds, work, spec, out, report)  # type: ignore[arg-type]
        for _ in range(2):  # the honest run, then its re-run: free, the same table
            done = _leader_run(conf)
            assert done.returncode == 0, done.stderr
            digests.append(hashlib.sha256(out.read_bytes()).hexdigest())
            out.unlink()
            report.unlink()
        cmd = [sys.executable, str(HOSTILE), "leader", "run", "--config", str(conf)]
        hostile = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert all(isinstance(p, Proc) for p in ds)
    assert digests[0] == digests[1]
    assert hostile.returncode == 2, hostile.stderr
    last = hostile.stderr.strip().splitlines()[-1]
    assert "refuses: the leader's instructions left the path of the released runs" in last
    assert "release 2 > max_releases = 1" in last, last
    assert not out.exists()
    events = [(r["event"], r["phase"]) for r in _rows(cfgs[0]) if r["event"] != "start"]
    assert events[:4] == [
        ("reserved", "Prepare"),
        ("released", None),
        ("reserved", "Prepare"),  # the honest re-run: charged nothing more
        ("released", None),
    ], events
    refusals = [
        r for cfg in cfgs for r in _rows(cfg) if r["event"] == "refused"
    ]  # the hospital that saw the new state first refused it; it sent nothing of it
    assert refusals and all(r["phase"] == "statistics" for r in refusals)
    assert all("max_releases" in str(r["reason"]) for r in refusals)
