"""Real party daemon processes with real mTLS, shared by the integration tests."""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fedanon.apispec import Spec
from fedanon.centralized import anonymize_file
from fedanon.leader.federate import Daemon, daemons, federation_config, stop
from fedanon.leader.localdaemons import party_toml
from fedanon.leader.run import run_federation
from fedanon.security import certs
from fedanon.security.policy import PartyPolicy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POOL_SIZE = 5
ADULT_NUMERIC = (
    "age",
    "fnlwgt",
    "education-num",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
)
# The pool serves the specs of several tests: Table 1 (K = 2), Adult, random tables.
TEST_POLICY = PartyPolicy(
    min_K=2,
    min_L=1,
    max_C=1.0,
    release_unchanged=(
        "Transfuse",
        "Surgery",
        "marital-status",
        "salary-class",
        "s",
        "y",
        *ADULT_NUMERIC,  # released raw by the full-table union tests
    ),
    secure_sum=("pairwise", "ring"),  # the tests run both (the ring only when listed)
)


# The one log line of an accepted run (fedanon.party.prepare.accepted_line): "run <id> accepted:"
ACCEPTED_RUN = re.compile(r"\brun [0-9a-f]{8} accepted: ")


def accepted_runs(log: str) -> list[str]:
    """The daemon log's accepted-run lines (not any line that merely says "accepted")."""
    return [ln for ln in log.splitlines() if ACCEPTED_RUN.search(ln)]


def hospital_h(
    tmp_path: Path, party_lines: str, policy: PartyPolicy = TEST_POLICY, mpc_port: int = 0
) -> tuple[Path, Path]:
    """One hospital ``h`` on Table I: a federation CA with certificates ``leader`` and ``h``
    and h's party.toml with ``party_lines`` added to its ``[party]`` table; (CA folder,
    party.toml)."""
    pki = tmp_path / "certs"
    certs.init_ca(pki)
    certs.issue(pki, "leader", "leader")
    certs.issue(pki, "h", "party")
    data = tmp_path / "table1.csv"
    data.write_text((EXAMPLES / "table1" / "table1.csv").read_text())
    listen = 'listen = "127.0.0.1:0"\n'
    text = party_toml("h", data, pki, None, policy, mpc_port).replace(
        listen, listen + party_lines, 1
    )
    cfg = tmp_path / "h.toml"
    cfg.write_text(text)
    return pki, cfg


def serve_party(cfg: Path, port_file: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """``fedanon party serve --config cfg`` in a fresh process, its output to ``log``; (the
    process, its port) once it listens (30 s at most)."""
    with log.open("wb") as out:
        cmd = [sys.executable, "-m", "fedanon.cli", "party", "serve", "--config", str(cfg)]
        proc = subprocess.Popen(
            [*cmd, "--port-file", str(port_file)], stdout=out, stderr=subprocess.STDOUT
        )
    end = time.monotonic() + 30
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            proc.wait(10)
            pytest.fail(f"the daemon did not start: {log.read_text()[-3000:]}")
        time.sleep(0.02)
    return proc, int(port_file.read_text())


def fedanon_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``fedanon ARGS`` in a fresh process (its exit code, stdout and stderr as text)."""
    return subprocess.run(
        [sys.executable, "-m", "fedanon.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def read_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.reader(fh) if r]
    return rows[0], rows[1:]


def write_rows(path: Path, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def random_split(
    rows: Sequence[Sequence[str]], n: int, rng: random.Random
) -> list[list[Sequence[str]]]:
    """n non-empty parts of random sizes."""
    idx = list(range(len(rows)))
    rng.shuffle(idx)
    cuts = sorted(rng.sample(range(1, len(rows)), n - 1))
    bounds = [0, *cuts, len(rows)]
    return [[rows[i] for i in idx[a:b]] for a, b in itertools.pairwise(bounds)]


def multiset(path: Path) -> Counter[tuple[tuple[str, str], ...]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return Counter(tuple(sorted(r.items())) for r in csv.DictReader(fh))


class Pool:
    """POOL_SIZE long-running daemons; each reads its data file at Prepare, so a test
    rewrites the files and runs the leader over the first n of them."""

    def __init__(self, ds: list[Daemon], workdir: Path) -> None:
        self.daemons = ds
        self.workdir = workdir

    def data(self, i: int) -> Path:
        return self.workdir / f"p{i}.csv"

    def compare(
        self,
        spec: Path,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        n: int,
        seed: int,
        tmp: Path,
        union: str = "auto",
        parts: Sequence[Sequence[Sequence[str]]] | None = None,
        secure_sum: str = "pairwise",
    ) -> dict[str, Any]:
        """Federated run over a random n-way split (or ``parts``) == centralized run over
        the union; ``union`` as in federation.toml."""
        rng = random.Random(seed)
        split = random_split(rows, n, rng) if parts is None else parts
        for i, part in enumerate(split):
            write_rows(self.data(i), header, part)
        union_csv = tmp / "union.csv"
        write_rows(union_csv, header, rows)
        cfg = federation_config(
            self.daemons[:n],
            self.workdir,
            spec,
            tmp / "fed.csv",
            tmp / "fed.json",
            union=union,
            secure_sum=secure_sum,
        )
        out = run_federation(cfg)
        central, _ = anonymize_file(
            Spec.from_toml(spec), union_csv, tmp / "central.csv", None, False
        )
        assert multiset(tmp / "fed.csv") == multiset(tmp / "central.csv")
        assert out.report["specializations"] == central["specializations"]
        assert out.report["cut"] == central["cut"]
        assert out.records == len(rows)
        return out.report


@pytest.fixture(scope="session")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    work = tmp_path_factory.mktemp("pool")
    names = [f"h{i}" for i in range(POOL_SIZE)]
    for i in range(POOL_SIZE):
        (work / f"p{i}.csv").write_text("placeholder\n")
    parties = [(n, work / f"p{i}.csv") for i, n in enumerate(names)]
    with daemons(parties, work, policy=TEST_POLICY) as ds:
        yield Pool(ds, work)


def random_table(
    rng: random.Random, n_rows: int, tmp: Path
) -> tuple[Path, list[str], list[list[str]]]:
    """A random table with a categorical QID (3-level taxonomy), a numeric QID grown at run
    time, a second categorical QID, a sensitive and a class column; and its spec."""
    fan = [rng.randint(2, 3) for _ in range(3)]
    tax = ["ANY"]
    leaves: list[str] = []
    for g in range(fan[0]):
        tax.append(f"  G{g}")
        for s in range(fan[1]):
            tax.append(f"    G{g}S{s}")
            for leaf in range(fan[2]):
                tax.append(f"      v{g}{s}{leaf}")
                leaves.append(f"v{g}{s}{leaf}")
    (tmp / "a.txt").write_text("\n".join(tax) + "\n")
    (tmp / "c.txt").write_text("ANY\n  left\n    x\n    y\n  right\n    z\n    w\n")
    header = ["id", "a", "b", "c", "s", "y"]
    rows = []
    for i in range(n_rows):
        a = rng.choice(leaves[: rng.randint(2, len(leaves))])
        b = str(rng.randint(0, 99))
        c = rng.choice("xyzw")
        s = rng.choice(["flu", "flu", "flu", "cold", "cold", "hiv"])
        y = "yes" if (int(b) > 50) ^ (rng.random() < 0.2) else "no"
        rows.append([str(i), a, b, c, s, y])
    L = rng.choice([1, 2, 3])
    K = rng.choice([3, 5, 10])
    C = rng.choice([0.5, 0.8, 1.0])
    score = rng.choice(["infogain", "discernibility"])
    spec = io.StringIO()
    spec.write(
        f'[privacy]\nL = {L}\nK = {K}\nC = {C}\nsensitive_values = ["hiv"]\n\n'
        f'[utility]\nscore = "{score}"\n\n'
        '[[attribute]]\nname = "id"\nrole = "identifier"\n\n'
        '[[attribute]]\nname = "a"\nrole = "qid"\ntype = "categorical"\ntaxonomy = "a.txt"\n\n'
        '[[attribute]]\nname = "b"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\nstep = 1\n\n'
        '[[attribute]]\nname = "c"\nrole = "qid"\ntype = "categorical"\ntaxonomy = "c.txt"\n\n'
        '[[attribute]]\nname = "s"\nrole = "sensitive"\n\n'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["no", "yes"]\n'
    )
    path = tmp / "run.toml"
    path.write_text(spec.getvalue())
    return path, header, rows


def table1_spec(tmp: Path) -> Path:
    """A copy of examples/table1 (its spec declares the class labels the federation needs)."""
    src = EXAMPLES / "table1"
    for f in src.iterdir():
        if f.suffix in (".txt", ".toml"):
            (tmp / f.name).write_text(f.read_text())
    assert 'values = ["N", "Y"]' in (tmp / "run.toml").read_text()
    return tmp / "run.toml"


@contextmanager
def policy_daemons(
    parties: Sequence[tuple[str, Path]], work: Path, policies: Mapping[str, PartyPolicy]
) -> Iterator[list[Daemon]]:
    """Like fedanon.leader.federate.daemons, but every hospital with its own [policy]."""
    certdir = work / "certs"
    certs.init_ca(certdir)
    certs.issue(certdir, "leader", "leader")
    started: list[Daemon] = []
    try:
        for name, data in parties:
            certs.issue(certdir, name, "party")
            cfg = work / f"{name}.toml"
            cfg.write_text(party_toml(name, data, certdir, None, policies[name]))
            port_file = work / f"{name}.port"
            with (work / f"{name}.log").open("wb") as log:
                cmd = [sys.executable, "-m", "fedanon.party", "serve", "--config", str(cfg)]
                cmd += ["--port-file", str(port_file)]
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            started.append(Daemon(name, proc, port_file, cfg))
        end = time.monotonic() + 30
        for d in started:
            while not d.port_file.exists():
                assert d.proc.poll() is None, (work / f"{d.name}.log").read_text()
                assert time.monotonic() < end, f"{d.name} did not start"
                time.sleep(0.02)
            d.port = int(d.port_file.read_text())
        yield started
    finally:
        stop(started)
