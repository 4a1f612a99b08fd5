"""The method registry (issue 18 item 1): one place maps ``[privacy] model`` to a method; the
commands dispatch through it, refuse another method's options, and a method without a
federated variant is refused from its capability."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dp_helpers import small_case

from fedanon.cli.main import main
from fedanon.errors import InputError, SpecError
from fedanon.methods import registry
from fedanon.methods.base import Method, Option

HERE = Path(__file__).resolve().parent
FIG1 = HERE / "kkm_fig1"
TABLE1 = HERE.parents[1] / "examples" / "table1"


def test_built_in_methods_and_the_lkc_family() -> None:
    assert registry.names() == ("lkc", "dp", "kkm")
    for name in registry.names():
        m = registry.get(name)
        assert isinstance(m, Method) and m.name == name
    # a plug-in privacy model (or a name the spec reader will refuse) is run by the LKC engine
    assert registry.get("kanon") is registry.get("lkc")
    assert registry.is_family("kanon") and not registry.is_family("dp")
    caps = {n: registry.get(n).capabilities for n in registry.names()}
    assert caps["lkc"].federated and caps["dp"].federated and not caps["kkm"].federated
    assert caps["kkm"].set_valued and not caps["lkc"].set_valued
    assert not caps["dp"].auditable


def test_a_method_only_option_defaults_to_none() -> None:
    with pytest.raises(ValueError, match="defaults to None or False"):
        Option("anonymize", ("--x",), {"default": 3})


def test_no_federated_variant_is_refused_from_the_capability(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        registry.require_federated(FIG1 / "run.toml")
    assert exc.value.exit_code == 2 and "cannot run federated" in str(exc.value)
    registry.require_federated(TABLE1 / "run.toml")  # LKC: passes
    registry.require_federated(tmp_path / "missing.toml")  # its own reader reports it


def _bom_copy(tmp_path: Path) -> Path:
    """Fig. 1's kkm spec and files, the spec starting with a UTF-8 BOM."""
    for f in FIG1.iterdir():
        shutil.copy(f, tmp_path / f.name)
    spec = tmp_path / "run.toml"
    spec.write_bytes(b"\xef\xbb\xbf" + (FIG1 / "run.toml").read_bytes())
    return spec


def test_a_kkm_spec_with_a_bom_goes_to_kkm_in_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _bom_copy(tmp_path)
    out, rep = tmp_path / "out.csv", tmp_path / "rep.json"
    data = str(tmp_path / "figure1a.csv")
    args = ["--spec", str(spec), "--input", data, "--output", str(out), "--report", str(rep)]
    assert main(["anonymize", *args, "--quiet"]) == 0
    assert json.loads(rep.read_text())["model"] == "kkm"
    capsys.readouterr()
    assert main(["audit", "--spec", str(spec), "--released", str(out)]) == 0
    assert "(k, k^m)-anonymity holds" in capsys.readouterr().out
    with pytest.raises(SpecError, match="cannot run federated"):
        registry.require_federated(spec)
    with pytest.raises(SpecError, match="cannot run federated"):  # what a party receives
        registry.require_federated_text(spec.read_text(), "<leader spec>")


def test_another_methods_option_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, data = small_case(tmp_path, h=4)
    out = tmp_path / "out.csv"
    base = ["anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out)]
    assert main([*base, "--memory-budget", "1GB"]) == 2
    err = capsys.readouterr().err
    assert "--memory-budget applies only to an LKC spec" in err
    assert not out.exists()
    released = tmp_path / "r.csv"
    released.write_text("a\n1\n")
    ev = ["evaluate", "--spec", str(TABLE1 / "run.toml"), "--released", str(released)]
    assert main([*ev, "--original", str(TABLE1 / "table1.csv"), "--train", str(released)]) == 2
    assert "--train applies only to a differential-privacy spec" in capsys.readouterr().err
    assert main([*ev, "--queries", "5"]) == 2
    assert "--queries applies only to a (k, k^m) spec" in capsys.readouterr().err


def test_check_options_names_the_owner() -> None:
    import argparse

    ns = argparse.Namespace(seed=3, expand=False, max_table_rows=None, max_expanded_rows=None)
    ns.memory_budget = None
    with pytest.raises(InputError, match="--seed applies only to a differential-privacy spec"):
        registry.check_options(registry.get("lkc"), ns, "anonymize")
    registry.check_options(registry.get("dp"), ns, "anonymize")  # its own: fine


def test_experiments_are_named_by_their_method(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = registry.experiment_names()
    assert {"dr", "dp", "kkm-k", "kkm-all"} <= set(names)
    assert registry.of_experiment("kkm-m").name == "kkm"
    assert registry.of_experiment("dp").name == "dp"
    assert main(["experiment", "kkm-k", "--out", str(tmp_path), "--rows", "10"]) == 2
    assert "--rows applies only to the LKC-privacy experiments or the DiffGen experiments" in (
        capsys.readouterr().err
    )


def test_old_commands_print_the_new_spelling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert registry.new_spelling("kkm-experiment", ["--out", "x", "k", "--quick"]) == [
        "experiment",
        "--out",
        "x",
        "kkm-k",
        "--quick",
    ]
    assert registry.new_spelling("kkm-evaluate", ["--report=r.json"]) == [
        "evaluate",
        "--run-report=r.json",
    ]
    assert registry.new_spelling("dp-experiment", ["--quick"]) == ["experiment", "dp", "--quick"]
    assert registry.new_spelling("anonymize", []) is None
    with pytest.raises(SystemExit) as stop:  # --runs 0: refused by argparse (exit 2)
        main(["dp-experiment", "--out", str(tmp_path), "--runs", "0", "--rows", "100"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "`fedanon dp-experiment` is deprecated" in err
    assert "use: fedanon experiment dp --out" in err


def test_old_commands_are_hidden_from_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "anonymize" in out and "audit" in out
    for old in registry.DEPRECATED:
        assert old not in out


@pytest.mark.parametrize("method", ["dp", "kkm"])
def test_every_method_publishes_table_and_report_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    from fedanon.io.fsutil import Pending
    from fedanon.methods import publish

    def broken(path: Path, rep: object) -> Pending:
        def write(fh: object) -> None:
            raise OSError(28, "No space left on device")

        return Pending(path, write)

    monkeypatch.setattr(publish, "report_file", broken)
    if method == "dp":
        spec, data = small_case(tmp_path, h=2)
        extra = ["--seed", "1"]
    else:
        spec, data, extra = FIG1 / "run.toml", FIG1 / "figure1a.csv", []
    out, rep = tmp_path / "out.csv", tmp_path / "rep.json"
    args = ["anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out)]
    assert main([*args, "--report", str(rep), "--quiet", *extra]) == 2
    assert not out.exists() and not rep.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
