"""`fedanon anonymize` dispatches a ``[privacy] model = "dp"`` spec to the DiffGen engine."""

from __future__ import annotations

import json
from pathlib import Path

from dp_helpers import small_case

from fedanon.cli.main import main

TABLE1 = Path(__file__).resolve().parents[2] / "examples" / "table1"


def _release(command: str, spec: Path, data: Path, out: Path, *extra: str) -> int:
    args = [command, "--spec", str(spec), "--input", str(data), "--output", str(out)]
    return main([*args, "--report", str(out.with_suffix(".json")), "--quiet", *extra])


def test_anonymize_with_dp_spec_equals_dp_anonymize(tmp_path: Path) -> None:
    spec, data = small_case(tmp_path, h=4)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert _release("anonymize", spec, data, a, "--seed", "3") == 0
    assert _release("dp-anonymize", spec, data, b, "--seed", "3") == 0
    assert a.read_bytes() == b.read_bytes()
    assert a.read_text().splitlines()[1].endswith(",count")  # after the NOT PRIVATE line
    rep_a = json.loads(a.with_suffix(".json").read_text())
    rep_b = json.loads(b.with_suffix(".json").read_text())
    assert rep_a["cut"] == rep_b["cut"]
    # --expand too: one row per counted record, no count column
    ea, eb = tmp_path / "ea.csv", tmp_path / "eb.csv"
    assert _release("anonymize", spec, data, ea, "--seed", "3", "--expand") == 0
    assert _release("dp-anonymize", spec, data, eb, "--seed", "3", "--expand") == 0
    assert ea.read_bytes() == eb.read_bytes()
    assert "count" not in ea.read_text().splitlines()[1]


def test_dp_only_flags_refused_for_lkc_spec(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    spec, data = TABLE1 / "run.toml", TABLE1 / "table1.csv"
    assert _release("anonymize", spec, data, out, "--seed", "1") == 2
    assert _release("anonymize", spec, data, out, "--expand") == 2
    assert not out.exists()
    assert _release("anonymize", spec, data, out) == 0  # the lkc path itself still works


def test_dp_spec_refuses_database_input_and_negative_seed(tmp_path: Path) -> None:
    spec, data = small_case(tmp_path, h=2)
    out = tmp_path / "out.csv"
    url = "postgresql://u@localhost/db"
    assert _release("anonymize", spec, Path(url), out, "--table", "t") == 2
    assert _release("anonymize", spec, data, out, "--seed", "-1") == 2
    assert not out.exists()
