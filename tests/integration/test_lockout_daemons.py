"""A hospital's ledger locks the leader out after repeated refused calls; the leader says so.

Both a lockout and a missing authorization refuse the leader's calls with PERMISSION_DENIED.
The leader used to answer a lockout with "party.toml must name this leader in [peers]
leader", sending the user to a configuration that was right.  Now the party's refusal carries
the lockout (trailing metadata) and the leader names it: locked out, for how long, and the
hospital's command that lifts it -- which then works in the running daemon."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import policy_daemons, table1_spec
from test_policy_acceptance import NAMES, UNCHANGED, _conf, _split

from fedanon.security.policy import PartyPolicy

pytestmark = pytest.mark.slow
FEDANON = [sys.executable, "-m", "fedanon.cli"]


def _run(conf: Path) -> str:
    proc = subprocess.run(
        [*FEDANON, "leader", "run", "--config", str(conf)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    return proc.stderr.strip().splitlines()[-1]


def test_a_locked_out_leader_is_told_so_and_the_hospital_can_lift_it(tmp_path: Path) -> None:
    relaxed = PartyPolicy(min_K=2, min_L=1, max_C=1.0, release_unchanged=UNCHANGED)
    strict = PartyPolicy(
        min_K=10,
        min_L=1,
        max_C=1.0,
        release_unchanged=UNCHANGED,
        max_refusals_per_hour=2,
        lockout_minutes=30,
    )
    policies = {n: strict if n == "hospital-b" else relaxed for n in NAMES}
    spec = table1_spec(tmp_path)  # K = 2 < hospital-b's min_K = 10: refused each time
    work = tmp_path / "w"
    work.mkdir()
    out = tmp_path / "released.csv"
    with policy_daemons(_split(tmp_path), work, policies) as ds:
        conf = _conf(ds, work, spec, out)
        for _ in range(2):  # two refusals: max_refusals_per_hour = 2 reached
            assert _run(conf) == "fedanon: error: hospital-b refuses: K = 2 < min_K = 10"
        last = _run(conf)  # refused at the door now
        assert re.fullmatch(
            r"fedanon: error: hospital-b has locked this leader out for 30 more minutes after "
            r"repeated refused calls \(its \[policy\] max_refusals_per_hour within an hour, "
            r"default 100: identity leader is locked out until \S+Z after too many refused "
            r"calls\); the lockout ends by itself after its lockout_minutes, or the hospital "
            r"lifts it with `fedanon party ledger unlock leader --config party.toml`",
            last,
        ), last
        assert "[peers] leader" not in last
        # the hospital's officer lifts it (the running daemon honours it): refused on policy
        cfg = work / "hospital-b.toml"
        cmd = [*FEDANON, "party", "ledger", "unlock", "leader", "--config", str(cfg)]
        lifted = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert lifted.returncode == 0 and lifted.stdout.strip() == "leader: unlocked", lifted
        assert _run(conf) == "fedanon: error: hospital-b refuses: K = 2 < min_K = 10"
    assert not out.exists()
