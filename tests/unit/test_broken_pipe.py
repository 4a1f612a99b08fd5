"""`fedanon ... | head`: a reader that closes our standard output early is not an internal
error: exit 141 (128 + SIGPIPE, as `yes | head`), nothing logged, whether the closed pipe shows
at the final flush (short output, buffered) or in the middle of the output."""

from __future__ import annotations

import csv
import itertools
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "fedanon.cli.main"]


def _closed_reader(args: list[str]) -> tuple[int, str]:
    """Run the CLI with a stdout pipe whose read end is closed before it writes anything."""
    proc = subprocess.Popen(
        [*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def _clean(stderr: str) -> None:
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    assert "BrokenPipe" not in stderr and "Exception ignored" not in stderr, stderr


def test_short_output(table1_dir: Path) -> None:
    spec, raw = table1_dir / "run.toml", table1_dir / "table1.csv"
    code, err = _closed_reader(["audit", "--spec", str(spec), "--released", str(raw)])
    assert code == 141
    _clean(err)


def test_long_output_cut_short(table1_dir: Path, tmp_path: Path) -> None:
    # every group of the 796 (Job, Sex, Age pairs) violates C: listed with --top
    jobs = ["Janitor", "Mover", "Carpenter", "Technician", "Doctor", "Lawyer"]
    table = tmp_path / "unique.csv"
    with table.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["ID", "Job", "Sex", "Age", "Transfuse", "Surgery"])
        for i, (job, sex, age) in enumerate(itertools.product(jobs, "MF", range(1, 99))):
            w.writerow([i, job, sex, age, "N", "Transgender"])
    args = ["audit", "--spec", str(table1_dir / "run.toml"), "--released", str(table)]
    out = subprocess.run([*CLI, *args, "--top", "2000"], capture_output=True, check=False)
    assert out.returncode == 3 and len(out.stdout) > 16 * 1024  # written while running
    code, err = _closed_reader([*args, "--top", "2000"])
    assert code == 141
    _clean(err)
