"""Acceptance of issue 11 item 1: a non-editable wheel works on its own.

The wheel is built from a copy of the sources, installed (``pip install --no-deps``) into a fresh
venv whose dependencies come from this venv's site-packages through a ``.pth`` line (``.pth``
files inside a directory added that way are not processed, so this venv's editable finder does
not load: the test checks that ``fedanon`` is not importable before the install).  Everything then
runs from a folder outside the checkout, with the examples shipped in the wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "common", "party", "leader", "examples")

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONNOUSERSITE"] = "1"
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _build_wheel(tmp: Path) -> Path:
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    dist = tmp / "dist"
    pip = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation"]
    proc = _run([*pip, "-w", str(dist), str(src)], cwd=tmp)
    # every data folder is configured (no "importable but absent from packages" warning)
    assert "absent from the `packages` configuration" not in proc.stdout + proc.stderr
    (wheel,) = dist.glob("fedanon-*.whl")
    return wheel


def _fresh_venv(tmp: Path) -> tuple[Path, Path]:
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    python = venv / "bin" / "python"
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(purelib, "dependencies.pth").write_text(ours + "\n")
    return python, venv / "bin"


SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import pandas as pd

    for name in ("common", "party", "leader"):
        try:
            __import__(name)
        except ImportError:
            pass
        else:
            sys.exit(f"import {name} worked")

    import fedanon
    from fedanon.bundled import EXAMPLES

    adult = EXAMPLES / "adult"
    spec = fedanon.Spec.from_toml(adult / "run.toml")
    df = pd.read_csv(adult / "adult.csv.gz")
    release = fedanon.anonymize(df, spec)
    release.write("api.csv", "api.json")
    result = fedanon.audit(release.table, spec)
    from fedanon.dp.experiment import DEFAULT_SPEC as DP_SPEC
    from fedanon.evaluation.experiments import DEFAULT_DATA, DEFAULT_SPEC
    from fedanon.kkm.experiments import SPEC as KKM_SPEC
    from fedanon.kkm.generator import ADULT
    defaults = [DEFAULT_SPEC, DEFAULT_DATA, DP_SPEC, KKM_SPEC, ADULT]
    json.dump({
        "fedanon": fedanon.__file__,
        "examples": str(EXAMPLES),
        "defaults": [str(p) for p in defaults if p.is_file()],
        "ok": result.ok,
        "min_group_size": result.min_group_size,
        "max_confidence": result.max_confidence,
        "violations": len(result.violations),
        "report": release.report,
        "rows": len(release.table),
    }, open("api-out.json", "w"))
    """
)


def test_wheel_install_outside_the_checkout(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    python, bindir = _fresh_venv(tmp_path)
    work = tmp_path / "elsewhere"
    work.mkdir()
    # the editable install of this venv is invisible in the new one
    probe = _run([str(python), "-c", "import fedanon"], cwd=work, check=False)
    assert probe.returncode != 0 and "No module named 'fedanon'" in probe.stderr
    # --ignore-installed: pip must not touch this venv's (editable) fedanon it can see
    _run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", str(wheel)],
        cwd=work,
    )

    _run([str(python), "-c", SCRIPT], cwd=work)
    out = json.loads((work / "api-out.json").read_text())
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    installed = Path(out["fedanon"]).resolve()
    assert installed.is_relative_to(tmp_path / "venv"), installed
    assert not installed.is_relative_to(REPO) and not installed.is_relative_to(site)
    examples = Path(out["examples"])
    assert examples == installed.parent / "examples"  # package data, not the checkout
    assert len(out["defaults"]) == 5 and all(
        Path(p).is_relative_to(examples) for p in out["defaults"]
    )
    assert out["ok"] and out["violations"] == 0 and out["min_group_size"] >= 20

    # the CLI on the same (packaged) files gives the same bytes
    fedanon = str(bindir / "fedanon")
    spec, data = examples / "adult" / "run.toml", examples / "adult" / "adult.csv.gz"
    args = ["--spec", str(spec), "--input", str(data), "--output", "cli.csv", "--quiet"]
    _run(
        [fedanon, "anonymize", *args, "--report", "cli.json"],
        cwd=work,
    )
    assert (work / "cli.csv").read_bytes() == (work / "api.csv").read_bytes()
    cli_report = json.loads((work / "cli.json").read_text())
    api_report = out["report"]
    for timing in ("timings", "anonymize_seconds"):  # wall clock, not content
        cli_report.pop(timing, None)
        api_report.pop(timing, None)
    assert cli_report == api_report
    assert out["rows"] == len((work / "cli.csv").read_text().splitlines()) - 1

    audit = _run(
        [fedanon, "audit", "--spec", str(spec), "--released", "cli.csv", "--json", "a.json"],
        cwd=work,
    )
    assert audit.returncode == 0
    assert json.loads((work / "a.json").read_text())["ok"] is True
    table1 = examples / "table1"
    raw_args = ["--spec", str(table1 / "run.toml"), "--released", str(table1 / "table1.csv")]
    raw = _run(
        [fedanon, "audit", *raw_args],
        cwd=work,
        check=False,
    )
    assert raw.returncode == 3, raw.stderr

    # the experiment commands' defaults come from the wheel: generate-rt reads the bundled
    # Adult and ICD-9-CM hierarchy (fedanon.kkm.data)
    assert "bundled" in _run([fedanon, "experiment", "--help"], cwd=work).stdout
    _run([fedanon, "generate-rt", "--n", "30", "--seed", "1", "--out", "rt.csv"], cwd=work)
    assert len((work / "rt.csv").read_text().splitlines()) == 31
