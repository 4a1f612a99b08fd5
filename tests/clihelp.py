"""A test helper shared by test modules: ``fedanon anonymize`` of the paper's Table I spec
on some data, in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TABLE1 = Path(__file__).parent.parent / "examples" / "table1"


def anonymize_table1(data: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``fedanon anonymize --spec examples/table1/run.toml --input DATA --output OUT``."""
    cmd = [sys.executable, "-m", "fedanon.cli", "anonymize", "--spec", str(TABLE1 / "run.toml")]
    return subprocess.run(
        [*cmd, "--input", str(data), "--output", str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
