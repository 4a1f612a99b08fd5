"""A plug-in installed as a package: entry points ``fedanon.models`` / ``fedanon.scores``.
Any process finds it by name -- no registration line, no per-daemon setting -- and the run
hash binds the plug-in's distribution, version and object, so parties running different
versions under one name cannot start a run together."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedanon import plugins
from fedanon.errors import SpecError
from fedanon.model.spec import parse_spec, run_hash
from fedanon.privacy.base import model_names
from fedanon.scores.base import score_names

TESTS = Path(__file__).parents[1]
ATTRS = (
    '[[attribute]]\nname = "a"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 10]\n'
    '[[attribute]]\nname = "y"\nrole = "class"\n'
)


def install(site: Path, version: str, models: str, scores: str = "") -> Path:
    """A distribution's metadata as pip leaves it in site-packages (the code is in tests/)."""
    info = site / f"fedanon_kanon_plugin-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: fedanon-kanon-plugin\nVersion: {version}\n"
    )
    (info / "entry_points.txt").write_text(
        f"[fedanon.models]\n{models}\n" + (f"[fedanon.scores]\n{scores}\n" if scores else "")
    )
    return site


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = install(
        tmp_path / "site",
        "1.0",
        "kanon_ep = kanon_plugin:KAnonymity\nbroken = kanon_plugin:NoSuchClass",
        "maxfreq_ep = test_plugins:MaxFrequency",
    )
    monkeypatch.syspath_prepend(str(site))
    plugins.refresh()
    yield site
    monkeypatch.undo()
    plugins.refresh()


def test_an_installed_model_and_score_are_found_by_name(installed: Path) -> None:
    assert "kanon_ep" in model_names() and "maxfreq_ep" in score_names()
    spec = parse_spec(
        '[privacy]\nmodel = "kanon_ep"\nK = 4\n[utility]\nscore = "maxfreq_ep"\n' + ATTRS
    )
    assert spec.privacy.params.K == 4  # its own params class: K only
    canon = spec.canonical()
    assert canon["privacy"]["implementation"] == (
        "fedanon-kanon-plugin 1.0 kanon_plugin:KAnonymity"
    )
    assert canon["score_implementation"] == "fedanon-kanon-plugin 1.0 test_plugins:MaxFrequency"
    with pytest.raises(SpecError, match=r"'broken' .* cannot be loaded"):
        parse_spec('[privacy]\nmodel = "broken"\nK = 4\n' + ATTRS)


def test_another_version_of_the_plugin_is_another_run(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = '[privacy]\nmodel = "kanon_ep"\nK = 4\n' + ATTRS
    v1 = run_hash(parse_spec(text), {})
    assert v1 == run_hash(parse_spec(text), {})
    other = install(tmp_path / "site2", "1.1", "kanon_ep = kanon_plugin:KAnonymity")
    for info in installed.iterdir():  # pip upgraded the plug-in: one version installed
        for f in info.iterdir():
            f.unlink()
        info.rmdir()
    monkeypatch.syspath_prepend(str(other))
    plugins.refresh()
    assert run_hash(parse_spec(text), {}) != v1


def test_two_distributions_defining_one_name_differently_are_refused(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "site2" / "other_plugin-2.0.dist-info"
    other.mkdir(parents=True)
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: other-plugin\nVersion: 2.0\n")
    (other / "entry_points.txt").write_text("[fedanon.models]\nkanon_ep = kanon_plugin:Opaque\n")
    monkeypatch.syspath_prepend(str(other.parent))
    plugins.refresh()
    with pytest.raises(SpecError, match="two installed plug-ins define"):
        parse_spec('[privacy]\nmodel = "kanon_ep"\nK = 4\n' + ATTRS)


def test_a_fresh_process_runs_the_installed_model(
    installed: Path, table1_dir: Path, tmp_path: Path
) -> None:
    """What a daemon, the leader or the CLI does: nothing registers the plug-in in the
    process; the spec names it and the installed metadata finds it."""
    spec = tmp_path / "run.toml"
    text = (table1_dir / "run.toml").read_text()
    _, rest = text.split("[utility]", 1)
    spec.write_text('[privacy]\nmodel = "kanon_ep"\nK = 3\n[utility]' + rest)
    for f in ("job.txt", "sex.txt", "age.txt"):
        (tmp_path / f).write_text((table1_dir / f).read_text())
    out = tmp_path / "out.csv"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), str(TESTS)])}
    proc = subprocess.run(
        [sys.executable, "-m", "fedanon.cli", "anonymize", "--spec", str(spec), "--input",
         str(table1_dir / "table1.csv"), "--output", str(out)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "kanon_ep: K=3  min group size" in proc.stdout
    env["PYTHONPATH"] = str(TESTS)  # not installed: an unknown model, exit 2
    proc = subprocess.run(
        [sys.executable, "-m", "fedanon.cli", "anonymize", "--spec", str(spec), "--input",
         str(table1_dir / "table1.csv"), "--output", str(tmp_path / "no.csv")],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "unknown privacy model" in proc.stderr
