"""Federated DiffGen over real party daemons (separate processes, mTLS): with the same --seed
the federation releases exactly what `fedanon dp-anonymize` releases on the union of the
tables (same selections and split points in the report, the same noisy table, byte for
byte), for 3 and 5 hospitals; a hospital whose policy has no max_epsilon, or a smaller one,
refuses the run at Prepare (exit 2 naming it and the policy line, no statistics sent)."""

from __future__ import annotations

import gzip
import itertools
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import EXAMPLES, accepted_runs, policy_daemons
from dp_helpers import read_release

from fedanon.apispec import Spec
from fedanon.dp.anonymize import anonymize_dp_file
from fedanon.dp.randomness import NOT_PRIVATE
from fedanon.leader.federate import Daemon, federation_config
from fedanon.leader.run import run_federation
from fedanon.security.policy import PartyPolicy

pytestmark = pytest.mark.slow

ADULT = EXAMPLES / "adult"
ROWS = 9000  # a slice of Adult keeps the test quick; the whole file runs in the CLI test
CLS = "salary-class"
DP_POLICY = PartyPolicy(
    min_K=2,
    min_L=1,
    max_C=1.0,
    release_unchanged=(CLS,),
    max_epsilon=1.0,
    max_total_epsilon=1000.0,  # a pool of many test runs over the same tables
)
POOL = [f"hospital-{c}" for c in "abcde"]


def _adult(rows: int | None = ROWS) -> tuple[str, list[str]]:
    with gzip.open(ADULT / "adult.csv.gz", "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    return lines[0], lines[1 : None if rows is None else rows + 1]


def _spec(tmp: Path, epsilon: str, score: str, h: int = 10) -> Path:
    text = (ADULT / "dp.toml").read_text()
    text = text.replace("epsilon = 1.0", f"epsilon = {epsilon}")
    text = text.replace('score = "max"', f'score = "{score}"')
    text = text.replace("specializations = 10", f"specializations = {h}")
    if not (tmp / "taxonomies").exists():
        (tmp / "taxonomies").symlink_to(ADULT / "taxonomies")
    path = tmp / f"dp-{epsilon}-{score}.toml"
    path.write_text(text)
    return path


def _deal(header: str, rows: list[str], paths: list[Path], tmp: Path) -> Path:
    """Rows dealt round-robin to the parties; the union (in the parties' order) for the
    centralized run."""
    parts = [rows[i :: len(paths)] for i in range(len(paths))]
    for p, part in zip(paths, parts, strict=True):
        p.write_text("\n".join([header, *part]) + "\n")
    union = tmp / "union.csv"
    union.write_text("\n".join([header, *itertools.chain(*parts)]) + "\n")
    return union


@pytest.fixture(scope="module")
def dp_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[Daemon], Path]]:
    """Five hospitals that take part in DP runs up to epsilon = 1."""
    work = tmp_path_factory.mktemp("dp-pool")
    parties = [(n, work / f"{n}.csv") for n in POOL]
    for _, p in parties:
        p.write_text("placeholder\n")
    with policy_daemons(parties, work, dict.fromkeys(POOL, DP_POLICY)) as ds:
        yield ds, work


def _check_release(path: Path, rep: dict[str, object], seed: int) -> None:
    """Independently of fedanon's trees: one row per group of the cut's cross product and
    class value, empty groups included, non-negative integer counts; the NOT PRIVATE mark."""
    header, rows, comments = read_release(path)
    assert comments == [f"# {NOT_PRIVATE} {seed}: for tests and experiments only"]
    cut = rep["cut"]
    assert isinstance(cut, dict)
    preds = header[:-2]
    assert header[-2:] == [CLS, "count"] and set(preds) == set(cut)
    classes = ["<=50K", ">50K"]
    want = {(*g, c) for g in itertools.product(*(cut[p] for p in preds)) for c in classes}
    got = [tuple(r[:-1]) for r in rows]
    assert len(got) == len(set(got)) and set(got) == want
    assert all(int(r[-1]) >= 0 for r in rows)


@pytest.mark.parametrize(("n", "score", "epsilon"), [(3, "max", "1.0"), (5, "infogain", "0.5")])
def test_federated_equals_centralized(
    dp_pool: tuple[list[Daemon], Path], tmp_path: Path, n: int, score: str, epsilon: str
) -> None:
    ds, work = dp_pool
    seed = 100 + n
    spec = _spec(tmp_path, epsilon, score)
    header, rows = _adult()
    union = _deal(header, rows, [work / f"{d.name}.csv" for d in ds[:n]], tmp_path)
    fed_csv, fed_json = tmp_path / "fed.csv", tmp_path / "fed.json"
    cfg = federation_config(ds[:n], work, spec, fed_csv, fed_json)
    out = run_federation(cfg, seed=seed)
    central = anonymize_dp_file(
        Spec.from_toml(spec), union, tmp_path / "central.csv", None, seed=seed
    )
    rep = json.loads(fed_json.read_text())
    assert rep == json.loads(json.dumps(out.report))  # the report on disk is the one returned
    assert len(rep["selections"]) == 10
    for key in ("selections", "split_points", "cut", "budget", "parameters"):
        assert rep[key] == central[key], key
    assert fed_csv.read_bytes() == (tmp_path / "central.csv").read_bytes()
    assert rep["private"] is False and rep["warning"] == f"{NOT_PRIVATE} {seed}"
    fed = rep["federation"]
    assert fed["parties"] == POOL[:n] and fed["sums"] >= 11  # h rounds + the final counts
    assert fed["union"].startswith("none")
    _check_release(fed_csv, rep, seed)
    # the budget adds up to epsilon (read from the report)
    b = rep["budget"]
    assert Fraction(b["allocated_total"]["exact"]) == Fraction(epsilon)
    assert Fraction(b["spent_total"]["exact"]) + Fraction(b["unspent"]["exact"]) == Fraction(
        epsilon
    )
    # every hospital accepted a DP run and logged its parameters, never a record value
    for d in ds[:n]:
        log = (work / f"{d.name}.log").read_text()
        assert f"model=dp epsilon={float(epsilon):g} h=10 score={score}" in log
        assert "United-States" not in log and "Bachelors" not in log


def _conf(ds: list[Daemon], work: Path, spec: Path, out: Path, report: Path) -> Path:
    certdir = work / "certs"
    ring = "".join(f'[[party]]\nname = "{d.name}"\naddress = "127.0.0.1:{d.port}"\n' for d in ds)
    conf = work / "federation.toml"
    conf.write_text(
        f'[run]\nspec = "{spec}"\noutput = "{out}"\nreport = "{report}"\n'
        f'deadline_seconds = 120\n\n[tls]\nca = "{certdir / "ca.pem"}"\n'
        f'cert = "{certdir / "leader.pem"}"\nkey = "{certdir / "leader.key"}"\n\n{ring}'
    )
    return conf


def _leader_run(conf: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "fedanon.cli", "leader", "run", "--config", str(conf), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _stats_sent(log: str) -> list[int]:
    return [int(m) for m in re.findall(r"run \w+ \w+: (\d+) bytes of statistics sent", log)]


def test_hospitals_without_or_below_max_epsilon_refuse(tmp_path: Path) -> None:
    names = ["hospital-a", "hospital-b", "hospital-c", "hospital-d"]
    policies = {
        "hospital-a": DP_POLICY,
        "hospital-b": PartyPolicy(2, 1, 1.0, release_unchanged=(CLS,)),  # did not opt in
        "hospital-c": DP_POLICY,
        "hospital-d": PartyPolicy(
            2, 1, 1.0, release_unchanged=(CLS,), max_epsilon=0.5, max_total_epsilon=1000.0
        ),
    }
    work = tmp_path / "w"
    work.mkdir()
    header, rows = _adult(3000)
    paths = [tmp_path / f"{n}.csv" for n in names]
    _deal(header, rows, paths, tmp_path)
    out, report = tmp_path / "released.csv", tmp_path / "report.json"
    with policy_daemons(list(zip(names, paths, strict=True)), work, policies) as ds:
        by = {d.name: d for d in ds}
        # 1. hospital-b has no max_epsilon: it takes part in no DP run, whatever epsilon
        ring = [by["hospital-a"], by["hospital-b"], by["hospital-c"]]
        proc = _leader_run(_conf(ring, work, _spec(tmp_path, "0.1", "max"), out, report))
        assert proc.returncode == 2, proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last == (
            "fedanon: error: hospital-b refuses: model = 'dp' (epsilon = 0.1) but this policy "
            "has no max_epsilon: this hospital takes part in no differentially private run"
        ), last
        assert not out.exists() and not report.exists()
        log_b = (work / "hospital-b.log").read_text()
        assert "refused by policy: model = 'dp'" in log_b and not accepted_runs(log_b)
        for other in ("hospital-a", "hospital-c"):  # they accepted (the leader then aborted)
            assert accepted_runs((work / f"{other}.log").read_text()), other

        # 2. epsilon = 0.75 > hospital-d's max_epsilon = 0.5 (with --seed: still refused)
        ring = [by["hospital-a"], by["hospital-c"], by["hospital-d"]]
        spec = _spec(tmp_path, "0.75", "max")
        proc = _leader_run(_conf(ring, work, spec, out, report), "--seed", "3")
        assert proc.returncode == 2, proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last == "fedanon: error: hospital-d refuses: epsilon = 0.75 > max_epsilon = 0.5"
        assert not out.exists() and not report.exists()
        assert (
            "refused by policy: epsilon = 0.75 > max_epsilon = 0.5"
            in (work / "hospital-d.log").read_text()
        )
        for name in names:  # no statistics left any daemon in either refused run
            log = (work / f"{name}.log").read_text()
            assert "/fedanon.v1.Party/Relay" not in log, name
            assert all(x == 0 for x in _stats_sent(log)), name

        # control: epsilon = 0.5 on the same ring runs, through `fedanon leader run --seed`
        proc = _leader_run(
            _conf(ring, work, _spec(tmp_path, "0.5", "max"), out, report), "--seed", "3"
        )
        assert proc.returncode == 0, proc.stderr
        assert "NOT PRIVATE: fixed seed 3" in proc.stdout
        assert "no record union" in proc.stdout
        _check_release(out, json.loads(report.read_text()), 3)


def test_federate_cli_matches_dp_anonymize(tmp_path: Path) -> None:
    """`fedanon federate --seed` on the whole of Adult == `fedanon dp-anonymize --seed`."""
    header, rows = _adult(None)
    paths = [tmp_path / f"p{i}.csv" for i in range(3)]
    union = _deal(header, rows, paths, tmp_path)
    spec = ADULT / "dp.toml"
    cli = [sys.executable, "-m", "fedanon.cli"]
    parties = [f"--party=h{i}={p}" for i, p in enumerate(paths)]

    def out(name: str) -> list[str]:
        return [
            "--output",
            str(tmp_path / f"{name}.csv"),
            "--report",
            str(tmp_path / f"{name}.json"),
        ]

    fed = subprocess.run(
        [*cli, "federate", "--spec", str(spec), *parties, "--seed", "9", *out("f")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fed.returncode == 0, fed.stderr
    cen = subprocess.run(
        [
            *cli,
            "dp-anonymize",
            "--spec",
            str(spec),
            "--input",
            str(union),
            "--seed",
            "9",
            *out("c"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cen.returncode == 0, cen.stderr
    assert (tmp_path / "f.csv").read_bytes() == (tmp_path / "c.csv").read_bytes()
    f, c = (json.loads((tmp_path / n).read_text()) for n in ("f.json", "c.json"))
    assert f["selections"] == c["selections"] and f["split_points"] == c["split_points"]
    # --seed with an LKC spec, and a record union with a DP spec, are usage errors
    lkc = subprocess.run(
        [*cli, "federate", "--spec", str(ADULT / "run.toml"), *parties, "--seed", "1", *out("x")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert lkc.returncode == 2
    assert "--seed applies only to a differential-privacy spec" in lkc.stderr
    union_opt = subprocess.run(
        [*cli, "federate", "--spec", str(spec), *parties, "--union", "sketch", *out("y")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert union_opt.returncode == 2 and "there is no record union" in union_opt.stderr
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "y.csv").exists()
