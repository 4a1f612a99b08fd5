"""`fedanon federate` as a user runs it: output paths, duplicate inputs, flag validation, and
what SIGTERM / SIGKILL leave behind (daemons, the temporary CA and private keys)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, fedanon_cli, read_rows, table1_spec, write_rows


def _split(src: Path, tmp: Path, n: int) -> list[Path]:
    header, rows = read_rows(src)
    out = []
    for i in range(n):
        write_rows(tmp / f"d{i}.csv", header, rows[i::n])
        out.append(tmp / f"d{i}.csv")
    return out


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _party_args(paths: list[Path]) -> list[str]:
    out = []
    for i, p in enumerate(paths):
        out += ["--party", f"h{i}={p}"]
    return out


def _env(tmpdir: Path) -> dict[str, str]:
    tmpdir.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmpdir)}


def _processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains ``text`` or that hold a file whose path
    does (a daemon forked by `fedanon federate` has its parent's command line, but its
    output goes to its log in the work directory); zombies excluded."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            fds = list((proc / "fd").iterdir())
        except OSError:
            continue
        files = " ".join(_readlink(fd) for fd in fds)
        if (text in cmd or text in files) and state != "Z":
            found.append(int(proc.name))
    return found


def _describe(pid: int, tmpdir: Path) -> str:
    """A live process for a failure message: parent, state, its threads (name and where each
    waits) and the tail of every log in the work directory."""
    proc = Path("/proc") / str(pid)
    lines = [f"pid {pid}:"]
    try:
        status = (proc / "status").read_text().splitlines()
        lines += [s for s in status if s.startswith(("State:", "PPid:", "Threads:", "SigCgt:"))]
        for task in sorted((proc / "task").iterdir()):
            name = (task / "comm").read_text().strip()
            wchan = (task / "wchan").read_text().strip()
            lines.append(f"  thread {task.name} {name}: {wchan}")
    except OSError as exc:
        lines.append(f"  ({exc})")
    for log in sorted(tmpdir.glob("*/*.log")):
        tail = log.read_text(errors="replace").splitlines()[-6:]
        lines += [f"  {log.name}: {line}" for line in tail]
    return "\n".join(lines)


def _readlink(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:  # closed meanwhile
        return ""


# 2. output paths -----------------------------------------------------------------------------


def test_federate_output_over_a_party_data_file(tmp_path: Path) -> None:
    spec = table1_spec(tmp_path)
    data = _split(EXAMPLES / "table1" / "table1.csv", tmp_path, 3)
    before = [_digest(p) for p in data]
    tmpdir = tmp_path / "tmp"
    proc = fedanon_cli(
        "federate",
        "--spec",
        str(spec),
        *_party_args(data),
        "--output",
        str(data[1]),
        env=_env(tmpdir),
    )
    assert proc.returncode == 2, proc.stderr
    assert "refusing to overwrite" in proc.stderr and "--output" in proc.stderr
    assert [_digest(p) for p in data] == before
    assert list(tmpdir.iterdir()) == []  # refused before any daemon or key existed


@pytest.mark.parametrize("which", ["report=output", "report=spec", "report=dir", "no-folder"])
def test_federate_bad_output_or_report(tmp_path: Path, which: str) -> None:
    spec = table1_spec(tmp_path)
    data = _split(EXAMPLES / "table1" / "table1.csv", tmp_path, 3)
    out = tmp_path / "out.csv"
    report = {
        "report=output": out,
        "report=spec": spec,
        "report=dir": tmp_path,
        "no-folder": tmp_path / "rep.json",
    }[which]
    if which == "no-folder":
        out = tmp_path / "missing" / "out.csv"
    spec_before = _digest(spec)
    proc = fedanon_cli(
        "federate",
        "--spec",
        str(spec),
        *_party_args(data),
        "--output",
        str(out),
        "--report",
        str(report),
        env=_env(tmp_path / "tmp"),
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists() and _digest(spec) == spec_before
    assert not (tmp_path / "rep.json").exists()


# 15. the same table for two parties; --max-field-bytes ---------------------------------------


@pytest.mark.parametrize("how", ["same-path", "other-spelling", "copy"])
def test_federate_refuses_one_table_for_two_parties(tmp_path: Path, how: str) -> None:
    spec = table1_spec(tmp_path)
    data = _split(EXAMPLES / "table1" / "table1.csv", tmp_path, 3)
    if how == "same-path":
        data[2] = data[0]
    elif how == "other-spelling":
        (tmp_path / "sub").mkdir()
        data[2] = tmp_path / "sub" / ".." / data[0].name
    else:
        shutil.copy(data[0], tmp_path / "copy.csv")
        data[2] = tmp_path / "copy.csv"
    proc = fedanon_cli(
        "federate",
        "--spec",
        str(spec),
        *_party_args(data),
        "--output",
        str(tmp_path / "out.csv"),
        env=_env(tmp_path / "tmp"),
    )
    assert proc.returncode == 2, proc.stderr
    assert "h0" in proc.stderr and "h2" in proc.stderr and "same" in proc.stderr
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("value", ["0", "-5", "1000000", "ten"])
def test_federate_max_field_bytes_is_validated(tmp_path: Path, value: str) -> None:
    spec = table1_spec(tmp_path)
    data = _split(EXAMPLES / "table1" / "table1.csv", tmp_path, 3)
    proc = fedanon_cli(
        "federate",
        "--spec",
        str(spec),
        *_party_args(data),
        "--output",
        str(tmp_path / "out.csv"),
        "--max-field-bytes",
        value,
        env=_env(tmp_path / "tmp"),
    )
    assert proc.returncode == 2, proc.stderr
    assert "--max-field-bytes" in proc.stderr and "65536" in proc.stderr
    assert not (tmp_path / "out.csv").exists()


# 3. SIGTERM and SIGKILL ----------------------------------------------------------------------


def _start_big_federation(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    case = tmp_path / "adult"
    shutil.copytree(EXAMPLES / "adult", case)
    header, rows = read_rows(case / "adult.csv.gz")
    data = []
    for i in range(3):  # eight copies of a third of Adult each: the run outlasts the signal delay
        write_rows(tmp_path / f"d{i}.csv", header, rows[i::3] * 8)
        data.append(tmp_path / f"d{i}.csv")
    tmpdir = tmp_path / "tmp"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fedanon.cli",
            "federate",
            "--spec",
            str(case / "run.toml"),
            *_party_args(data),
            "--output",
            str(tmp_path / "out.csv"),
            "--quiet",
        ],
        env=_env(tmpdir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    end = time.monotonic() + 60
    while len(list(tmpdir.glob("fedanon-federate-*/*.port"))) < 3:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < end, "daemons did not start"
        time.sleep(0.05)
    assert len(_processes_mentioning(str(tmpdir))) == 3
    return proc, tmpdir, tmp_path / "out.csv"


def _wait_gone(text: str, seconds: float) -> list[int]:
    end = time.monotonic() + seconds
    while (left := _processes_mentioning(text)) and time.monotonic() < end:
        time.sleep(0.1)
    return left


@pytest.mark.slow
def test_sigterm_stops_daemons_and_removes_keys(tmp_path: Path) -> None:
    proc, tmpdir, out = _start_big_federation(tmp_path)
    # the daemons listen and load their 120,000 rows each: the run is under way, and far
    # from done (a fixed 0.5 s more was once after its end on a fast machine: exit 0)
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=60)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert rc == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    orphans = _wait_gone(str(tmpdir), 5)
    for pid in orphans:  # do not leave them running if the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert orphans == []
    assert list(tmpdir.iterdir()) == []  # CA, keys, configs and logs removed
    assert not out.exists()


@pytest.mark.slow
def test_daemons_exit_when_federate_is_killed(tmp_path: Path) -> None:
    proc, tmpdir, out = _start_big_federation(tmp_path)
    proc.kill()  # SIGKILL: no handler runs in federate
    proc.wait(timeout=10)
    orphans = _wait_gone(str(tmpdir), 15)
    report = [_describe(pid, tmpdir) for pid in orphans]  # what they were doing, for the log
    for pid in orphans:
        os.kill(pid, signal.SIGKILL)
    assert orphans == [], "party daemons outlived the federate process that started them:\n" + (
        "\n".join(report)
    )
    assert not out.exists()


# 5. a party's table without its header line ------------------------------------------------


def test_headerless_party_table_is_named_without_its_cells(tmp_path: Path) -> None:
    spec = table1_spec(tmp_path)
    data = _split(EXAMPLES / "table1" / "table1.csv", tmp_path, 3)
    lines = data[1].read_text().splitlines()
    first = "987654," + lines[1].split(",", 1)[1]
    data[1].write_text("\n".join([first, *lines[2:]]) + "\n")
    proc = fedanon_cli(
        "federate",
        "--spec",
        str(spec),
        *_party_args(data),
        "--output",
        str(tmp_path / "out.csv"),
        env=_env(tmp_path / "tmp"),
    )
    assert proc.returncode == 2, proc.stderr
    assert "h1" in proc.stderr and "the first line must be the header" in proc.stderr
    for cell in first.split(","):
        assert f"'{cell}'" not in proc.stderr, (cell, proc.stderr)
    assert "987654" not in proc.stderr
    assert not (tmp_path / "out.csv").exists()


# 6. --quiet ----------------------------------------------------------------------------------


def test_quiet_federate_prints_no_summary_and_logs_no_info(tmp_path: Path) -> None:
    """`--quiet`: no summary on stdout, and of the log only warnings and errors (without it
    the certificates issued and the daemons' start are logged at INFO)."""
    spec = table1_spec(tmp_path)
    data = _split(EXAMPLES / "table1" / "table1.csv", tmp_path, 3)
    args = ["federate", "--spec", str(spec), *_party_args(data)]
    loud = fedanon_cli(*args, "--output", str(tmp_path / "a.csv"), env=_env(tmp_path / "t1"))
    assert loud.returncode == 0, loud.stderr
    assert " INFO " in loud.stderr and "released" in loud.stdout
    quiet = fedanon_cli(
        *args, "--output", str(tmp_path / "b.csv"), "--quiet", env=_env(tmp_path / "t2")
    )
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "" and " INFO " not in quiet.stderr, quiet.stderr
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_federate_with_fresh_daemons_outside_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Daemons started fresh (no fork: a program with threads, or not Linux) run the
    installed ``fedanon.party``: the run works from any directory, not only the checkout
    (``python -m party`` imported the checkout's folder by accident)."""
    from fedanon.leader.federate import federate

    spec = table1_spec(tmp_path)
    data = _split(EXAMPLES / "table1" / "table1.csv", tmp_path, 3)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    out = tmp_path / "out.csv"
    parties = [(f"h{i}", p) for i, p in enumerate(data)]
    rep = federate(spec, parties, out, None, fork_daemons=False)
    central = tmp_path / "central.csv"
    proc = fedanon_cli(
        "anonymize", "--spec", str(spec), "--input", str(EXAMPLES / "table1" / "table1.csv"),
        "--output", str(central), "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert rep["federation"]["parties"] == ["h0", "h1", "h2"]
    released = read_rows(out)[1]
    assert released and sorted(released) == sorted(read_rows(central)[1])
