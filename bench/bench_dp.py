"""Benchmark `fedanon dp-anonymize` (DiffGen) on Adult and on a blown-up Adult.

Run on demand:  .venv/bin/python bench/bench_dp.py [--rows 1000000] [--h 10 15]
Targets (2 cores): Adult <= 1 s anonymize (h = 10); 1M rows <= 5 s anonymize.
"anonymize" is the round loop, the final counts and the noise (reading the CSV and writing
the release are reported separately).  Runs use a fixed seed (the timing does not depend on
it; the releases are NOT PRIVATE).  The number of groups (product of the cut sizes) grows
quickly with h on Adult's ARX taxonomies, and the noise is drawn for every group x class.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_anonymize import blow_up  # noqa: E402

from fedanon.dp.randomness import RandomSource  # noqa: E402
from fedanon.dp.release import write_release  # noqa: E402
from fedanon.dp.run import anonymize_tables  # noqa: E402
from fedanon.dp.spec import load_dp_spec  # noqa: E402
from fedanon.io.table import build_schema, encode_table  # noqa: E402

SPEC = ROOT / "examples" / "adult" / "dp.toml"
ADULT = ROOT / "examples" / "adult" / "adult.csv.gz"


def bench(data: Path, label: str, hs: list[int], scores: list[str]) -> None:
    spec, reader = load_dp_spec(SPEC)
    schema = build_schema(spec.run, reader)
    t0 = time.perf_counter()
    table = encode_table(schema, data)
    read = time.perf_counter() - t0
    for score in scores:
        for h in hs:
            s = replace(spec, params=replace(spec.params, score=score, specializations=h))
            best = float("inf")
            for _ in range(3):  # same seed: same cut and groups, only the time varies
                r = anonymize_tables(s, schema, [table], RandomSource(0))
                best = min(best, r.seconds)
            with tempfile.TemporaryDirectory() as tmp:
                t1 = time.perf_counter()
                write_release(Path(tmp) / "out.csv", r, table.columns)
                write = time.perf_counter() - t1
            print(
                f"{label:>12} {table.n_rows:>9} rows  score={score:<8} h={h:<3} "
                f"groups={r.counts.counts.shape[0]:>8}  read {read:5.2f}s  "
                f"anonymize {best:5.2f}s (best of 3)  write {write:5.2f}s",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--h", type=int, nargs="+", default=[10, 15])
    ap.add_argument("--scores", nargs="+", default=["max", "infogain"])
    args = ap.parse_args()
    bench(ADULT, "adult", args.h, args.scores)
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.csv"
        blow_up(args.rows, big)
        bench(big, "blown-up", args.h, args.scores)


if __name__ == "__main__":
    main()
