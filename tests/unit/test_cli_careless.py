"""The command line used carelessly (the CLI review): signals whose exception Python
swallowed, option values of the wrong range, output paths no command may write."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from fedanon.io.fsutil import atomic_write
from fedanon.process import run_command


class _Box:
    pass


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_swallowed_in_a_finalizer_publishes_nothing(
    tmp_path: Path, signum: int, code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal whose handler runs inside a weakref callback (Arrow dropping an input
    block): Python prints 'Exception ignored' and goes on; the run published its table with
    exit 0.  Now: nothing published, exit 128 + N."""
    out = tmp_path / "released.csv"
    swallowed: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: swallowed.append(u.exc_type))

    def handler(_args: argparse.Namespace) -> int:
        def gone(_ref: object) -> None:
            os.kill(os.getpid(), signum)
            for _ in range(1000):  # the handler runs here, between two bytecodes
                pass

        box = _Box()
        ref = weakref.ref(box, gone)
        del box  # the callback runs now; its exception is printed and dropped
        assert ref() is None
        atomic_write(out, lambda fh: fh.write("a\n1\n"))
        return 0

    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert run_command(handler, argparse.Namespace(quiet=True)) == code
    finally:
        signal.signal(signal.SIGINT, previous)
    assert list(tmp_path.iterdir()) == []
    assert swallowed and issubclass(swallowed[0], KeyboardInterrupt)  # the case at hand
    # answered by that exit code: a later write in this process (the API) is not refused
    atomic_write(out, lambda fh: fh.write("a\n1\n"))
    assert out.read_text() == "a\n1\n"


def test_no_signal_no_change(tmp_path: Path) -> None:
    out = tmp_path / "released.csv"
    assert (
        run_command(
            lambda _a: atomic_write(out, lambda fh: fh.write("a\n")) or 0,
            argparse.Namespace(quiet=True),
        )
        == 0
    )
    assert out.read_text() == "a\n"


TABLE1 = Path(__file__).parent.parent.parent / "examples" / "table1"


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from fedanon.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_ccp_alpha_out_of_range_is_a_usage_error(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It reached scikit-learn: exit 1 with its traceback."""
    spec, raw = TABLE1 / "run.toml", TABLE1 / "table1.csv"
    argv = ["evaluate", "--spec", str(spec), "--released", str(raw), "--original", str(raw)]
    line = _usage_error([*argv, "--ccp-alpha", value], capsys)
    assert f"argument --ccp-alpha: must be a finite number >= 0 (value '{value}')" in line


@pytest.mark.parametrize("name, flag", [("ce-vs-k", "--rows"), ("dp", "--rows"), ("dp", "--runs")])
@pytest.mark.parametrize("value", ["0", "-5"])
def test_experiment_counts_below_one_are_usage_errors(
    name: str, flag: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--rows 0 was exit 1 (a traceback), --rows -5 ran on 0 rows and exited 0."""
    out = tmp_path / "exp"
    line = _usage_error(["experiment", name, "--out", str(out), flag, value], capsys)
    assert f"argument {flag}: must be at least 1 (value '{value}')" in line
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--output", "--report"])
def test_output_dash_is_refused_not_written_as_a_file(
    flag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--output -` wrote a file named '-' in the working folder (exit 0)."""
    from fedanon.cli.main import main

    monkeypatch.chdir(tmp_path)
    outs = {"--output": "released.csv", "--report": "report.json", flag: "-"}
    argv = ["anonymize", "--spec", str(TABLE1 / "run.toml"), "--input"]
    argv += [str(TABLE1 / "table1.csv"), "--quiet"]
    argv += [w for k, v in outs.items() for w in (k, v)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{flag} - (standard output) is not supported" in err
    assert list(tmp_path.iterdir()) == []


def test_generate_cohort_refuses_an_infinite_epsilon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It wrote `epsilon = inf` into cohort.toml, which anonymize then refused."""
    from fedanon.cli.main import main

    out = tmp_path / "coh"
    assert main(["generate-cohort", "--rows", "10", "--out", str(out), "--epsilon", "inf"]) == 2
    assert "epsilon must be a finite number > 0 (value 'inf')" in capsys.readouterr().err
    assert not out.exists()


def test_generate_cohort_that_cannot_write_is_exit_2_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk (ENOSPC on the third file here) was exit 1 with a traceback and left
    the files written before it; an unwritable folder likewise (PermissionError)."""
    import errno

    from fedanon.cli.main import main
    from fedanon.io import fsutil

    real = fsutil._write_temp

    def full(f: fsutil.Pending) -> str:
        if f.path.name == "sex.txt":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(f)

    monkeypatch.setattr(fsutil, "_write_temp", full)
    out = tmp_path / "coh"
    assert main(["generate-cohort", "--rows", "10", "--out", str(out)]) == 2
    assert "No space left on device; nothing was published" in capsys.readouterr().err
    assert list(out.iterdir()) == []

    blocker = tmp_path / "afile"
    blocker.write_text("x")
    assert main(["generate-cohort", "--rows", "10", "--out", str(blocker / "coh")]) == 2
    assert "cannot write the output" in capsys.readouterr().err


def test_experiment_out_that_cannot_be_written_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--out under a file (or a denied folder, a full disk) was exit 1 with a traceback."""
    from fedanon.cli.main import main

    blocker = tmp_path / "afile"
    blocker.write_text("x")
    argv = ["experiment", "ce-vs-k", "--quick", "--rows", "200", "--out", str(blocker / "exp")]
    assert main(argv) == 2
    assert "cannot write the output" in capsys.readouterr().err


def test_verbose_shows_fedanons_debug_lines_not_every_librarys(tmp_path: Path) -> None:
    """-v turned every library's DEBUG on: matplotlib alone logged ~2,000 font lines."""
    pytest.importorskip("matplotlib")
    t1 = Path(__file__).resolve().parents[2] / "examples" / "table1"
    out = tmp_path / "released.csv"
    cmd = [sys.executable, "-m", "fedanon.cli", "-v", "anonymize", "--spec", str(t1 / "run.toml")]
    cmd += ["--input", str(t1 / "table1.csv"), "--output", str(out)]
    cmd += ["--report", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert " DEBUG matplotlib" not in proc.stderr, proc.stderr[:2000]
