"""Adult in the paper's setting (L=4, K=20, C=0.2), both scores, re-checked from the file;
and the k-anonymity special case cross-checked with pyCANON."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from checker import check_released
from engine_helpers import anonymize


@pytest.mark.parametrize("spec_name", ["run.toml", "run-discernibility.toml"])
def test_adult_paper_setting_passes_checker(
    adult_dir: Path, adult_csv: Path, tmp_path: Path, spec_name: str
) -> None:
    out = tmp_path / "released.csv"
    result, _ = anonymize(adult_dir / spec_name, adult_csv, out)
    res = check_released(adult_dir / spec_name, out)
    assert res.ok, res.first_violation
    assert res.n_rows == 45223
    assert len(result.specializations) > 0
    summary = result.decider.summary()
    assert summary["groups"] == res.n_equivalence_groups
    assert summary["DR"] == pytest.approx(res.discernibility_ratio)


def test_k_anonymity_special_case_agrees_with_pycanon(
    adult_dir: Path, adult_csv: Path, tmp_path: Path
) -> None:
    from pycanon import anonymity

    out = tmp_path / "released.csv"
    result, _ = anonymize(adult_dir / "run-kanon.toml", adult_csv, out)
    df = pd.read_csv(out, dtype=str, keep_default_na=False)
    qi = ["workclass", "education", "occupation", "relationship", "race", "sex", "native-country"]
    k = anonymity.k_anonymity(df, qi)
    assert k >= 20
    assert k == result.decider.summary()["min_group_size"]
    # and the raw data is far from 20-anonymous
    raw = pd.read_csv(adult_csv, dtype=str, keep_default_na=False)
    assert anonymity.k_anonymity(raw, qi) < 20
