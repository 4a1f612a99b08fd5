"""A run id replayed after the hospitals' daemons restarted, in real daemons (mTLS, separate
processes).  Before: the daemon remembered the run ids it had seen in memory only, so after
a restart a hostile leader could run again under the id of a run that had left the released
path -- whose new release is keyed by that id, so another such run was free past
``max_releases``.  Now the ledger refuses a run id it holds, before the table is read, as
the daemon's memory does (the leader exits 1 naming the hospital)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_dp_daemons import CLS, _conf, _leader_run
from test_ledger_daemons import _daemons
from test_ledger_hostile import kanon_federation

from fedanon.security.policy import PartyPolicy

pytestmark = pytest.mark.slow
REPLAY = Path(__file__).parent / "replay_leader.py"
POLICY = PartyPolicy(
    min_K=2, min_L=1, max_C=1.0, release_unchanged=(CLS, "marital-status"), max_releases=2
)
RUN_ID = "5e" * 16


def _replay(conf: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(REPLAY), "leader", "run", "--config", str(conf)]
    env = {**os.environ, "FEDANON_RUN_ID": RUN_ID}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_a_run_id_replayed_after_a_restart_is_refused(tmp_path: Path) -> None:
    names, work, cfgs, spec = kanon_federation(tmp_path, POLICY)
    out, report = tmp_path / "released.csv", tmp_path / "report.json"
    with _daemons(names, cfgs, work) as ds:
        conf = _conf(ds, work, spec, out, report)  # type: ignore[arg-type]
        honest = _leader_run(conf)  # release 1
        assert honest.returncode == 0, honest.stderr
        hostile = _replay(conf)  # left the released path: release 2, under RUN_ID
        assert hostile.returncode == 0, hostile.stderr
        again = _replay(conf)  # the same daemons remember the id (a protocol error: exit 1)
        assert again.returncode == 1, again.stderr
        assert f"run id {RUN_ID[:8]} was used before" in again.stderr
    with _daemons(names, cfgs, work) as ds:  # restarted: same ledgers, empty memories
        conf = _conf(ds, work, spec, out, report)  # type: ignore[arg-type]
        replayed = _replay(conf)
    assert replayed.returncode == 1, replayed.stderr
    last = replayed.stderr.strip().splitlines()[-1]
    assert f"run id {RUN_ID[:8]} was used before" in last, last
