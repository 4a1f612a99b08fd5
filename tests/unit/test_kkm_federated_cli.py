"""`fedanon federate` and `fedanon leader run` refuse a kkm spec with exit 2 and the reason,
before any daemon starts or any party is contacted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fedanon.cli.main import main

FIG1 = Path(__file__).resolve().parent / "kkm_fig1"


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    for f in FIG1.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def _tables(work: Path) -> list[str]:
    args = []
    for name in ("hospital-a", "hospital-b", "hospital-c"):
        path = work / f"{name}.csv"
        path.write_text(f"id,name,Age,Origin,Gender,Disease\n0,{name},19,France,Male,493.2\n")
        args += ["--party", f"{name}={path}"]
    return args


def test_federate_refuses_kkm_with_the_reason(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = work / "out.csv"
    rc = main(["federate", "--spec", str(work / "run.toml"), *_tables(work), "--output", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert "does not decompose" in err and "secure sum" in err


def test_leader_run_refuses_kkm_with_the_reason(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = work / "out.csv"
    for name in ("ca.pem", "leader.pem", "leader.key"):
        (work / name).write_text("unused: refused before any file is read\n")
    parties = "".join(
        f'\n[[party]]\nname = "hospital-{c}"\naddress = "127.0.0.1:{7000 + i}"\n'
        for i, c in enumerate("abc")
    )
    cfg = work / "federation.toml"
    cfg.write_text(
        f'[run]\nspec = "run.toml"\noutput = "out.csv"\n\n[leader]\nname = "leader"\n\n'
        f'[tls]\nca = "ca.pem"\ncert = "leader.pem"\nkey = "leader.key"\n{parties}',
        encoding="utf-8",
    )
    rc = main(["leader", "run", "--config", str(cfg)])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert "does not decompose" in err
