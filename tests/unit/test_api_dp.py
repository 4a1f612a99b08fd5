"""DiffGen through the Python API (common/api.py -> common/dp/api.py): the registered model
"dp" in a Spec, the release and report equal to `fedanon anonymize` with the same seed."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from dp_helpers import SMALL_TAXONOMY, small_case

from fedanon.api import LKC, Attribute, Privacy, Spec, anonymize, audit
from fedanon.cli.main import main
from fedanon.dp.spec import DPSpec, dp_run_hash, load_dp_spec
from fedanon.errors import SpecError
from fedanon.io.table import build_schema

DROP = {"timings", "anonymize_seconds"}


def cli(spec: Path, data: Path, out: Path, *extra: str) -> dict[str, Any]:
    argv = ["anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out)]
    rep = out.with_suffix(".json")
    assert main([*argv, "--report", str(rep), "--quiet", *extra]) == 0
    return {k: v for k, v in json.loads(rep.read_text()).items() if k not in DROP}


def plain(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in json.loads(json.dumps(report)).items() if k not in DROP}


def read_release(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False, comment="#")


def in_code(tmp: Path, **privacy: Any) -> Spec:
    """The spec of dp_helpers.small_case, built in code (score left to the model: max)."""
    return Spec(
        privacy=Privacy("dp", **(privacy or {"epsilon": 1.0, "specializations": 3})),
        attributes=[
            Attribute("Id", role="identifier"),
            Attribute("Job", role="qid", type="categorical", taxonomy_text=SMALL_TAXONOMY),
            Attribute("Age", role="qid", type="numeric", domain=(0, 100), step=10),
            Attribute("Sex", role="qid", type="categorical", taxonomy="sex.txt"),
            Attribute("Note", role="other"),
            Attribute("Class", role="class", values=["N", "Y", "Z"]),
        ],
        base_dir=tmp,
    )


@pytest.mark.parametrize("expand", [False, True])
def test_api_equals_cli_with_the_same_seed(tmp_path: Path, expand: bool) -> None:
    spec_path, data = small_case(tmp_path, h=4)
    flags = ["--seed", "5", *(["--expand"] if expand else [])]
    rep_cli = cli(spec_path, data, tmp_path / "cli.csv", *flags)
    spec = Spec.from_toml(spec_path)
    assert spec.method.name == "dp" and spec.score == "max" and spec.privacy.model == "dp"
    for source in (data, pd.read_csv(data, dtype=str)):  # a path, and a DataFrame
        release = anonymize(source, spec, seed=5, expand=expand)
        out = tmp_path / "api.csv"
        release.write(out, tmp_path / "api.json")
        assert out.read_bytes() == (tmp_path / "cli.csv").read_bytes()
        assert plain(release.report) == rep_cli
        assert plain(json.loads((tmp_path / "api.json").read_text())) == rep_cli
        written = read_release(tmp_path / "cli.csv")
        shown = release.table.astype(str)
        assert list(shown.columns) == list(written.columns)
        assert shown.equals(written)
    assert ("count" in release.table.columns) != expand
    assert release.report["private"] is False
    assert release.report["warning"] == "NOT PRIVATE: fixed seed 5"
    assert out.read_text().startswith("# NOT PRIVATE: fixed seed 5")


def test_release_content_and_zero_groups(tmp_path: Path) -> None:
    spec_path, data = small_case(tmp_path, h=3)
    release = anonymize(data, Spec.from_toml(spec_path), seed=2)
    t = release.table
    assert list(t.columns) == ["Job", "Age", "Sex", "Class", "count"]  # Id, Note not released
    assert t["count"].dtype == np.int64 and (t["count"] >= 0).all()
    groups = t.drop(columns=["Class", "count"]).drop_duplicates()
    assert len(t) == len(groups) * 3  # every group x every class value, empty ones too
    assert release.report["release"]["groups"] == len(groups)
    assert int(t["count"].sum()) == release.report["release"]["noisy_total"]


def test_private_by_default(tmp_path: Path) -> None:
    spec_path, data = small_case(tmp_path, h=2)
    release = anonymize(data, Spec.from_toml(spec_path))
    assert release.report["private"] is True and "warning" not in release.report
    assert release.report["randomness"].startswith("os.urandom")
    out = tmp_path / "r.csv"
    release.write(out)
    assert not out.read_text().startswith("#")


def test_spec_in_code_is_the_toml_spec(tmp_path: Path) -> None:
    spec_path, data = small_case(tmp_path, h=3)
    code = in_code(tmp_path)
    toml = Spec.from_toml(spec_path)
    assert code.score == "max"  # the model's default score
    assert code.privacy == toml.privacy
    exact = Privacy("dp", epsilon=Fraction(1), specializations=3)  # an exact epsilon too
    assert exact == code.privacy and Privacy.of(exact.to_privacy()) == exact
    a = anonymize(data, code, seed=9)
    b = anonymize(data, toml, seed=9)
    assert a.table.equals(b.table) and plain(a.report) == plain(b.report)
    # the run hash a party pins: the same for the spec in code and the file
    dp_file, reader = load_dp_spec(spec_path)
    files = build_schema(dp_file.run, reader).files
    assert dp_run_hash(DPSpec.of(toml.run_spec), files) == dp_run_hash(dp_file, files)


def test_dp_spec_errors(tmp_path: Path) -> None:
    spec_path, data = small_case(tmp_path, h=2)
    with pytest.raises(SpecError, match="unknown score for model = 'dp'"):
        Spec(**{**_fields(in_code(tmp_path)), "score": "discernibility"})
    with pytest.raises(SpecError, match="epsilon out of range"):
        Privacy("dp", epsilon=0, specializations=3)
    with pytest.raises(SpecError, match="unknown key"):
        Privacy("dp", epsilon=1.0, specializations=3, K=2)
    with pytest.raises(SpecError, match="randomized mechanism"):
        audit(data, Spec.from_toml(spec_path))
    table1 = Path(__file__).resolve().parents[2] / "examples" / "table1"
    lkc = Spec.from_toml(table1 / "run.toml")
    for kw in ({"seed": 1}, {"expand": True}):
        with pytest.raises(SpecError, match="applies only to a differential-privacy spec"):
            anonymize(table1 / "table1.csv", lkc, **kw)  # type: ignore[arg-type]


def _fields(spec: Spec) -> dict[str, Any]:
    return {
        "privacy": spec.privacy,
        "attributes": spec.attributes,
        "base_dir": spec.base_dir,
    }


def test_lkc_run_with_the_max_score(table1_dir: Path) -> None:
    """ "max" is a registered score an LKC run may use too; its release passes the audit."""
    base = Spec.from_toml(table1_dir / "run.toml")
    spec = Spec(
        privacy=LKC(L=2, K=2, C=0.5, sensitive_values=["Transgender"]),
        attributes=base.attributes,
        score="max",
        base_dir=table1_dir,
    )
    release = anonymize(table1_dir / "table1.csv", spec)
    assert release.report["parameters"]["score"] == "max"
    assert release.report["specializations"]  # Max scored the candidates: it specialized
    assert audit(release.table, spec).ok


def test_max_score_against_a_brute_force_recount() -> None:
    """The Max of a specialization and of every numeric split point, recounted with loops
    (the functions DiffGen samples with and the registered score "max" both use)."""
    from fedanon.dp.utility import Utility
    from fedanon.tds.measures import best_split_max, max_of_children, max_of_splits

    rng = np.random.default_rng(4)
    for _ in range(200):
        bins, classes = int(rng.integers(1, 8)), int(rng.integers(2, 4))
        hist = rng.integers(0, 5, size=(bins, classes)) * (rng.random((bins, 1)) < 0.7)
        hist = hist.astype(np.int64)
        want = [
            max(int(hist[:s, k].sum()) for k in range(classes))
            + max(int(hist[s:, k].sum()) for k in range(classes))
            for s in range(1, bins)
        ]
        assert max_of_splits(hist).tolist() == want
        assert Utility("max", classes).of_splits(hist)[0].tolist() == want
        assert max_of_children(hist) == sum(max(row) for row in hist.tolist())
        occupied = [b for b in range(bins) if hist[b].sum() > 0]
        best = best_split_max(hist)
        if len(occupied) < 2:
            assert best is None
        else:
            admissible = range(occupied[0] + 1, occupied[-1] + 1)
            top = max(want[s - 1] for s in admissible)
            assert best == min(s for s in admissible if want[s - 1] == top)
