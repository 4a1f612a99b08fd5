"""Benchmark `fedanon anonymize` on Adult and on a blown-up Adult (seed 003, Sec. 6.2).

Run on demand:  .venv/bin/python bench/bench_anonymize.py [--rows 1000000]
Each measurement runs in a fresh subprocess so peak RSS is per run.
Targets (2 cores): Adult <= 0.5 s anonymize; 1M rows <= 3 s anonymize, <= 10 s total, <= 1 GB.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADULT = ROOT / "examples" / "adult"
NUMERIC = {
    "age": (17, 91),
    "fnlwgt": (10000, 1500000),
    "education-num": (1, 17),
    "capital-gain": (0, 100000),
    "capital-loss": (0, 4400),
    "hours-per-week": (1, 100),
}


def blow_up(rows: int, out: Path) -> None:
    """Each record plus a-1 variations: numeric QIDs moved by a small random amount."""
    rng = random.Random(7)  # noqa: S311 - data generation, not crypto
    with gzip.open(ADULT / "adult.csv.gz", "rt", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        base = list(reader)
    idx = {h: i for i, h in enumerate(header)}
    with out.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        written = 0
        while written < rows:
            for r in base:
                if written >= rows:
                    break
                if written >= len(base):
                    r = list(r)
                    for name, (lo, hi) in NUMERIC.items():
                        v = int(r[idx[name]]) + rng.randint(-2, 2)
                        r[idx[name]] = str(min(max(v, lo), hi - 1))
                w.writerow(r)
                written += 1


def measure(spec: Path, data: Path) -> dict[str, float]:
    code = (
        "import json,resource,sys,time\n"
        "from pathlib import Path\n"
        "from common.anonymize import anonymize_file\n"
        "t=time.perf_counter()\n"
        "rep,tm=anonymize_file(Path(sys.argv[1]),Path(sys.argv[2]),Path(sys.argv[3]),None,False)\n"
        "total=time.perf_counter()-t\n"
        "rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024\n"
        "print(json.dumps({'read':tm.read,'anonymize':tm.anonymize,'write':tm.write,"
        "'total':total,'peak_rss_mb':rss,'rounds':len(rep['specializations']),"
        "'groups':rep['groups']}))\n"
    )
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.run(
            [sys.executable, "-c", code, str(spec), str(data), str(Path(d) / "out.csv")],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        spec_c1 = Path(d) / "run-c1.toml"
        text = (ADULT / "run.toml").read_text()
        text = re.sub(r"(?m)^C = .*$", "C = 1.0", text)
        text = text.replace('taxonomy = "taxonomies/', f'taxonomy = "{ADULT}/taxonomies/')
        spec_c1.write_text(text)
        results = {}
        for name in ("run.toml", "run-discernibility.toml"):
            results[f"adult {name} (L=4,K=20,C=0.2)"] = measure(
                ADULT / name, ADULT / "adult.csv.gz"
            )
        big = Path(d) / "big.csv"
        t = time.perf_counter()
        blow_up(args.rows, big)
        print(f"generated {args.rows} rows in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        results[f"blow-up {args.rows} rows (L=4,K=20,C=1)"] = measure(spec_c1, big)
    for k, v in results.items():
        print(
            f"{k}: "
            + ", ".join(
                f"{a}={b:.2f}" if isinstance(b, float) else f"{a}={b}" for a, b in v.items()
            )
        )


if __name__ == "__main__":
    main()
