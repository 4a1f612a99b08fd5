"""m-privacy across hospitals (issue 22 items 2-3): three real daemons whose MPC workers check
each candidate among themselves release exactly the centralized m-private release of the
same rows with the provider column, summed pairwise or round the ring, with or without a
pinned spec; a hospital that does not opt in refuses, a federation without an honest
majority is refused, workers started while the tables are read end when a hospital refuses
its data, a second m-private run while one is active is refused at Prepare (the first goes
on), and a leader that asks the hospitals about different candidates gets no bit."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fedanon.apispec import Spec
from fedanon.centralized import anonymize_file
from fedanon.errors import ConfigError, FedanonError
from fedanon.leader.federate import daemons, federate, federation_config
from fedanon.leader.links import PartyRejected
from fedanon.leader.mpccheck import FederatedCoalitionCheck
from fedanon.leader.run import run_federation
from fedanon.leader.watch import Call, wait_all
from fedanon.methods import registry
from fedanon.net.convert import coalition_to_pb
from fedanon.party.mpcrun import BUSY, CLOSE_S
from fedanon.privacy.mprivacy import CoalitionQuery
from fedanon.security.policy import PartyPolicy

ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"
ROWS = 6000
NAMES = ("young", "middle", "old")
POLICY = PartyPolicy(
    min_K=2,
    min_L=1,
    max_C=1.0,
    release_unchanged=("marital-status", "salary-class"),
    allow_mpc=True,
)


def spec_text(m: int, provider: bool) -> str:
    text = (ADULT / "run-kanon.toml").read_text()
    text = text.replace('taxonomy = "', f'taxonomy = "{ADULT}/')
    text = text.replace("[privacy]\n", f"[privacy]\nm = {m}\n", 1)
    if provider:
        text += '\n[[attribute]]\nname = "hospital"\nrole = "provider"\n'
    return text


@pytest.fixture(scope="module")
def adult3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Adult's first records over three hospitals whose populations differ (one holds half);
    the union with the provider column for the centralized run."""
    d = tmp_path_factory.mktemp("adult3")
    df = pd.read_csv(ADULT / "adult.csv.gz", dtype=str, keep_default_na=False).head(ROWS)
    rng = np.random.default_rng(7)
    order = np.argsort(df["age"].astype(int).to_numpy() + rng.integers(0, 25, len(df)))
    owner = np.empty(len(df), dtype=object)
    owner[order[: ROWS // 2]] = NAMES[0]
    owner[order[ROWS // 2 : 3 * ROWS // 4]] = NAMES[1]
    owner[order[3 * ROWS // 4 :]] = NAMES[2]
    for name in NAMES:
        df[owner == name].to_csv(d / f"{name}.csv", index=False)
    df.assign(hospital=owner).to_csv(d / "union.csv", index=False)
    for m in (1, 2):
        (d / f"fed{m}.toml").write_text(spec_text(m, provider=False))
        (d / f"central{m}.toml").write_text(spec_text(m, provider=True))
    return d


def lines(path: Path) -> list[str]:
    """The release's header, then its records in order (the union's order is not the
    input's: the same bytes, record for record)."""
    head, *rows = path.read_text().splitlines()
    return [head, *sorted(rows)]


def parties(d: Path) -> list[tuple[str, Path]]:
    return [(name, d / f"{name}.csv") for name in NAMES]


def test_federated_m1_is_the_centralized_m_private_release(adult3: Path, tmp_path: Path) -> None:
    central, _ = anonymize_file(
        Spec.from_toml(adult3 / "central1.toml"),
        adult3 / "union.csv",
        tmp_path / "central.csv",
        None,
        False,
    )
    assert central["m_privacy"]["candidates_rejected"] > 0  # the check changes the release
    with daemons(parties(adult3), tmp_path, policy=POLICY, mpc=True) as ds:
        cfg = federation_config(
            ds, tmp_path, adult3 / "fed1.toml", tmp_path / "fed.csv", tmp_path / "fed.json"
        )
        out = run_federation(cfg)
        logs = "".join((tmp_path / f"{n}.log").read_text() for n in NAMES)
    assert lines(tmp_path / "fed.csv") == lines(tmp_path / "central.csv")
    assert "hospital" not in (tmp_path / "fed.csv").read_text().splitlines()[0]
    assert out.report["specializations"] == central["specializations"]
    fed_m, cen_m = out.report["m_privacy"], central["m_privacy"]
    assert fed_m == cen_m  # m, providers, candidates checked and rejected
    assert logs.count("MPC worker started") == 3
    assert logs.count("coalition check 0 of") == 3
    # m = 2 needs 5 hospitals: the leader refuses before any party is asked
    with daemons(parties(adult3), tmp_path / "m2", policy=POLICY, mpc=True) as ds:
        cfg = federation_config(
            ds, tmp_path / "m2", adult3 / "fed2.toml", tmp_path / "m2.csv", None
        )
        with pytest.raises(ConfigError, match="honest majority for its MPC: at least 5"):
            run_federation(cfg)
    assert not (tmp_path / "m2.csv").exists()


def test_a_hospital_without_allow_mpc_refuses(adult3: Path, tmp_path: Path) -> None:
    no_mpc = PartyPolicy(min_K=2, min_L=1, max_C=1.0, release_unchanged=POLICY.release_unchanged)
    with daemons(parties(adult3), tmp_path, policy=no_mpc, mpc=True) as ds:
        cfg = federation_config(ds, tmp_path, adult3 / "fed1.toml", tmp_path / "fed.csv", None)
        with pytest.raises(PartyRejected, match="allow_mpc = true") as err:
            run_federation(cfg)
        assert err.value.rule == "allow_mpc"
        log = (tmp_path / f"{NAMES[0]}.log").read_text()
    assert not (tmp_path / "fed.csv").exists()
    assert "MPC worker started" not in log  # refused before the table is read


def test_federate_cli_runs_an_m_private_spec(adult3: Path, tmp_path: Path) -> None:
    # `fedanon federate` gives its daemons allow_mpc and MPC ports for an m-private spec
    anonymize_file(
        Spec.from_toml(adult3 / "central1.toml"),
        adult3 / "union.csv",
        tmp_path / "central.csv",
        None,
        False,
    )
    rep = federate(adult3 / "fed1.toml", parties(adult3), tmp_path / "fed.csv", None)
    assert lines(tmp_path / "fed.csv") == lines(tmp_path / "central.csv")
    assert rep["m_privacy"]["providers"] == 3
    # the centralized spec, which declares the provider column, runs federated too: a
    # hospital's table needs no such column (it is the provider); every hospital refused
    # it as 'declared column hospital is missing' before
    rep = federate(adult3 / "central1.toml", parties(adult3), tmp_path / "fed2.csv", None)
    assert lines(tmp_path / "fed2.csv") == lines(tmp_path / "central.csv")
    assert rep["m_privacy"]["providers"] == 3


def _mpc_workers_under(pids: set[int]) -> list[int]:
    """The MPC worker processes (``python -m fedanon.party.mpc``) descending from ``pids``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"fedanon.party.mpc\0" not in (entry / "cmdline").read_bytes():
                continue
            pid = int(entry.name)
            while pid > 1 and pid not in pids:
                stat = (Path("/proc") / str(pid) / "stat").read_text()
                pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent
        except (OSError, ValueError, IndexError):
            continue
        if pid in pids:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_workers_started_before_the_read_end_when_a_hospital_refuses_its_data(
    adult3: Path, tmp_path: Path
) -> None:
    # the workers start (and connect) while the tables are read; a hospital whose table is
    # refused after its worker started stops it at once, the others' end with the abort
    d = tmp_path / "data"
    d.mkdir()
    for name in NAMES:
        df = pd.read_csv(adult3 / f"{name}.csv", dtype=str, keep_default_na=False)
        if name == NAMES[2]:
            df = df.drop(columns=["salary-class"])  # read, then refused: a missing column
        df.to_csv(d / f"{name}.csv", index=False)
    with daemons(parties(d), tmp_path, policy=POLICY, mpc=True) as ds:
        cfg = federation_config(ds, tmp_path, adult3 / "fed1.toml", tmp_path / "fed.csv", None)
        with pytest.raises(FedanonError):
            run_federation(cfg)
        pids = {dm.proc.pid for dm in ds}
        deadline = time.monotonic() + 2 * CLOSE_S + 5
        while _mpc_workers_under(pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _mpc_workers_under(pids) == []
        log = (tmp_path / f"{NAMES[2]}.log").read_text()
    assert "MPC worker started" in log  # before its table was read and refused
    assert not (tmp_path / "fed.csv").exists()


@pytest.fixture(scope="module")
def central1(adult3: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("central1") / "central.csv"
    anonymize_file(Spec.from_toml(adult3 / "central1.toml"), adult3 / "union.csv", out, None, False)
    return out


def test_ring_sum_with_m1_is_the_pairwise_and_centralized_release(
    adult3: Path, central1: Path, tmp_path: Path
) -> None:
    # the MPC check does not depend on how the totals are summed: ring and pairwise runs
    # ask the same checks in the same states and release the same bytes
    both = dataclasses.replace(POLICY, secure_sum=("pairwise", "ring"))
    with daemons(parties(adult3), tmp_path, policy=both, mpc=True) as ds:
        for how in ("ring", "pairwise"):
            cfg = federation_config(
                ds, tmp_path, adult3 / "fed1.toml", tmp_path / f"{how}.csv", None, secure_sum=how
            )
            out = run_federation(cfg)
            assert out.report["m_privacy"]["candidates_rejected"] > 0
    assert lines(tmp_path / "ring.csv") == lines(tmp_path / "pairwise.csv") == lines(central1)


def test_a_hospital_with_a_pinned_spec_runs_m1(
    adult3: Path, central1: Path, tmp_path: Path
) -> None:
    # the first hospital accepts only the m-private spec it pinned: it runs its MPC worker
    # like the others, and the release is the centralized one
    pins = {NAMES[0]: adult3 / "fed1.toml"}
    with daemons(parties(adult3), tmp_path, pins=pins, policy=POLICY, mpc=True) as ds:
        cfg = federation_config(ds, tmp_path, adult3 / "fed1.toml", tmp_path / "fed.csv", None)
        run_federation(cfg)
        log = (tmp_path / f"{NAMES[0]}.log").read_text()
    assert "MPC worker started" in log
    assert lines(tmp_path / "fed.csv") == lines(central1)


def _started(tmp_path: Path) -> int:
    return sum((tmp_path / f"{n}.log").read_text().count("MPC worker started") for n in NAMES)


def test_a_second_m_private_run_is_refused_while_one_is_active(
    adult3: Path, central1: Path, tmp_path: Path
) -> None:
    # each hospital's MPC port is fixed: a second m-private run is refused at Prepare, before
    # a worker starts or a record is read, saying only that the port is busy; the first run
    # goes on to its release, and the next run after it is accepted
    with daemons(parties(adult3), tmp_path, policy=POLICY, mpc=True) as ds:
        first: dict[str, Any] = {}

        def run_first() -> None:
            cfg = federation_config(
                ds, tmp_path, adult3 / "fed1.toml", tmp_path / "first.csv", None
            )
            try:
                first["out"] = run_federation(cfg)
            except BaseException as exc:
                first["error"] = exc

        t = threading.Thread(target=run_first)
        t.start()
        deadline = time.monotonic() + 60
        while _started(tmp_path) < 3 and t.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        cfg = federation_config(ds, tmp_path, adult3 / "fed1.toml", tmp_path / "second.csv", None)
        with pytest.raises(PartyRejected, match=BUSY) as err:
            run_federation(cfg)
        assert err.value.rule == "mpc"
        t.join(120)
        assert "error" not in first and "out" in first
        assert _started(tmp_path) == 3  # the second run started no worker
        cfg = federation_config(ds, tmp_path, adult3 / "fed1.toml", tmp_path / "third.csv", None)
        run_federation(cfg)  # "try again after it ends"
        each = [(tmp_path / f"{n}.log").read_text() for n in NAMES]
    assert all(BUSY in log for log in each)  # each hospital refused the second run
    logs = "".join(each)
    assert "address already in use" not in logs and "belongs to another run" not in logs
    assert not (tmp_path / "second.csv").exists()
    assert lines(tmp_path / "first.csv") == lines(tmp_path / "third.csv") == lines(central1)


def test_a_leader_asking_hospitals_about_different_candidates_gets_no_bit(
    adult3: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a hostile leader asks the first hospital about the candidate and the others about
    # another one with as many groups (so the shares fit together and the opened bit would
    # depend on the first hospital's counts alone): the workers compare what they were
    # asked before sharing any count, every hospital refuses the check, the leader exits 2
    # and nothing is released
    spec = Spec.from_toml(adult3 / "fed1.toml")
    run_spec = spec.run_spec
    trees = registry.get(run_spec.privacy.model).schema(run_spec, spec.taxonomy_reader())
    kids = [int(t.nchild[0]) for t in trees.new_trees()]  # the roots' children: the groups

    def hostile(self: FederatedCoalitionCheck, candidate: tuple[int, int]) -> bool:
        b, x = candidate
        assert self.fed.instructions == 0 and x == 0  # the roots: all candidates at first
        twin = next(o for o in range(len(kids)) if o != b and kids[o] == kids[b])
        honest = CoalitionQuery(self.asked, 0, candidate)
        other = CoalitionQuery(self.asked, 0, (twin, 0))
        calls = []
        for i, lk in enumerate(self.links):
            req = coalition_to_pb(honest if i == 0 else other, self.run_id)

            def ask(stub: Any, req: Any = req) -> bool:
                return bool(stub.CoalitionCheck(req, timeout=60).passes)

            calls.append(Call(lk, "coalition check", self.pool.submit(lk.call, "check", ask)))
        wait_all(calls, lambda: None, self.deadline)
        raise AssertionError("the hospitals answered a check they were asked differently")

    monkeypatch.setattr(FederatedCoalitionCheck, "passes", hostile)
    with daemons(parties(adult3), tmp_path, policy=POLICY, mpc=True) as ds:
        cfg = federation_config(ds, tmp_path, adult3 / "fed1.toml", tmp_path / "fed.csv", None)
        with pytest.raises(PartyRejected, match="not asked the same coalition check") as err:
            run_federation(cfg)
        assert err.value.exit_code == 2
        logs = {n: (tmp_path / f"{n}.log").read_text() for n in NAMES}
    assert not (tmp_path / "fed.csv").exists()
    assert f"{NAMES[1]}, {NAMES[2]} were asked another question" in logs[NAMES[0]]
    assert f"{NAMES[0]} were asked another question" in logs[NAMES[1]]
    # check 0 is the fully generalized table's (honest); the hostile check 1 opened no bit
    assert "coalition check 1 of" not in "".join(logs.values())  # no bit at any hospital
