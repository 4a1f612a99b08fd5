"""The DP part of the run spec: [privacy] model = "dp", epsilon, specializations, score."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from dp_helpers import small_case

from fedanon.cli.main import main
from fedanon.dp.spec import load_dp_spec, parse_dp_spec, privacy_model
from fedanon.errors import SpecError

BASE = """[privacy]
model = "dp"
{privacy}

[utility]
{utility}

[[attribute]]
name = "Age"
role = "qid"
type = "numeric"
domain = [0, 100]
step = 5

[[attribute]]
name = "Class"
role = "class"
{values}
"""


def _spec(
    privacy: str = "epsilon = 0.1\nspecializations = 4",
    utility: str = 'score = "max"',
    values: str = 'values = ["N", "Y"]',
) -> str:
    return BASE.format(privacy=privacy, utility=utility, values=values)


def test_parse_valid_spec() -> None:
    spec = parse_dp_spec(_spec(), "s.toml")
    assert spec.params.epsilon == Fraction(1, 10)  # the decimal written, not the float
    assert spec.params.specializations == 4
    assert spec.params.score == "max"
    assert [a.name for a in spec.predictors] == ["Age"]
    assert [a.name for a in spec.numeric] == ["Age"]
    assert spec.class_values == ("N", "Y")
    spec2 = parse_dp_spec(_spec(privacy="epsilon = 2\nspecializations = 1", utility=""))
    assert spec2.params.epsilon == 2 and spec2.params.score == "max"  # default score
    assert spec.params.noise_budget == "half"  # Algorithm 1: Lap(2 / epsilon)
    rest = parse_dp_spec(_spec(privacy='epsilon = 1\nspecializations = 2\nnoise_budget = "rest"'))
    assert rest.params.noise_budget == "rest"


def test_privacy_model() -> None:
    assert privacy_model(_spec()) == "dp"
    assert privacy_model("[privacy]\nL = 1\nK = 2\nC = 0.5\n") == "lkc"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (_spec(privacy="epsilon = 1.0"), "needs specializations"),
        (_spec(privacy="specializations = 3"), "needs epsilon"),
        (_spec(privacy="epsilon = 1\nspecializations = 3\nL = 2"), "does not apply"),
        (_spec(privacy="epsilon = 0\nspecializations = 3"), "epsilon out of range"),
        (_spec(privacy="epsilon = -1\nspecializations = 3"), "epsilon out of range"),
        (_spec(privacy="epsilon = 1000\nspecializations = 3"), "epsilon out of range"),
        (_spec(privacy="epsilon = 0.1234567\nspecializations = 3"), "too many decimals"),
        (_spec(privacy="epsilon = nan\nspecializations = 3"), "not a number"),
        (_spec(privacy="epsilon = inf\nspecializations = 3"), "not a finite number"),
        (_spec(privacy='epsilon = "1"\nspecializations = 3'), "must be a number"),
        (_spec(privacy="epsilon = 1\nspecializations = 0"), "specializations"),
        (_spec(privacy="epsilon = 1\nspecializations = 2.5"), "specializations"),
        (_spec(privacy="epsilon = 1\nspecializations = true"), "specializations"),
        (_spec(utility='score = "discernibility"'), "unknown score"),
        (_spec(privacy='epsilon = 1\nspecializations = 3\nnoise_budget = "all"'), "noise_budget"),
        (_spec(utility='score = "max"\nfoo = 1'), "[utility] takes only score"),
        (_spec(values=""), "declared values"),
        (_spec(values='values = ["N"]'), "declared values"),
        (_spec().replace('model = "dp"', 'model = "lkc"'), "not a DP spec"),
        (_spec() + "\n[extra]\nx = 1\n", "unknown section"),
        (_spec().replace('type = "numeric"', 'type = "categorical"'), "needs a taxonomy"),
        ("[privacy\n", "not valid TOML"),
    ],
)
def test_invalid_specs(text: str, needle: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_dp_spec(text, "bad.toml")
    assert needle in str(exc.value)
    assert "bad.toml" in str(exc.value)


def test_dropped_columns_and_the_adapter(tmp_path: Path) -> None:
    spec_path, _ = small_case(tmp_path)
    spec, reader = load_dp_spec(spec_path)
    assert spec.dropped == ("Id", "Note")
    assert [a.name for a in spec.predictors] == ["Job", "Age", "Sex"]
    assert "Blue" in reader("job.txt")


def test_cli_rejects_bad_spec_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_path, data = small_case(tmp_path)
    spec_path.write_text(spec_path.read_text().replace("epsilon = 1.0", "epsilon = 0"))
    out = tmp_path / "out.csv"
    rc = main(
        ["dp-anonymize", "--spec", str(spec_path), "--input", str(data), "--output", str(out)]
    )
    assert rc == 2
    assert "epsilon out of range" in capsys.readouterr().err
    assert not out.exists()


def test_run_hash_binds_the_dp_parameters() -> None:
    from fedanon.dp.spec import dp_run_hash

    base = parse_dp_spec(_spec())
    same = parse_dp_spec(_spec())
    assert dp_run_hash(base, {}) == dp_run_hash(same, {})
    for other in (
        _spec(privacy="epsilon = 0.2\nspecializations = 4"),
        _spec(privacy="epsilon = 0.1\nspecializations = 5"),
        _spec(utility='score = "infogain"'),
        _spec(privacy='epsilon = 0.1\nspecializations = 4\nnoise_budget = "rest"'),
    ):
        assert dp_run_hash(parse_dp_spec(other), {}) != dp_run_hash(base, {})
    assert dp_run_hash(base, {"t.txt": "a"}) != dp_run_hash(base, {})
    half = _spec(privacy='epsilon = 0.1\nspecializations = 4\nnoise_budget = "half"')
    assert dp_run_hash(parse_dp_spec(half), {}) == dp_run_hash(base, {})  # the default
