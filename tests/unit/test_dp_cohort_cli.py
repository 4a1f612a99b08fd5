"""``fedanon generate-cohort``: the cohort of fedanon.dp.cohort (same seed, same bytes as
``python -m fedanon.dp.cohort``), a spec that `fedanon anonymize` runs, never an overwrite."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.cli.main import main
from fedanon.dp.cohort import write


def test_generate_cohort_writes_the_cohort_and_its_spec(tmp_path: Path) -> None:
    out = tmp_path / "c"
    args = ["generate-cohort", "--rows", "400", "--seed", "4", "--out", str(out)]
    assert main([*args, "--epsilon", "0.5", "--specializations", "4"]) == 0
    ref = write(tmp_path / "ref", 400, 4, 0.5, 4)
    assert (out / "cohort.csv").read_bytes() == ref.read_bytes()
    assert (out / "cohort.toml").read_text() == (ref.parent / "cohort.toml").read_text()
    assert "epsilon = 0.5" in (out / "cohort.toml").read_text()
    rel = tmp_path / "rel.csv"
    spec, data = str(out / "cohort.toml"), str(out / "cohort.csv")
    assert main(["anonymize", "--spec", spec, "--input", data, "--output", str(rel)]) == 0
    assert rel.read_text().splitlines()[0] == "sex,age,diagnoses,deceased,count"
    # a second run never overwrites what the first wrote
    before = (out / "cohort.csv").read_bytes()
    assert main(args) == 2
    assert (out / "cohort.csv").read_bytes() == before


def test_generate_cohort_refuses_bad_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["generate-cohort", "--rows", "0", "--out", str(tmp_path / "x")])
    assert exc.value.code == 2 and "--rows: must be >= 1" in capsys.readouterr().err
    assert main(["generate-cohort", "--epsilon", "0", "--out", str(tmp_path / "y")]) == 2
    assert "epsilon must be a finite number > 0" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
