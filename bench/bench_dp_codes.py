"""Benchmark of DiffGen with diagnosis codes (issue 21): 100,000 synthetic patients
(``fedanon.dp.cohort``), epsilon = 1, h = 10.  Centralized: ``fedanon anonymize`` in a child
process (wall time, peak RSS) and the same run in this process (read + run + write);
federated in process: 3 hospitals over the ring's masks (mod 2^64; no network); federated
over real daemons: 3 ``party serve`` processes on loopback with mTLS, each holding a third of
the cohort, the leader's whole run (connect, Prepare -- every hospital reads its table --,
the rounds over the secure sum, publish, Finish) for the pairwise and the ring secure sum,
each run twice (the second with the hospitals' relational columns cached), and checked to
release the centralized bytes with the same seed.  Targets: <= 10 s and <= 1 GB centralized,
federated <= 2x.  The machine's load average is printed with the numbers.

    .venv/bin/python bench/bench_dp_codes.py [--rows 100000] [--no-daemons]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--no-daemons", action="store_true", help="skip the real daemons")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    from fedanon.dp.cohort import write

    tmp = Path(tempfile.mkdtemp(prefix="bench-dpcodes-"))
    csv = write(tmp, args.rows, seed=1, epsilon=1.0, h=10)
    fedanon = str(Path(sys.executable).parent / "fedanon")
    t0 = time.perf_counter()
    subprocess.run(
        [fedanon, "anonymize", "--spec", str(tmp / "cohort.toml"), "--input", str(csv),
         "--output", str(tmp / "release.csv"), "--quiet"],
        check=True,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"centralized: {args.rows:,} records, {wall:.2f} s wall, peak RSS {rss:.0f} MB")
    from fedanon.apispec import Spec
    from fedanon.dp.setanonymize import anonymize_set_file

    t0 = time.perf_counter()
    anonymize_set_file(Spec.from_toml(tmp / "cohort.toml"), csv, tmp / "central-7.csv", seed=7)
    central = time.perf_counter() - t0
    print(f"centralized in process (read + run + write, seed 7): {central:.2f} s")

    from dp_helpers import RingFederation

    from fedanon.dp.randomness import RandomSource
    from fedanon.dp.setanonymize import read_records, set_schema
    from fedanon.dp.setparty import SetParty
    from fedanon.dp.setrun import SetLeader, new_state
    from fedanon.dp.spec import load_dp_spec

    t0 = time.perf_counter()
    spec, reader = load_dp_spec(tmp / "cohort.toml")
    ss = set_schema(spec, reader)
    rec, _ = read_records(ss, csv)
    t_read = time.perf_counter() - t0
    cuts = [0, rec.n // 3, 2 * rec.n // 3, rec.n]
    parties = [
        SetParty(new_state(spec, ss.schema.new_trees(), ss.stree), rec.take(a, b))
        for a, b in itertools.pairwise(cuts)
    ]
    t1 = time.perf_counter()
    leader = SetLeader(spec, new_state(spec, ss.schema.new_trees(), ss.stree), RandomSource())
    leader.run(RingFederation(parties))
    t_run = time.perf_counter() - t1
    print(
        f"federated in process, 3 hospitals (ring masks): read {t_read:.2f} s, "
        f"run {t_run:.2f} s, {len(leader.selections)} selections"
    )
    if not args.no_daemons:
        daemons_bench(tmp, csv, central)
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


def leader_cli(ds: list, work: Path, tmp: Path, secure_sum: str, central: float) -> None:
    """`fedanon leader run --seed 7` as a process (start, imports, the run, publish), as the
    centralized number is `fedanon anonymize` as a process."""
    certdir = work / "certs"
    out = tmp / f"cli-{secure_sum}.csv"
    ring = "".join(f'[[party]]\nname = "{d.name}"\naddress = "127.0.0.1:{d.port}"\n' for d in ds)
    conf = work / f"federation-{secure_sum}.toml"
    conf.write_text(
        f'[run]\nspec = "{tmp / "cohort.toml"}"\noutput = "{out}"\n'
        f'secure_sum = "{secure_sum}"\n\n[tls]\nca = "{certdir / "ca.pem"}"\n'
        f'cert = "{certdir / "leader.pem"}"\nkey = "{certdir / "leader.key"}"\n\n{ring}'
    )
    fedanon = str(Path(sys.executable).parent / "fedanon")
    t0 = time.perf_counter()
    subprocess.run(
        [fedanon, "leader", "run", "--config", str(conf), "--seed", "7"],
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - t0
    same = out.read_bytes() == (tmp / "central-7.csv").read_bytes()
    print(
        f"`fedanon leader run` ({secure_sum}) as a process over the 3 daemons: {wall:.2f} s wall; "
        f"release == centralized bytes: {same}"
    )


def daemons_bench(tmp: Path, csv: Path, central: float) -> None:
    from fedanon.leader.federate import daemons, federation_config
    from fedanon.leader.run import run_federation
    from fedanon.security.policy import SECURE_SUMS, PartyPolicy

    lines = csv.read_text().splitlines()
    header, rows = lines[0], lines[1:]
    k = -(-len(rows) // 3)
    parties = []
    for i in range(3):
        p = tmp / f"hospital-{i}.csv"
        p.write_text("\n".join([header, *rows[i * k : (i + 1) * k]]) + "\n")
        parties.append((f"hospital-{i}", p))
    policy = PartyPolicy(
        min_K=2,
        min_L=1,
        max_C=1.0,
        release_unchanged=("deceased",),
        max_epsilon=1.0,
        max_total_epsilon=100.0,
        secure_sum=SECURE_SUMS,
    )
    work = tmp / "daemons"
    work.mkdir()
    t0 = time.perf_counter()
    with daemons(parties, work, policy=policy) as ds:
        print(f"3 daemons started in {time.perf_counter() - t0:.2f} s (not counted below)")
        for secure_sum in ("pairwise", "ring"):
            leader_cli(ds, work, tmp, secure_sum, central)
            for attempt in (1, 2):
                out = tmp / f"fed-{secure_sum}-{attempt}.csv"
                cfg = federation_config(
                    ds, work, tmp / "cohort.toml", out, None, secure_sum=secure_sum
                )
                t1 = time.perf_counter()
                rep = run_federation(cfg, seed=7).report
                wall = time.perf_counter() - t1
                same = out.read_bytes() == (tmp / "central-7.csv").read_bytes()
                sec = rep["federation"]["seconds"]
                print(
                    f"federated over 3 daemons, {secure_sum} sum, run {attempt}: "
                    f"{wall:.2f} s wall at the leader ({wall / central:.2f}x the centralized "
                    f"run in process), rounds {sec['rounds']:.2f} s, {rep['federation']['sums']} "
                    f"sums, {rep['federation']['bytes_total']['sent']:,} bytes sent; "
                    f"release == centralized bytes: {same}"
                )
                steps = {k: v for k, v in sec.items() if k not in ("total", "union")}
                print("    seconds at the leader:", json.dumps(steps))


if __name__ == "__main__":
    raise SystemExit(main())
