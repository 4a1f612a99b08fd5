"""Speed and memory of `fedanon anonymize` with a (k, k^m) spec on the synthetic RT-dataset.

    python bench/bench_kkm.py                 # 200,000 patients, k = 5, m = 2
    python bench/bench_kkm.py --n 50000 --delta 0.2

Generates the data (``generate-rt --seed 1``) into a temp folder, then runs the real command in
a child process (so the peak RSS is the command's own) and prints the wall and CPU time (the
command is single-threaded: on a shared machine CPU time is the steadier number), the report's
phase timings and the peak memory.  Target (issue 13): 200k records, k = 5, m = 2 in <= 60 s on
2 cores and <= 2 GB.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FEDANON = [sys.executable, "-c", "import sys; from fedanon.cli.main import main; sys.exit(main())"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--m", type=int, default=2)
    p.add_argument("--delta", type=float, default=0.1)
    p.add_argument("--epsilon", type=float, default=1.0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "rt"
        work.mkdir()
        (Path(tmp) / "adult").symlink_to(ROOT / "examples" / "adult")
        spec_text = (ROOT / "examples" / "rt" / "run.toml").read_text()
        for key, val in (
            ("k", args.k),
            ("m", args.m),
            ("delta", args.delta),
            ("epsilon_suppress", args.epsilon),
        ):
            lines = spec_text.splitlines()
            spec_text = "\n".join(
                f"{key} = {val}" if ln.split("=")[0].strip() == key else ln for ln in lines
            )
        (work / "run.toml").write_text(spec_text + "\n")
        (work / "uc-chapter-12.toml").write_bytes(
            (ROOT / "examples" / "rt" / "uc-chapter-12.toml").read_bytes()
        )
        data = work / "rt.csv"
        t0 = time.perf_counter()
        subprocess.run(
            [*FEDANON, "generate-rt", "--n", str(args.n), "--seed", "1", "--out", str(data)],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        gen = time.perf_counter() - t0
        rep = work / "report.json"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(
            [
                *FEDANON,
                "anonymize",
                "--spec",
                str(work / "run.toml"),
                "--input",
                str(data),
                "--output",
                str(work / "out.csv"),
                "--report",
                str(rep),
                "--quiet",
            ],
            check=True,
            cwd=ROOT,
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        peak = after.ru_maxrss / 1024
        r = json.loads(rep.read_text())
    print(f"records {args.n}, k={args.k}, m={args.m}, delta={args.delta}: generate {gen:.1f} s")
    print(f"anonymize wall {wall:.1f} s, CPU {cpu:.1f} s (one process), peak RSS {peak:.0f} MB")
    print("phases: " + ", ".join(f"{k} {v:.1f} s" for k, v in r["timings"].items()))
    print("ArtUC: " + ", ".join(f"{k} {v:.1f} s" for k, v in r["seconds"].items()))
    print(
        f"clusters {r['initial_clusters']} -> {r['clusters']} ({r['merges']} merges, "
        f"{r['gendiag_runs']} GenDiag runs); NCP {r['NCP']:.4f}, UL {r['UL']:.4f}, "
        f"suppressed entries {r['suppressed_code_entries']}/{r['code_entries']}, "
        f"audit {'ok' if r['audit']['ok'] else 'FAILED'}"
    )


if __name__ == "__main__":
    main()
