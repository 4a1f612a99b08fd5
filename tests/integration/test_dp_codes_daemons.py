"""DiffGen over diagnosis codes (issue 21 part 5) with real party daemons (separate processes,
mTLS): the synthetic cohort (fedanon.dp.cohort) split over 3 hospitals; with the same --seed
the federated release is byte for byte the centralized one (`fedanon anonymize` on the union
of the tables), over the pairwise secure sum and over the ring; every hospital's ledger
charges the run's epsilon; a hospital whose policy takes part in no DP run, or allows fewer
specializations, refuses at Prepare; `fedanon federate` with the codes spec works too."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import accepted_runs, policy_daemons

from fedanon.apispec import Spec
from fedanon.dp.cohort import write as write_cohort
from fedanon.dp.randomness import NOT_PRIVATE
from fedanon.dp.setanonymize import anonymize_set_file
from fedanon.leader.federate import Daemon, federation_config
from fedanon.leader.links import PartyRejected
from fedanon.leader.run import run_federation
from fedanon.security.policy import SECURE_SUMS, PartyPolicy

pytestmark = pytest.mark.slow

ROWS = 6000
CLS = "deceased"
NAMES = ["hospital-a", "hospital-b", "hospital-c"]
POLICY = PartyPolicy(
    min_K=2,
    min_L=1,
    max_C=1.0,
    release_unchanged=(CLS,),
    max_epsilon=1.0,
    max_total_epsilon=100.0,
    secure_sum=SECURE_SUMS,  # both, so that the ring is tested too
)


def _split(csv: Path, paths: list[Path]) -> None:
    """Consecutive slices of the cohort, one per hospital: their concatenation is the file."""
    lines = csv.read_text().splitlines()
    header, rows = lines[0], lines[1:]
    k = -(-len(rows) // len(paths))
    for i, p in enumerate(paths):
        p.write_text("\n".join([header, *rows[i * k : (i + 1) * k]]) + "\n")


NO_DP = PartyPolicy(2, 1, 1.0, release_unchanged=(CLS,))  # takes part in no DP run
SMALL_H = PartyPolicy(
    2,
    1,
    1.0,
    release_unchanged=(CLS,),
    max_epsilon=1.0,
    max_total_epsilon=100.0,
    max_specializations=5,
)
REFUSE = {
    "hospital-x": (
        NO_DP,
        (
            "model = 'dp' (epsilon = 1) but this policy has no max_epsilon: this hospital "
            "takes part in no differentially private run"
        ),
    ),
    "hospital-y": (SMALL_H, "specializations = 10 > max_specializations = 5"),
}


@pytest.fixture(scope="module")
def cohort(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[Daemon], Path]]:
    """hospital-a, -b, -c hold the cohort and take part in DP runs up to epsilon = 1;
    hospital-x and -y (a copy of -a's share) refuse for their policy."""
    work = tmp_path_factory.mktemp("codes")
    csv = write_cohort(work / "data", ROWS, seed=5)
    _split(csv, [work / f"{n}.csv" for n in NAMES])
    parties = [(n, work / f"{n}.csv") for n in NAMES]
    parties += [(n, work / "hospital-a.csv") for n in REFUSE]
    policies = dict.fromkeys(NAMES, POLICY) | {n: p for n, (p, _) in REFUSE.items()}
    with policy_daemons(parties, work, policies) as ds:
        yield ds, work


def _ledger(cfg: Path) -> list[dict[str, object]]:
    cmd = [sys.executable, "-m", "fedanon.cli", "party", "ledger", "show", "--config", str(cfg)]
    proc = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("secure_sum", "seed"), [("pairwise", 11), ("ring", 12)])
def test_federated_codes_equal_centralized(
    cohort: tuple[list[Daemon], Path], tmp_path: Path, secure_sum: str, seed: int
) -> None:
    ds, work = cohort
    spec, csv = work / "data" / "cohort.toml", work / "data" / "cohort.csv"
    fed_csv, fed_json = tmp_path / "fed.csv", tmp_path / "fed.json"
    cfg = federation_config(ds[:3], work, spec, fed_csv, fed_json, secure_sum=secure_sum)
    run_federation(cfg, seed=seed)
    central = anonymize_set_file(
        Spec.from_toml(spec), csv, tmp_path / "central.csv", None, seed=seed
    )
    assert fed_csv.read_bytes() == (tmp_path / "central.csv").read_bytes()
    rep = json.loads(fed_json.read_text())
    for key in ("selections", "split_points", "cut", "budget", "parameters", "release"):
        want = central[key] if key != "release" else central[key] | {"rows_written": 0}
        got = rep[key] if key != "release" else rep[key] | {"rows_written": 0}
        assert got == json.loads(json.dumps(want)), key
    assert rep["warning"] == f"{NOT_PRIVATE} {seed}" and rep["private"] is False
    # the codes were used: the mechanism opened the item taxonomy, and tested its cells
    assert any(s["attribute"] == "diagnoses" and s["tested"] > 0 for s in rep["selections"])
    fed = rep["federation"]
    assert fed["secure_sum"] == secure_sum and fed["parties"] == NAMES
    assert fed["sums"] >= 11  # at least h count sums + the final counts
    for d in ds[:3]:
        log = (work / f"{d.name}.log").read_text()
        assert any("model=dp epsilon=1 h=10" in line for line in accepted_runs(log))
        assert "390-459" not in log and "Female" not in log  # no record value logged
        rows = [r for r in _ledger(d.config) if r["run_id"] == fed["run_id"]]
        assert any(r["epsilon"] is not None and float(str(r["epsilon"])) == 1.0 for r in rows)


def test_policy_refusals(cohort: tuple[list[Daemon], Path], tmp_path: Path) -> None:
    """A hospital that takes part in no DP run (no max_epsilon), and one that allows h <= 5
    only, refuse the codes run at Prepare, naming the rule; nothing is published."""
    ds, work = cohort
    spec = work / "data" / "cohort.toml"
    out, report = tmp_path / "o.csv", tmp_path / "r.json"
    for d in ds[3:]:
        why = REFUSE[d.name][1]
        cfg = federation_config([*ds[:2], d], work, spec, out, report)
        with pytest.raises(PartyRejected) as err:
            run_federation(cfg, seed=1)
        assert str(err.value) == f"{d.name} refuses: {why}"
        assert not out.exists() and not report.exists()
        log = (work / f"{d.name}.log").read_text()
        assert f"refused by policy: {why}" in log and not accepted_runs(log)


def test_federate_cli_with_codes(tmp_path: Path) -> None:
    """`fedanon federate --seed` on the cohort split over 3 tables == `fedanon anonymize
    --seed` on the cohort, byte for byte; the summary names the federation."""
    csv = write_cohort(tmp_path / "data", 3000, seed=8)
    spec = tmp_path / "data" / "cohort.toml"
    paths = [tmp_path / f"p{i}.csv" for i in range(3)]
    _split(csv, paths)
    cli = [sys.executable, "-m", "fedanon.cli"]
    fed_out, cen_out = tmp_path / "f.csv", tmp_path / "c.csv"
    parties = [f"--party=h{i}={p}" for i, p in enumerate(paths)]
    fed = subprocess.run(
        [*cli, "federate", "--spec", str(spec), *parties, "--seed", "9", "--output", str(fed_out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fed.returncode == 0, fed.stderr
    assert "federated over 3 parties" in fed.stdout and "diagnoses" in fed.stdout
    seed_out = ["--seed", "9", "--output", str(cen_out)]
    cen = subprocess.run(
        [*cli, "anonymize", "--spec", str(spec), "--input", str(csv), *seed_out],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cen.returncode == 0, cen.stderr
    assert fed_out.read_bytes() == cen_out.read_bytes()
