"""Benchmark: `fedanon federate` (n real daemons, mTLS over loopback) vs `fedanon anonymize`.

    .venv/bin/python bench/bench_federate.py [--spec examples/adult/run.toml] [--parties 3]

Splits the input round-robin into n tables, times both commands end to end (process start,
daemon start-up and certificate issuing included), and prints bytes per step and in total and
the leader's time split (network = RPC wall time incl. remote work; crypto = leader's masks
and last mix layer; compute = the rest at the leader).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "common.cli", *args], check=True, cwd=ROOT)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", type=Path, default=ROOT / "examples/adult/run.toml")
    ap.add_argument("--input", type=Path, default=ROOT / "examples/adult/adult.csv.gz")
    ap.add_argument("--parties", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fedanon-bench-") as tmp:
        work = Path(tmp)
        opener = gzip.open if args.input.suffix == ".gz" else open
        with opener(args.input, "rt", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        header, rows = lines[0], lines[1:]
        plain = work / "all.csv"
        plain.write_text("\n".join(lines) + "\n")
        party_args = []
        for i in range(args.parties):
            part = work / f"p{i}.csv"
            part.write_text("\n".join([header, *rows[i :: args.parties]]) + "\n")
            party_args += ["--party", f"h{i}={part}"]
        t_central = _run(
            ["anonymize", "--spec", str(args.spec), "--input", str(plain), "--quiet",
             "--output", str(work / "central.csv"), "--report", str(work / "central.json")]
        )  # fmt: skip
        t_fed = _run(
            ["federate", "--spec", str(args.spec), *party_args, "--quiet",
             "--output", str(work / "fed.csv"), "--report", str(work / "fed.json")]
        )  # fmt: skip
        rep = json.loads((work / "fed.json").read_text())["federation"]
    sec = rep["seconds"]
    print(
        f"input {args.input.name}: {len(rows)} rows, spec {args.spec.name}, {args.parties} parties"
    )
    print(f"fedanon anonymize wall {t_central:8.2f} s")
    print(f"fedanon federate  wall {t_fed:8.2f} s  ({t_fed / t_central:.1f}x)")
    print(
        f"  leader: total {sec['total']:.2f} s = rounds {sec['rounds']:.2f} s + union "
        f"{sec['union']:.2f} s (+ prepare/write); network {sec['network']:.2f} s, crypto "
        f"{sec['crypto_leader']:.2f} s, compute {sec['compute_leader']:.2f} s"
    )
    tot = rep["bytes_total"]
    print(f"  bytes total: sent {tot['sent']:,}  received {tot['received']:,}")
    for step, b in rep["bytes_by_step"].items():
        print(f"    {step:>10}: sent {b['sent']:>12,}  received {b['received']:>12,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
