"""Distributed == centralized: real daemons, real mTLS, random 3-5 way splits."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    EXAMPLES,
    Pool,
    multiset,
    random_table,
    read_rows,
    table1_spec,
    write_rows,
)

pytestmark = pytest.mark.slow


def adult_subset(n: int, seed: int) -> tuple[list[str], list[list[str]]]:
    header, rows = read_rows(EXAMPLES / "adult" / "adult.csv.gz")
    return header, random.Random(seed).sample(rows, n)


@pytest.mark.parametrize("secure_sum", ["pairwise", "ring"])
def test_table1(pool: Pool, tmp_path: Path, secure_sum: str) -> None:
    spec = table1_spec(tmp_path)
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    rep = pool.compare(spec, header, rows, 3, seed=1, tmp=tmp_path, secure_sum=secure_sum)
    assert rep["federation"]["secure_sum"] == secure_sum
    assert rep["federation"]["rounds"] >= 1
    # Surgery has no declared values: the records are integrated by the sketch union
    union = rep["federation"]["union"]
    assert union["method"] == "sketch" and union["sums"] == 2, union
    assert union["bytes"]["received"] >= union["vector_bytes"] > 0
    assert rep["federation"]["bytes_by_step"]["union"] == union["bytes"]


@pytest.mark.parametrize(
    ("spec_name", "n_rows", "n_parties", "seed"),
    [
        ("run.toml", 4000, 4, 11),  # L=4 K=20 C=0.2, infogain, numeric + categorical QIDs
        ("run-discernibility.toml", 3000, 5, 12),  # discernibility score
        ("run-kanon.toml", 4000, 3, 13),  # K-anonymity special case, categorical only
    ],
)
@pytest.mark.parametrize("secure_sum", ["pairwise", "ring"])
def test_adult(
    pool: Pool,
    tmp_path: Path,
    spec_name: str,
    n_rows: int,
    n_parties: int,
    seed: int,
    secure_sum: str,
) -> None:
    header, rows = adult_subset(n_rows, seed)
    rep = pool.compare(
        EXAMPLES / "adult" / spec_name,
        header,
        rows,
        n_parties,
        seed,
        tmp_path,
        secure_sum=secure_sum,
    )
    fed = rep["federation"]
    # every released column has declared values: integrated by the counts union
    assert fed["union"]["method"] == "counts" and fed["union"]["sums"] == 1
    assert fed["bytes_total"]["sent"] > 0 and "union" in fed["bytes_by_step"]


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_random_tables(pool: Pool, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    spec, header, rows = random_table(rng, rng.randint(300, 800), tmp_path)
    pool.compare(spec, header, rows, rng.randint(3, 5), seed, tmp_path)


def test_federate_cli(tmp_path: Path) -> None:
    """`fedanon federate` end to end (own certificates, own daemons), duplicates survive."""
    spec = table1_spec(tmp_path)
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    parts = [rows[i::3] for i in range(3)]
    parts[2] = parts[2] + parts[0][:2]  # the same records at two hospitals
    args = []
    for i, part in enumerate(parts):
        write_rows(tmp_path / f"t{i}.csv", header, part)
        args += ["--party", f"p{i}={tmp_path / f't{i}.csv'}"]
    out = tmp_path / "out.csv"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedanon.cli",
            "federate",
            "--spec",
            str(spec),
            *args,
            "--output",
            str(out),
            "--report",
            str(tmp_path / "rep.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert sum(multiset(out).values()) == len(rows) + 2
    union = tmp_path / "union.csv"
    write_rows(union, header, [r for p in parts for r in p])
    subprocess.run(
        [
            sys.executable,
            "-m",
            "fedanon.cli",
            "anonymize",
            "--spec",
            str(spec),
            "--input",
            str(union),
            "--output",
            str(tmp_path / "c.csv"),
            "--quiet",
        ],
        check=True,
        timeout=60,
    )
    assert multiset(out) == multiset(tmp_path / "c.csv")


def test_leader_run_cli(pool: Pool, tmp_path: Path) -> None:
    """`fedanon leader run --config federation.toml` against long-running daemons."""
    spec = table1_spec(tmp_path)
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    for i in range(3):
        write_rows(pool.data(i), header, rows[i::3])
    certs = pool.workdir / "certs"
    ring = "".join(
        f'[[party]]\nname = "{d.name}"\naddress = "127.0.0.1:{d.port}"\n\n'
        for d in pool.daemons[:3]
    )
    conf = tmp_path / "federation.toml"
    conf.write_text(
        f'[run]\nspec = "{spec}"\noutput = "out.csv"\nreport = "rep.json"\n'
        f'deadline_seconds = 120\n\n[leader]\nname = "leader"\n\n'
        f'[tls]\nca = "{certs / "ca.pem"}"\ncert = "{certs / "leader.pem"}"\n'
        f'key = "{certs / "leader.key"}"\n\n{ring}'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "fedanon.cli", "leader", "run", "--config", str(conf)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "released 11 records" in proc.stdout
    assert sum(multiset(tmp_path / "out.csv").values()) == len(rows)
    assert (tmp_path / "rep.json").exists()
