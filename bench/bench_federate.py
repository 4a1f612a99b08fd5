"""Benchmark: `fedanon federate` (n real daemons, mTLS over loopback) vs `fedanon anonymize`.

    .venv/bin/python bench/bench_federate.py                 # the issue-9 workloads
    .venv/bin/python bench/bench_federate.py --only adult-kanon-full --repeat 3
    .venv/bin/python bench/bench_federate.py --spec S --input I --parties 5   # one ad hoc run

Splits each input round-robin into n tables and times both commands end to end (process
start, certificate issuing and daemon start-up included).  Per workload it prints the wall
times and their ratio, the leader's own time and the daemons' start-up apart, which union
ran with its seconds and bytes at the leader (sent + received) against the released CSV's
bytes, and checks the targets of issue 9:

* adult-kanon-full: Adult, full table released (7 categorical QIDs, K = 20, L = 7, C = 1),
  3 hospitals: federate <= 1.5 s;
* adult-free: examples/adult/run.toml, all columns released, no declared values:
  federate <= 2x anonymize;
* blowup-1m: the 1M-row blow-up (Sec. 6.2, run.toml with C = 1), full table released, no
  declared values: federate <= 1.5x anonymize;
* blowup-1m-distinct (issue 19): the same 1M rows (every numeric column jittered after the
  first copy, so the released records are nearly all distinct: about 99.6 %) with the
  adult-kanon-full spec -- the seven categorical QIDs generalized, the six numeric columns,
  marital-status and salary-class released raw, every column released: federate <= 1.5x
  anonymize and union bytes at the leader <= 3x the released CSV;
* every other sketch union: bytes at the leader <= 6x the released CSV.

The CPU time of each command (the command and every process it reaped: for `federate`, the
leader and its forked daemons) is printed too, with the floor it sets on these cores: CPU / cores.
The machine's load average is printed with the results (2 cores: a load above 1 slows
everything).  ``--repeat`` keeps the fastest run of each command.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT / "examples" / "adult"
SPECS = ROOT / "bench" / "specs"
sys.path.insert(0, str(ROOT / "bench"))

from bytecode import compile_checkout  # noqa: E402


@dataclass(frozen=True)
class Workload:
    name: str
    spec: Path
    input: Path
    parties: int = 3
    max_seconds: float | None = None  # federate wall target
    max_ratio: float | None = None  # federate / anonymize target
    max_union_per_csv: float = 6.0  # sketch union: bytes at the leader / released CSV


def _run_cpu(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and every process it reaped: for
    `federate`, the leader and its forked daemons, all on this machine's cores)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fedanon.cli", *args], check=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu


def split(src: Path, n: int, work: Path) -> tuple[Path, list[str], int]:
    """The input as one plain CSV and n round-robin parts (``--party`` arguments)."""
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    header, rows = lines[0], lines[1:]
    plain = work / "all.csv"
    plain.write_text("\n".join(lines) + "\n")
    party_args = []
    for i in range(n):
        part = work / f"p{i}.csv"
        part.write_text("\n".join([header, *rows[i::n]]) + "\n")
        party_args += ["--party", f"h{i}={part}"]
    return plain, party_args, len(rows)


def measure(w: Workload, work: Path, repeat: int = 1) -> dict[str, object]:
    plain, party_args, n_rows = split(w.input, w.parties, work)
    central = min(
        _run_cpu(
            [
                "anonymize",
                "--spec",
                str(w.spec),
                "--input",
                str(plain),
                "--quiet",
                "--output",
                str(work / "central.csv"),
            ]
        )
        for _ in range(repeat)
    )
    t_central = central[0]
    best: tuple[float, float, dict[str, object]] | None = None
    for _ in range(repeat):
        t, cpu = _run_cpu(
            ["federate", "--spec", str(w.spec), *party_args, "--quiet",
             "--output", str(work / "fed.csv"), "--report", str(work / "fed.json")]
        )  # fmt: skip
        rep = json.loads((work / "fed.json").read_text())["federation"]
        if best is None or t < best[0]:
            best = (t, cpu, rep)
    assert best is not None
    t_fed, cpu_fed, fed = best
    union = fed["union"]
    released = (work / "fed.csv").stat().st_size
    ub = union["bytes"]["sent"] + union["bytes"]["received"]
    return {
        "workload": w.name,
        "rows": n_rows,
        "parties": w.parties,
        "anonymize_s": round(t_central, 3),
        "federate_s": round(t_fed, 3),
        "ratio": round(t_fed / t_central, 2),
        "anonymize_cpu_s": round(central[1], 2),
        "federate_cpu_s": round(cpu_fed, 2),
        "leader_s": fed["seconds"]["total"],
        "startup_s": fed["seconds"].get("daemon_startup"),
        "rounds_s": fed["seconds"]["rounds"],
        "sums": fed["sums"],
        "union": union["method"],
        "union_s": union["seconds"],
        "union_bytes": ub,
        "released_bytes": released,
        "union_per_csv": round(ub / released, 2),
        "secure_sum": fed.get("secure_sum", "ring"),
        "vector_bytes": union.get("vector_bytes"),
        "target_ok": _target_ok(w, t_fed, t_central, union["method"], ub, released),
    }


def _target_ok(
    w: Workload, t_fed: float, t_central: float, method: str, ub: int, released: int
) -> bool:
    ok = True
    if w.max_seconds is not None:
        ok &= t_fed <= w.max_seconds
    if w.max_ratio is not None:
        ok &= t_fed <= w.max_ratio * t_central
    if method == "sketch":
        ok &= ub <= w.max_union_per_csv * released
    return ok


def blowup_spec(work: Path) -> Path:
    """examples/adult/run.toml with C = 1 (bench_anonymize's 1M setting) and no declared
    marital-status values: the full table through the sketch union."""
    text = (SPECS / "adult-free.toml").read_text()
    text = re.sub(r"(?m)^C = .*$", "C = 1.0", text)
    text = text.replace('taxonomy = "../../examples/adult/', f'taxonomy = "{ADULT}/')
    path = work / "blowup.toml"
    path.write_text(text)
    return path


def workloads(work: Path, rows: int) -> list[Workload]:
    from bench_anonymize import blow_up

    out = [
        Workload("adult-kanon", ADULT / "run-kanon.toml", ADULT / "adult.csv.gz"),
        Workload(
            "adult-kanon-full",
            SPECS / "adult-kanon-full.toml",
            ADULT / "adult.csv.gz",
            max_seconds=1.5,
        ),
        Workload("adult-free", SPECS / "adult-free.toml", ADULT / "adult.csv.gz", max_ratio=2.0),
    ]
    if rows:
        big = work / "big.csv"
        blow_up(rows, big)
        out.append(Workload("blowup-1m", blowup_spec(work), big, max_ratio=1.5))
        out.append(
            Workload(
                "blowup-1m-distinct",
                SPECS / "adult-kanon-full.toml",
                big,
                max_ratio=1.5,
                max_union_per_csv=3.0,
            )
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", type=Path, help="one ad hoc run: this spec ...")
    ap.add_argument("--input", type=Path, default=ADULT / "adult.csv.gz", help="... on this")
    ap.add_argument("--parties", type=int, default=3)
    ap.add_argument("--only", action="append", help="workload name (repeatable)")
    ap.add_argument("--rows", type=int, default=1_000_000, help="blow-up rows (0: skip it)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    compile_checkout()  # time the program as installed (bench/bytecode.py)
    results = []
    with tempfile.TemporaryDirectory(prefix="fedanon-bench-") as tmp:
        work = Path(tmp)
        if args.spec is not None:
            todo = [Workload(args.spec.stem, args.spec, args.input, args.parties)]
        else:
            big_ones = {"blowup-1m", "blowup-1m-distinct"}
            need_big = args.rows and (not args.only or big_ones & set(args.only))
            todo = workloads(work, args.rows if need_big else 0)
            todo = [w for w in todo if not args.only or w.name in args.only]
        for w in todo:
            sub = work / w.name
            sub.mkdir()
            results.append(measure(w, sub, args.repeat))
            print(json.dumps(results[-1]), flush=True)
    load = os.getloadavg()
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)")
    print(
        "| workload | rows | parties | anonymize | federate | ratio | leader | daemon start-up "
        "| union | union s | union bytes / CSV | target |"
    )
    print("| --- " * 12 + "|")
    for r in results:
        print(
            f"| {r['workload']} | {r['rows']:,} | {r['parties']} | {r['anonymize_s']:.2f} s "
            f"| {r['federate_s']:.2f} s | {r['ratio']:.2f}x | {r['leader_s']:.2f} s "
            f"| {r['startup_s']:.2f} s | {r['union']} | {r['union_s']:.2f} s "
            f"| {r['union_bytes'] / 1e6:.1f} MB / {r['released_bytes'] / 1e6:.1f} MB = "
            f"{r['union_per_csv']:.2f}x | {'met' if r['target_ok'] else 'MISSED'} |"
        )
    cores = os.cpu_count() or 1
    for r in results:  # the CPU floor: every process of `federate` shares this machine's cores
        floor = float(r["federate_cpu_s"]) / cores
        print(
            f"{r['workload']}: CPU (all processes) anonymize {r['anonymize_cpu_s']:.2f} s, "
            f"federate {r['federate_cpu_s']:.2f} s: federate lasts at least {floor:.2f} s on "
            f"{cores} cores = {floor / float(r['anonymize_s']):.2f}x anonymize's wall time"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"load": load, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
