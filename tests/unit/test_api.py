"""The Python API (common/api.py): same release as `fedanon anonymize`, whatever the input."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from checker import check_lkc_frame

from fedanon.api import LKC, Attribute, Release, Spec, anonymize, audit
from fedanon.cli.main import main
from fedanon.errors import DataError, SpecError
from fedanon.io.frames import cell_text, text_frame
from fedanon.model.spec import load_spec


def cli_release(spec: Path, data: Path, tmp: Path) -> tuple[pd.DataFrame, dict[str, Any], Path]:
    out, rep = tmp / "cli.csv", tmp / "cli.json"
    argv = ["anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out)]
    assert main([*argv, "--report", str(rep), "--quiet"]) == 0
    table = pd.read_csv(out, dtype=str, keep_default_na=False, na_filter=False)
    return table, json.loads(rep.read_text()), out


def without_times(report: dict[str, Any]) -> dict[str, Any]:
    """A report as JSON would carry it, without the run-dependent timings."""
    drop = {"timings", "anonymize_seconds"}
    return {k: v for k, v in json.loads(json.dumps(report)).items() if k not in drop}


def table1_in_code(table1_dir: Path, **extra: Any) -> Spec:
    return Spec(
        privacy=LKC(L=2, K=2, C=0.5, sensitive_values=["Transgender"]),
        score="infogain",
        attributes=[
            Attribute("ID", role="identifier"),
            Attribute("Job", role="qid", type="categorical", taxonomy="job.txt"),
            Attribute("Sex", role="qid", type="categorical", taxonomy="sex.txt"),
            Attribute("Age", role="qid", type="numeric", domain=(1, 99), taxonomy="age.txt"),
            Attribute("Transfuse", role="class", values=["N", "Y"]),
            Attribute("Surgery", role="sensitive"),
        ],
        base_dir=table1_dir,
        **extra,
    )


def test_table1_path_and_frame_match_the_cli(table1_dir: Path, tmp_path: Path) -> None:
    spec_path, data = table1_dir / "run.toml", table1_dir / "table1.csv"
    cli_table, cli_report, _ = cli_release(spec_path, data, tmp_path)
    spec = Spec.from_toml(spec_path)
    by_path = anonymize(data, spec)
    pd.testing.assert_frame_equal(by_path.table, cli_table)
    assert without_times(by_path.report) == without_times(cli_report)
    assert "timings" in cli_report and "timings" not in by_path.report

    frame = pd.read_csv(data)  # ID and Age int64
    frame["Job"] = frame["Job"].astype("category")
    frame["Sex"] = pd.Categorical(frame["Sex"], categories=["F", "M", "X"])  # unused category
    frame["Age"] = frame["Age"].astype(np.float64)  # 34.0 is read as 34
    frame["ID"] = frame["ID"].astype("Int64")
    by_frame = anonymize(frame, spec)
    pd.testing.assert_frame_equal(by_frame.table, cli_table)
    assert without_times(by_frame.report) == without_times(cli_report)
    assert frame["Age"].dtype == np.float64  # the caller's frame is not modified


def test_spec_in_code_equals_spec_from_toml(table1_dir: Path, tmp_path: Path) -> None:
    spec_path = table1_dir / "run.toml"
    loaded, _ = load_spec(spec_path)
    in_code = table1_in_code(table1_dir, source=str(spec_path))
    assert in_code.run_spec == loaded
    assert Spec.from_toml(spec_path).run_spec == loaded
    data = table1_dir / "table1.csv"
    a = anonymize(data, in_code)
    b = anonymize(data, Spec.from_toml(spec_path))
    pd.testing.assert_frame_equal(a.table, b.table)
    assert without_times(a.report) == without_times(b.report)


def test_in_memory_taxonomies(table1_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(table1_dir)  # relative paths without base_dir: the current directory
    from_files = anonymize("table1.csv", table1_in_code(Path(".")))
    sex = Attribute(
        "Sex",
        role="qid",
        type="categorical",
        taxonomy_text="ANY_Sex\n  M\n  F\n",
    )
    job_arx = "Janitor;Nontechnical;Blue-collar;ANY_Job\n" + "\n".join(
        f"{leaf};{mid};{top};ANY_Job"
        for leaf, mid, top in [
            ("Mover", "Nontechnical", "Blue-collar"),
            ("Carpenter", "Technical", "Blue-collar"),
            ("Technician", "Technical", "Blue-collar"),
            ("Doctor", "Professional", "White-collar"),
            ("Lawyer", "Professional", "White-collar"),
        ]
    )
    job = Attribute(
        "Job", role="qid", type="categorical", taxonomy_text=job_arx, taxonomy_format="arx"
    )
    base = table1_in_code(Path("."))
    attrs = [{"Sex": sex, "Job": job}.get(a.name, a) for a in base.attributes]  # Age keeps its file
    spec = Spec(privacy=base.privacy, attributes=attrs, base_dir=table1_dir)
    in_memory = anonymize(pd.read_csv("table1.csv"), spec)
    pd.testing.assert_frame_equal(in_memory.table, from_files.table)
    assert without_times(in_memory.report) == without_times(from_files.report)


@pytest.mark.slow
def test_adult_frame_with_category_and_numeric_dtypes(
    adult_dir: Path, adult_csv: Path, tmp_path: Path
) -> None:
    spec_path = adult_dir / "run.toml"
    cli_table, cli_report, cli_file = cli_release(spec_path, adult_csv, tmp_path)
    frame = pd.read_csv(adult_csv)
    for name in frame.columns:
        if frame[name].dtype == object:
            frame[name] = frame[name].astype("category")
    frame["age"] = frame["age"].astype(np.int8)
    frame["hours-per-week"] = frame["hours-per-week"].astype(np.float32)
    frame["capital-loss"] = frame["capital-loss"].astype("Int64")
    assert {str(t) for t in frame.dtypes} >= {"category", "int64", "int8", "float32", "Int64"}
    spec = Spec.from_toml(spec_path)
    release = anonymize(frame, spec)
    pd.testing.assert_frame_equal(release.table, cli_table)
    assert without_times(release.report) == without_times(cli_report)
    # written back, the release is the CLI's file byte for byte
    out = tmp_path / "api.csv"
    release.write(out, tmp_path / "api.json")
    assert out.read_bytes() == cli_file.read_bytes()
    result = audit(release.table, spec)
    assert result.ok and result.min_group_size >= 20 and result.max_confidence <= 0.2
    assert (result.min_group_size, result.max_confidence) == (
        cli_report["min_group_size"],
        cli_report["max_confidence"],
    )


def test_parquet_path(table1_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    frame = pd.read_csv(table1_dir / "table1.csv")
    frame["Job"] = frame["Job"].astype("category")
    parquet = tmp_path / "t.parquet"
    frame.to_parquet(parquet)
    spec = Spec.from_toml(table1_dir / "run.toml")
    expected = anonymize(table1_dir / "table1.csv", spec).table
    pd.testing.assert_frame_equal(anonymize(parquet, spec).table, expected)


def test_audit_of_a_raw_frame_and_of_a_file(table1_dir: Path) -> None:
    spec = Spec.from_toml(table1_dir / "run.toml")
    raw = pd.read_csv(table1_dir / "table1.csv")  # Age is int64: compared as "34"
    result = audit(raw, spec)
    assert not result.ok
    assert (result.min_group_size, result.max_confidence) == (1, 1.0)
    assert result.violations[0].values == ("Janitor", "34")
    ref = check_lkc_frame(
        raw.astype(str), ["Job", "Sex", "Age"], "Surgery", {"Transgender"}, 2, 2, 0.5
    )
    assert (ref.ok, ref.min_group_size, ref.max_confidence) == (False, 1, 1.0)
    # the paper's Table II keeps the identifier ID "for discussion": a release must not
    table2 = audit(table1_dir / "table2.csv", spec)
    assert not table2.ok and table2.identifier_columns == ("ID",)
    assert (table2.min_group_size, table2.max_confidence) == (2, 0.5)  # the groups are fine
    assert audit(pd.read_csv(table1_dir / "table2.csv").drop(columns=["ID"]), spec).ok


def test_bad_frame_value_names_the_row(table1_dir: Path) -> None:
    frame = pd.read_csv(table1_dir / "table1.csv").set_index("ID", drop=False)
    frame.loc[7, "Job"] = "Astronaut"
    fds = len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").is_dir() else None
    with pytest.raises(DataError) as err:
        anonymize(frame, Spec.from_toml(table1_dir / "run.toml"))
    text = str(err.value)
    assert "<DataFrame> row 6 (index 7)" in text and "'Job'" in text
    assert "/dev/fd" not in text
    if fds is not None:  # the pipe is closed again
        assert len(os.listdir("/proc/self/fd")) == fds
    missing = pd.read_csv(table1_dir / "table1.csv").drop(columns=["Sex"])
    with pytest.raises(DataError, match=r"<DataFrame> header.*'Sex' is missing"):
        anonymize(missing, Spec.from_toml(table1_dir / "run.toml"))


def test_taxonomy_errors_keep_their_file(table1_dir: Path) -> None:
    base = table1_in_code(table1_dir)
    attrs = [
        Attribute("Sex", role="qid", type="categorical", taxonomy="nowhere.txt")
        if a.name == "Sex"
        else a
        for a in base.attributes
    ]
    spec = Spec(privacy=base.privacy, attributes=attrs, base_dir=table1_dir)
    with pytest.raises(SpecError, match=r"nowhere\.txt"):
        anonymize(pd.read_csv(table1_dir / "table1.csv"), spec)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: LKC(L=0, K=2, C=0.5), "L must be"),
        (lambda: LKC(L=1, K=2, C=1.5), "C must be"),
        (lambda: Attribute("a", role="qid", type="categorical"), "needs a taxonomy"),
        (  # the LKC engine's rule (a (k, k^m) qid may take its range from the data)
            lambda: Spec(
                privacy=LKC(L=1, K=1, C=1.0),
                attributes=[Attribute("a", role="qid", type="numeric")],
            ),
            "domain",
        ),
        (
            lambda: Attribute(
                "a", role="qid", type="categorical", taxonomy="t.txt", taxonomy_text="x"
            ),
            "not both",
        ),
        (lambda: Attribute("a", role="weird"), "unknown role"),  # type: ignore[arg-type]
        (
            lambda: Spec(
                privacy=LKC(L=1, K=1, C=1.0),
                attributes=[Attribute("a", role="other")],
            ),
            "no attribute has role = 'qid'",
        ),
    ],
)
def test_invalid_specs_in_code(build: Any, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        build()


def test_from_toml_parses_kkm_and_anonymize_refuses_it(table1_dir: Path) -> None:
    # model = "dp" is a registered model: tests/unit/test_api_dp.py; every method's spec
    # parses into the one Spec (tests/unit/test_spec_one.py), kkm runs from the CLI
    kkm = Spec.from_toml(Path(__file__).parent / "kkm_fig1" / "run.toml")
    with pytest.raises(SpecError, match="model = 'kkm'"):
        anonymize(pd.read_csv(table1_dir / "table1.csv"), kkm)


@pytest.mark.parametrize(
    "name", ["table1/run.toml", "adult/run.toml", "adult/run-discernibility.toml"]
)
def test_from_toml_is_load_spec(examples_dir: Path, name: str) -> None:
    spec = Spec.from_toml(examples_dir / name)
    assert spec.run_spec == load_spec(examples_dir / name)[0]


def test_cell_text() -> None:
    assert cell_text(34) == "34" and cell_text(np.int8(-3)) == "-3"
    assert cell_text(34.0) == "34" and cell_text(np.float32(34.0)) == "34"
    assert cell_text(34.5) == "34.5" and cell_text(0.1) == "0.1"
    assert cell_text(np.float32(0.1)) == "0.1" and cell_text(np.float64(1e-7)) == "1e-07"
    assert cell_text(1e20) == "1e+20" and cell_text(2.0**60) == repr(2.0**60)
    assert cell_text(float("nan")) == "" and cell_text(None) == "" and cell_text(pd.NA) == ""
    assert cell_text(True) == "True" and cell_text(" x ") == " x "
    frame = pd.DataFrame(
        {"c": pd.Categorical(["a", None, "b"]), "f": [1.0, np.nan, 2.5], "i": [1, 2, 3]}
    )
    assert text_frame(frame).to_dict("list") == {
        "c": ["a", "", "b"],
        "f": ["1", "", "2.5"],
        "i": ["1", "2", "3"],
    }


def test_release_is_returned_not_written(
    table1_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # a temporary file would show up here
    frame = pd.read_csv(table1_dir / "table1.csv")
    release = anonymize(frame, Spec.from_toml(table1_dir / "run.toml"))
    assert isinstance(release, Release)
    assert list(tmp_path.iterdir()) == []
    assert all(isinstance(v, str) for col in release.table for v in release.table[col])
