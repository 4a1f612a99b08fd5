"""A report and an evaluation of an m-private release (issue 22, follow-up): the provider
column is read at anonymization only and never released, so neither asks the release for it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedanon.apispec import Spec
from fedanon.cli.main import main
from fedanon.evaluation.evaluate import evaluate_files

ADULT = Path(__file__).parents[2] / "examples" / "adult"


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("mviews")
    df = pd.read_csv(ADULT / "adult.csv.gz", dtype=str, keep_default_na=False).head(3000)
    df["hospital"] = np.array(["a", "b", "c"])[np.arange(len(df)) % 3]
    df.to_csv(d / "data.csv", index=False)
    text = (ADULT / "run.toml").read_text().replace('taxonomy = "', f'taxonomy = "{ADULT}/')
    text = text.replace("[privacy]\n", "[privacy]\nm = 1\n", 1)
    (d / "spec.toml").write_text(text + '\n[[attribute]]\nname = "hospital"\nrole = "provider"\n')
    argv = ["anonymize", "--spec", str(d / "spec.toml"), "--input", str(d / "data.csv")]
    argv += ["--output", str(d / "out.csv"), "--report", str(d / "rep.json"), "--quiet"]
    assert main(argv) == 0
    assert "hospital" not in pd.read_csv(d / "out.csv", nrows=1).columns
    return d


def test_report_of_an_m_private_release(released: Path) -> None:
    d = released
    argv = ["report", "--spec", str(d / "spec.toml"), "--released", str(d / "out.csv")]
    argv += ["--original", str(d / "data.csv"), "--run-report", str(d / "rep.json")]
    assert main([*argv, "--html", str(d / "page.html")]) == 0
    assert (d / "page.html").stat().st_size > 0


def test_evaluation_of_an_m_private_release(released: Path) -> None:
    d = released
    metrics = evaluate_files(
        Spec.from_toml(d / "spec.toml").run_spec, d / "data.csv", d / "out.csv"
    )
    assert 0 < metrics.CE <= 1
