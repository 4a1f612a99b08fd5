"""m-privacy across hospitals (issue 22 items 2-3): three real daemons whose MPC workers check
each candidate among themselves release exactly the centralized m-private release of the
same rows with the provider column; a hospital that does not opt in refuses, a federation
without an honest majority is refused, and workers started while the tables are read end
when a hospital refuses its data."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedanon.apispec import Spec
from fedanon.centralized import anonymize_file
from fedanon.errors import ConfigError, FedanonError
from fedanon.leader.federate import daemons, federate, federation_config
from fedanon.leader.links import PartyRejected
from fedanon.leader.run import run_federation
from fedanon.party.mpcrun import CLOSE_S
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
