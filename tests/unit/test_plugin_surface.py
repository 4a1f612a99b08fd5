"""A registered model and score everywhere a user meets them: the spec in code
(``fedanon.Privacy``, any score name), the report's parameters, the CLI summary, and
``fedanon audit`` (recounted as the LKC-privacy the model amounts to, or exit 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from checker import check_lkc_frame, read_released
from kanon_plugin import KAnonymity, Opaque
from test_plugins import MaxFrequency  # registers "maxfreq" (and "kanon")

import fedanon
from fedanon.api import LKC, Privacy, Spec, anonymize, audit
from fedanon.cli.main import main
from fedanon.errors import SpecError
from fedanon.model.spec import load_spec
from fedanon.privacy.base import register_model
from fedanon.scores.base import register_score

register_model("kanon", KAnonymity)
register_model("opaque", Opaque)
register_score("maxfreq", MaxFrequency)

QIDS = ["Job", "Sex", "Age"]


def kanon_case(table1_dir: Path, tmp: Path, k: int = 2, model: str = "kanon") -> Path:
    folder = tmp / "case"
    shutil.copytree(table1_dir, folder)
    text = (folder / "run.toml").read_text()
    head, rest = text.split("[utility]", 1)
    head = head.split("[privacy]")[0] + f'[privacy]\nmodel = "{model}"\nK = {k}\n\n'
    (folder / "run.toml").write_text(head + "[utility]" + rest)
    return folder / "run.toml"


def anonymize_cli(spec: Path, data: Path, tmp: Path) -> tuple[int, Path, Path]:
    out, rep = tmp / "released.csv", tmp / "report.json"
    code = main(["anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out),
                 "--report", str(rep)])  # fmt: skip
    return code, out, rep


def test_report_and_summary_name_the_model_and_its_parameters(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = kanon_case(table1_dir, tmp_path, k=3)
    code, out, rep_path = anonymize_cli(spec, table1_dir / "table1.csv", tmp_path)
    assert code == 0
    rep = json.loads(rep_path.read_text())
    assert rep["parameters"] == {"model": "kanon", "K": 3, "score": "infogain", "qids": QIDS}
    assert "max_confidence" not in rep and rep["min_group_size"] >= 3
    summary = capsys.readouterr().out
    assert f"  kanon: K=3  min group size {rep['min_group_size']}\n" in summary
    res = check_lkc_frame(read_released(out), QIDS, "Surgery", set(), 3, 3, 1.0)
    assert res.ok and res.min_group_size == rep["min_group_size"]


def test_lkc_report_and_summary_keep_their_form(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, rep_path = anonymize_cli(table1_dir / "run.toml", table1_dir / "table1.csv", tmp_path)
    assert code == 0
    rep = json.loads(rep_path.read_text())
    assert list(rep["parameters"]) == ["L", "K", "C", "sensitive_values", "score", "qids"]
    assert "  LKC: L=2 K=2 C=0.5  min group size (L-subsets) 2, max confidence 0.500" in (
        capsys.readouterr().out
    )


def test_api_takes_any_registered_model_and_score(table1_dir: Path, tmp_path: Path) -> None:
    spec_path = kanon_case(table1_dir, tmp_path, k=2)
    from_file = Spec.from_toml(spec_path)
    assert from_file.privacy == Privacy("kanon", K=2) == fedanon.Privacy(model="kanon", K=2)
    assert fedanon.Privacy(model="kanon", K=2).model == "kanon"
    attrs = list(from_file.attributes)
    in_code = Spec(privacy=Privacy("kanon", K=2), attributes=attrs, base_dir=spec_path.parent)
    assert in_code.run_spec.canonical() == load_spec(spec_path)[0].canonical()
    release = anonymize(table1_dir / "table1.csv", in_code)
    _, cli_out, cli_rep = anonymize_cli(spec_path, table1_dir / "table1.csv", tmp_path)
    cli = pd.read_csv(cli_out, dtype=str, keep_default_na=False)
    pd.testing.assert_frame_equal(release.table, cli, check_dtype=False)
    assert release.report["parameters"] == json.loads(cli_rep.read_text())["parameters"]
    result = audit(release.table, in_code)
    assert result.ok and (result.L, result.K, result.C) == (3, 2, 1.0)
    # a plug-in score by name; LKC through Privacy is LKC
    scored = Spec(privacy=Privacy("kanon", K=2), attributes=attrs, score="maxfreq",
                  base_dir=spec_path.parent)  # fmt: skip
    assert scored.run_spec.score == "maxfreq"
    lkc = Privacy("lkc", L=2, K=2, C=0.5, sensitive_values=("Transgender",))
    assert lkc.to_privacy() == LKC(L=2, K=2, C=0.5, sensitive_values=["Transgender"]).to_privacy()
    with pytest.raises(SpecError, match="unknown key") as err:
        Privacy("kanon", K=2, C=0.5)
    assert err.value.expected == "K, model"
    with pytest.raises(SpecError, match="unknown score"):
        Spec(privacy=Privacy("kanon", K=2), attributes=attrs, score="nope")
    with pytest.raises(SpecError, match="unknown privacy model"):
        Privacy("nope", K=2)


def test_audit_cli_recounts_kanon_as_lkc(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = kanon_case(table1_dir, tmp_path, k=2)
    _, released, _ = anonymize_cli(spec, table1_dir / "table1.csv", tmp_path)
    capsys.readouterr()
    doc = tmp_path / "audit.json"
    assert main(["audit", "--spec", str(spec), "--released", str(released),
                 "--json", str(doc)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "model 'kanon' (model=kanon K=2) is audited as the LKC-privacy" in out
    assert "LKC-privacy holds: L=3 K=2 C=1.0" in out
    result = json.loads(doc.read_text())
    assert (result["model"], result["audited_as"], result["K"]) == ("kanon", "lkc", 2)
    # the raw Table I violates 2-anonymity on the whole QID: exit 3
    raw = table1_dir / "table1.csv"
    assert main(["audit", "--spec", str(spec), "--released", str(raw)]) == 3
    assert "LKC-privacy VIOLATED" in capsys.readouterr().out


def test_a_model_without_lkc_equivalent_cannot_be_audited(
    table1_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = kanon_case(table1_dir, tmp_path, k=2, model="opaque")
    released = table1_dir / "table2.csv"
    assert main(["audit", "--spec", str(spec), "--released", str(released)]) == 2
    assert "'opaque' cannot be audited on a table" in capsys.readouterr().err
    with pytest.raises(SpecError, match="cannot be audited"):
        audit(released, Spec.from_toml(spec))
    unknown = kanon_case(table1_dir, tmp_path / "u", k=2, model="nope")
    assert main(["audit", "--spec", str(unknown), "--released", str(released)]) == 2
    assert "unknown privacy model" in capsys.readouterr().err
