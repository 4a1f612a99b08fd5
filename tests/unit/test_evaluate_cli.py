"""`fedanon evaluate` / `experiment` without the optional `eval` extra, and a bad --json."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fedanon.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
TABLE1 = ROOT / "examples" / "table1"


def _evaluate(*extra: str) -> int:
    return main(
        [
            "evaluate",
            "--spec",
            str(TABLE1 / "run.toml"),
            "--original",
            str(TABLE1 / "table1.csv"),
            "--released",
            str(TABLE1 / "table2.csv"),
            *extra,
        ]
    )


def _without(monkeypatch: pytest.MonkeyPatch, *packages: str) -> None:
    """Make ``import PACKAGE`` (and its submodules) fail as if it were not installed."""
    for name in list(sys.modules):
        if name.split(".")[0] in packages:
            monkeypatch.delitem(sys.modules, name)
    for name in packages:
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: ImportError


@pytest.mark.parametrize("missing", ["sklearn", "scipy"])
def test_evaluate_without_the_eval_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], missing: str
) -> None:
    _without(monkeypatch, missing)
    rc = _evaluate()
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "pip install 'fedanon[eval]'" in err and missing in err
    assert "Traceback" not in err and "internal error" not in err


def test_experiment_without_matplotlib(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _without(monkeypatch, "matplotlib")
    rc = main(["experiment", "dr", "--out", str(tmp_path / "x"), "--quick", "--rows", "50"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "pip install 'fedanon[eval]'" in err and "matplotlib" in err
    assert not (tmp_path / "x").exists()


def test_evaluate_json_is_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import fedanon.evaluation.evaluate as evaluate

    calls: list[object] = []
    real = evaluate.evaluate_files
    monkeypatch.setattr(evaluate, "evaluate_files", lambda *a: calls.append(a) or real(*a))
    rc = _evaluate("--json", str(tmp_path))
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "--json is a directory" in err and "Traceback" not in err
    assert calls == []  # refused before the (possibly long) evaluation


def test_evaluate_json_in_a_missing_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = _evaluate("--json", str(tmp_path / "no" / "m.json"))
    err = capsys.readouterr().err
    assert rc == 2 and "folder does not exist" in err


def test_evaluate_json_over_an_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    released = tmp_path / "released.csv"
    released.write_bytes((TABLE1 / "table2.csv").read_bytes())
    rc = main(
        [
            "evaluate",
            "--spec",
            str(TABLE1 / "run.toml"),
            "--original",
            str(TABLE1 / "table1.csv"),
            "--released",
            str(released),
            "--json",
            str(released),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "refusing to overwrite" in err
    assert released.read_bytes() == (TABLE1 / "table2.csv").read_bytes()
