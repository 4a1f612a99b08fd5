"""Benchmark of DiffGen with diagnosis codes (issue 21): 100,000 synthetic patients
(``fedanon.dp.cohort``), epsilon = 1, h = 10.  Centralized: ``fedanon anonymize`` in a child
process (wall time, peak RSS); federated: 3 hospitals in process over the ring secure sum
(masks mod 2^64; no network), wall time of the run.  Targets: <= 10 s and <= 1 GB
centralized, federated <= 2x.

    .venv/bin/python bench/bench_dp_codes.py [--rows 100000]
"""

from __future__ import annotations

import argparse
import itertools
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
    args = ap.parse_args()
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
