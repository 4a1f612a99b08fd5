"""`fedanon federate`'s same-table guard compares what the run reads (attack-user 04): the
spec's non-identifier columns, numeric QIDs as numbers, so a copy with the identifier
renumbered or Age written 34.0 / 034 is refused; a copy with one record changed is not."""

from __future__ import annotations

import csv
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fedanon.errors import ConfigError
from fedanon.leader.federateinputs import check_distinct_tables
from fedanon.model.spec import load_spec

TABLE1 = Path(__file__).parent.parent.parent / "examples" / "table1"
SPEC, _ = load_spec(TABLE1 / "run.toml")


def _copy(d: Path, change: Callable[[dict[str, str]], None], name: str = "copy.csv") -> Path:
    with (TABLE1 / "table1.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        change(r)
    p = d / name
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return p


def _renumbered(r: dict[str, str]) -> None:
    r["ID"] = str(int(r["ID"]) + 100)


def _float_age(r: dict[str, str]) -> None:
    r["Age"] = f"{float(r['Age']):.1f}"


def _zero_padded_age(r: dict[str, str]) -> None:
    r["Age"] = f"{int(r['Age']):03d}"


@pytest.mark.parametrize("change", [_renumbered, _float_age, _zero_padded_age])
def test_a_copy_the_run_reads_the_same_is_refused(
    tmp_path: Path, change: Callable[[dict[str, str]], None]
) -> None:
    copy = _copy(tmp_path, change)
    with pytest.raises(ConfigError, match="the same records"):
        check_distinct_tables([("a", TABLE1 / "table1.csv"), ("c", copy)], SPEC)


def test_a_copy_with_one_record_changed_is_accepted(tmp_path: Path) -> None:
    seen = []

    def one_age(r: dict[str, str]) -> None:
        _renumbered(r)
        if not seen:
            seen.append(r)
            r["Age"] = str(int(r["Age"]) + 1)

    check_distinct_tables([("a", TABLE1 / "table1.csv"), ("c", _copy(tmp_path, one_age))], SPEC)


def test_without_a_spec_every_column_is_compared_as_text(tmp_path: Path) -> None:
    check_distinct_tables([("a", TABLE1 / "table1.csv"), ("c", _copy(tmp_path, _renumbered))])


def test_federate_refuses_a_renumbered_copy(tmp_path: Path) -> None:
    copy = _copy(tmp_path, _renumbered)
    out = tmp_path / "out.csv"
    spec = str(TABLE1 / "run.toml")
    parties = [f"a={TABLE1 / 'table1.csv'}", f"b={TABLE1 / 'table2.csv'}", f"c={copy}"]
    cmd = [sys.executable, "-m", "fedanon.cli", "federate", "--spec", spec]
    for p in parties:
        cmd += ["--party", p]
    proc = subprocess.run(
        [*cmd, "--output", str(out)], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    assert "the same records (as the run reads them)" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
