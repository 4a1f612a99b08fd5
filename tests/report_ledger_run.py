"""A federated LKC run of Adult with real party daemons (separate processes, mTLS) and their
privacy ledgers kept: for ``fedanon report --party-config ... --ledger``.  The daemons are
yielded still running, so a report read while they run is read while they could write."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fedanon.leader.federate import daemons, federation_config
from fedanon.leader.run import run_federation
from fedanon.security.policy import PartyPolicy

NAMES = ("north", "south", "east")
ROWS = 6000
POLICY = PartyPolicy(
    min_K=20,
    min_L=4,
    max_C=0.2,
    release_unchanged=("marital-status", "salary-class"),
    sensitive_column="marital-status",
    sensitive_values=("Divorced", "Separated"),
    max_releases=5,
    max_runs_per_day=20,
    max_refusals_per_hour=10,
)


@contextmanager
def ledgered_run(adult_dir: Path, tmp: Path) -> Iterator[dict[str, Path]]:
    """Run once; yields the spec, released table, run report, each hospital's party.toml
    (``north.toml``...) and ledger (``north.ledger``...), daemons still running."""
    lines = gzip.decompress((adult_dir / "adult.csv.gz").read_bytes()).decode().splitlines()
    parties = []
    for i, name in enumerate(NAMES):
        path = tmp / f"{name}.csv"
        path.write_text("\n".join([lines[0], *lines[1 + i : ROWS + 1 : 3]]) + "\n")
        parties.append((name, path))
    work = tmp / "work"
    work.mkdir()
    spec = adult_dir / "run.toml"
    out = {"spec": spec, "released.csv": tmp / "released.csv", "report.json": tmp / "report.json"}
    with daemons(parties, work, policy=POLICY) as ds:
        cfg = federation_config(ds, work, spec, out["released.csv"], out["report.json"])
        run_federation(cfg)
        for name in NAMES:
            out[f"{name}.toml"] = work / f"{name}.toml"
            out[f"{name}.ledger"] = work / f"{name}.ledger.sqlite"
        yield out
