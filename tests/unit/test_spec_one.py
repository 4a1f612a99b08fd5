"""One spec type (issue 18 item 2): fedanon.Spec parses every method's spec -- the LKC family,
DiffGen, (k, k^m) -- into common attributes and a method-owned parameter section; the
method derives its view (RunSpec, DPSpec, KkmSpec) from it, equal to its own loader's."""

from __future__ import annotations

from pathlib import Path

import pytest

import fedanon
from fedanon.apispec import LKC, Attribute, Privacy, Spec
from fedanon.dp.spec import DPSpec, load_dp_spec
from fedanon.errors import SpecError
from fedanon.kkm.section import Kkm
from fedanon.kkm.spec import Relax, Tuning, load_kkm_spec
from fedanon.model.spec import load_spec

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[1] / "examples"
KKM = HERE / "kkm_fig1" / "run.toml"


@pytest.mark.parametrize("name", ["table1/run.toml", "adult/run.toml", "adult/dp.toml"])
def test_engine_specs_view_is_the_loaders(name: str) -> None:
    spec = Spec.from_toml(EXAMPLES / name)
    assert spec.view == load_spec(EXAMPLES / name, set_valued=True)[0]
    assert spec.run_spec is spec.view


def test_dp_spec_section_and_view() -> None:
    spec = Spec.from_toml(EXAMPLES / "adult" / "dp.toml")
    assert isinstance(spec.privacy, Privacy) and spec.privacy.model == "dp"
    assert DPSpec.of(spec.view) == load_dp_spec(EXAMPLES / "adult" / "dp.toml")[0]


def test_kkm_spec_parses_into_the_one_spec() -> None:
    spec = Spec.from_toml(KKM)
    assert spec.method.name == "kkm" and spec.score is None
    assert spec.privacy == Kkm(k=2, m=2, delta=0.6, epsilon_suppress=0.1, constraints="table4.toml")
    assert spec.view == load_kkm_spec(KKM)[0]
    disease = next(a for a in spec.attributes if a.name == "Disease")
    assert (disease.role, disease.type, disease.separator) == ("qid", "set", "|")
    with pytest.raises(SpecError, match="run spec"):
        spec.run_spec  # kkm runs on its own view


def test_kkm_spec_in_code_equals_the_file() -> None:
    spec = Spec(
        privacy=Kkm(k=2, m=2, delta=0.6, epsilon_suppress=0.1, constraints="table4.toml"),
        attributes=[
            Attribute("id", role="identifier"),
            Attribute("name", role="identifier"),
            Attribute("Age", role="qid", type="numeric"),
            Attribute("Origin", role="qid", type="categorical", taxonomy="origin.txt"),
            Attribute("Gender", role="qid", type="categorical", taxonomy="gender.csv"),
            Attribute("Disease", role="qid", type="set", taxonomy="icd9.txt", separator="|"),
        ],
        base_dir=KKM.parent,
        source=str(KKM),
    )
    assert spec == Spec.from_toml(KKM) and spec.view == load_kkm_spec(KKM)[0]
    assert spec.file_bytes_reader()("icd9.txt") == load_kkm_spec(KKM)[1]("icd9.txt")


def test_kkm_sections_relax_and_algorithm_round_trip(tmp_path: Path) -> None:
    text = KKM.read_text().replace(
        "[[attribute]]", "[relax]\nmax_delta = 0.8\n\n[algorithm]\nwindow = 64\n\n[[attribute]]", 1
    )
    spec = Spec.from_text("\ufeff" + text, "x.toml", base_dir=KKM.parent)  # a BOM: still kkm
    assert spec.privacy.relax == Relax(max_delta=0.8, max_epsilon_suppress=1.0)
    assert spec.privacy.algorithm == Tuning(window=64)
    assert spec.view.relax == spec.privacy.relax and spec.view.tuning.window == 64


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Kkm(k=0, m=1, delta=0.5, epsilon_suppress=0.1), "k must be"),
        (  # kkm has no sensitive column
            lambda: Spec(
                privacy=Kkm(k=2, m=1, delta=0.5, epsilon_suppress=0.1),
                attributes=[Attribute("s", role="sensitive")],
            ),
            "role = 'sensitive' is not read by \\(k, k\\^m\\)",
        ),
        (  # nor a score
            lambda: Spec(
                privacy=Kkm(k=2, m=1, delta=0.5, epsilon_suppress=0.1),
                attributes=[Attribute("a", role="qid", type="numeric")],
                score="infogain",
            ),
            "no \\[utility\\] score",
        ),
        (  # exactly one set-valued qid
            lambda: Spec(
                privacy=Kkm(k=2, m=1, delta=0.5, epsilon_suppress=0.1),
                attributes=[Attribute("a", role="qid", type="numeric")],
            ),
            "exactly one set-valued qid",
        ),
        (  # weight is (k, k^m)'s
            lambda: Spec(
                privacy=LKC(L=1, K=1, C=1.0),
                attributes=[Attribute("a", role="qid", type="numeric", domain=(0, 9), weight=1)],
            ),
            "weight is not read by LKC-privacy",
        ),
        (lambda: Attribute("a", role="qid", type="bag"), "numeric | categorical | set"),
        (lambda: Attribute("a", role="qid", type="set"), "needs an item taxonomy"),
    ],
)
def test_method_checks_in_code(build: object, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        build()  # type: ignore[operator]


def test_m_privacy_survives_from_toml(tmp_path: Path) -> None:
    adult = EXAMPLES / "adult"
    text = (adult / "run.toml").read_text().replace("[privacy]\n", "[privacy]\nm = 1\n", 1)
    text += '\n[[attribute]]\nname = "hospital"\nrole = "provider"\n'
    path = adult / "run.toml"
    spec = Spec.from_text(text, str(path), base_dir=adult)
    assert isinstance(spec.privacy, LKC) and spec.privacy.m == 1
    assert spec.run_spec.m == 1 and spec.run_spec.provider_attr is not None


def test_fedanon_spec_is_the_one() -> None:
    assert fedanon.Spec is Spec


def _no_own_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    """The methods' own spec loaders fail, wherever they were imported: a command that still
    works parsed the one Spec."""
    import sys

    import fedanon.cli.evaluate
    import fedanon.cli.main  # noqa: F401  # the commands' modules (and what they import)

    def refuse(*_: object, **__: object) -> None:
        raise RuntimeError("a method's own spec loader was called")

    for name, module in list(sys.modules.items()):
        for loader in ("load_spec", "load_dp_spec", "load_kkm_spec"):
            if name.startswith("fedanon.") and hasattr(module, loader):
                monkeypatch.setattr(module, loader, refuse)


def test_audit_parses_every_method_through_the_one_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fedanon.cli.main import main

    table1 = EXAMPLES / "table1"
    lkc_out, kkm_out = tmp_path / "lkc.csv", tmp_path / "kkm.csv"
    spec1 = table1 / "run.toml"
    assert main(["anonymize", "--spec", str(spec1), "--input", str(table1 / "table1.csv"),
                 "--output", str(lkc_out), "--quiet"]) == 0  # fmt: skip
    assert main(["anonymize", "--spec", str(KKM), "--input", str(KKM.parent / "figure1a.csv"),
                 "--output", str(kkm_out), "--quiet"]) == 0  # fmt: skip
    dp_out = tmp_path / "dp.csv"
    dp_out.write_text("Age,Sex,Class\n")  # the columns of a release of the spec below
    dp_spec = tmp_path / "dp.toml"
    dp_spec.write_text(
        '[privacy]\nmodel = "dp"\nepsilon = 1.0\nspecializations = 2\n\n'
        '[[attribute]]\nname = "Age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n\n'
        '[[attribute]]\nname = "Sex"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 2]\n\n'
        '[[attribute]]\nname = "Class"\nrole = "class"\nvalues = ["N", "Y"]\n'
    )
    _no_own_loader(monkeypatch)
    assert main(["audit", "--spec", str(spec1), "--released", str(lkc_out)]) == 0
    assert main(["audit", "--spec", str(KKM), "--released", str(kkm_out)]) == 0
    # DiffGen: only columns, and these are DiffGen's: exit 2 (1 if its own loader ran)
    assert main(["audit", "--spec", str(dp_spec), "--released", str(dp_out)]) == 2


def test_anonymize_and_evaluate_parse_every_method_through_the_one_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("sklearn")
    import fedanon.centralized
    import fedanon.dp.anonymize
    import fedanon.dp.evaluate_release
    import fedanon.evaluation.evaluate
    import fedanon.kkm.evaluate
    import fedanon.kkm.run
    import fedanon.report.build
    import fedanon.report.verdict  # noqa: F401  # what the commands run, loaded before the loaders fail
    from fedanon.cli.main import main

    table1, codes = EXAMPLES / "table1", HERE / "dp_codes"
    lkc_out, kkm_out, kkm_rep = tmp_path / "lkc.csv", tmp_path / "kkm.csv", tmp_path / "k.json"
    dp_spec, dp_data, dp_out = tmp_path / "dp.toml", tmp_path / "dp_in.csv", tmp_path / "dp.csv"
    dp_spec.write_text(
        '[privacy]\nmodel = "dp"\nepsilon = 1.0\nspecializations = 2\n\n'
        '[[attribute]]\nname = "Age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n\n'
        '[[attribute]]\nname = "Class"\nrole = "class"\nvalues = ["N", "Y"]\n'
    )
    dp_data.write_text("Age,Class\n" + "".join(f"{a},{'NY'[a % 2]}\n" for a in range(0, 100, 3)))
    _no_own_loader(monkeypatch)
    assert main(["anonymize", "--spec", str(table1 / "run.toml"), "--input",
                 str(table1 / "table1.csv"), "--output", str(lkc_out), "--quiet"]) == 0  # fmt: skip
    assert main(["anonymize", "--spec", str(KKM), "--input", str(KKM.parent / "figure1a.csv"),
                 "--output", str(kkm_out), "--report", str(kkm_rep), "--quiet"]) == 0  # fmt: skip
    assert main(["anonymize", "--spec", str(dp_spec), "--input", str(dp_data), "--output",
                 str(dp_out), "--seed", "3", "--expand", "--quiet"]) == 0  # fmt: skip
    assert main(["anonymize", "--spec", str(codes / "table1.toml"), "--input",
                 str(codes / "table1.csv"), "--output", str(tmp_path / "codes.csv"),
                 "--seed", "185", "--quiet"]) == 0  # fmt: skip
    assert main(["evaluate", "--spec", str(table1 / "run.toml"), "--original",
                 str(table1 / "table1.csv"), "--released", str(lkc_out)]) == 0  # fmt: skip
    assert main(["evaluate", "--spec", str(KKM), "--original", str(KKM.parent / "figure1a.csv"),
                 "--released", str(kkm_out), "--run-report", str(kkm_rep)]) == 0  # fmt: skip
    assert main(["evaluate", "--spec", str(dp_spec), "--released", str(dp_out), "--train",
                 str(dp_data), "--test", str(dp_data)]) == 0  # fmt: skip
    # the page: `fedanon report` and --html read the command's parsed spec
    assert main(["report", "--spec", str(KKM), "--released", str(kkm_out), "--html",
                 str(tmp_path / "kkm.html")]) == 0  # fmt: skip
    assert main(["anonymize", "--spec", str(dp_spec), "--input", str(dp_data), "--output",
                 str(tmp_path / "dp2.csv"), "--report", str(tmp_path / "dp2.json"),
                 "--html", str(tmp_path / "dp2.html"), "--seed", "3", "--quiet"]) == 0  # fmt: skip
