"""What an output path may name: a new file or an existing regular file in an existing
folder -- never a device, FIFO, socket or symbolic link (the publishing rename would replace
it), never a missing folder (not created), never a suffix of a format fedanon does not
write.  Checked before any work, exit 2 naming the path."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fedanon.errors import InputError, OutputError
from fedanon.io.fsutil import atomic_write, check_outputs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedanon.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=cwd,
    )


def _special(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        (tmp_path / "target.csv").write_text("keep\n")
        path.symlink_to(tmp_path / "target.csv")
    elif kind == "dangling":
        path.symlink_to(tmp_path / "nowhere.csv")
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    return path


KINDS = {
    "fifo": "FIFO",
    "symlink": "symbolic link",
    "dangling": "symbolic link",
    "socket": "socket",
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_check_outputs_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    path = _special(tmp_path, kind)
    with pytest.raises(InputError) as err:
        check_outputs({"--output": path}, [])
    text = str(err.value)
    assert KINDS[kind] in text and str(path) in text
    assert "a new file or an existing regular file" in text
    assert err.value.exit_code == 2


def test_check_outputs_refuses_a_device() -> None:
    """Only checked, never written: /dev/null is a character device."""
    with pytest.raises(InputError, match="character device"):
        check_outputs({"--json": Path("/dev/null")}, [])


@pytest.mark.parametrize("kind", ["fifo", "symlink", "dangling"])
def test_atomic_write_never_replaces_a_special_file(tmp_path: Path, kind: str) -> None:
    """A writer that skipped the up-front check still does not rename over it."""
    path = _special(tmp_path, kind)
    with pytest.raises(OutputError):
        atomic_write(path, lambda fh: fh.write("x"))
    assert path.is_symlink() if kind != "fifo" else path.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_atomic_write_creates_no_folder(tmp_path: Path) -> None:
    with pytest.raises(OutputError):
        atomic_write(tmp_path / "missing" / "a.csv", lambda fh: fh.write("x"))
    assert not (tmp_path / "missing").exists()


def test_parent_that_is_a_file_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("hi\n")
    with pytest.raises(InputError) as err:
        check_outputs({"--output": tmp_path / "afile" / "x.csv"}, [])
    assert "is not a directory" in str(err.value) and "create" not in str(err.value)


@pytest.mark.parametrize(
    "name", ["o.tsv", "o.xlsx", "o.xls", "o.json", "o.csv.bz2", "o.xz", "o.zip", "o.parq",
             "o.feather", "o.arrow", "o.TSV.gz"]
)  # fmt: skip
def test_table_suffix_of_another_format_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(InputError) as err:
        check_outputs({"--output": tmp_path / name}, [])
    assert ".csv" in str(err.value) and ".parquet" in str(err.value)


@pytest.mark.parametrize("name", ["o.csv", "o.csv.gz", "o.gz", "o.parquet", "o.pq", "o"])
def test_table_suffixes_written(tmp_path: Path, name: str) -> None:
    check_outputs({"--output": tmp_path / name, "--report": tmp_path / "r.json"}, [])


def test_escape_in_a_file_name_is_escaped(tmp_path: Path) -> None:
    bad = tmp_path / "e\x1b[31mvil" / "o.csv"
    with pytest.raises(InputError) as err:
        check_outputs({"--output": bad}, [])
    assert "\x1b" not in str(err.value) and "\\x1b" in str(err.value)


# the commands: refused before any work, nothing replaced, nothing created


def _lkc(out: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    t1 = EXAMPLES / "table1"
    return _run(
        "anonymize", "--spec", str(t1 / "run.toml"), "--input", str(t1 / "table1.csv"),
        "--output", out, "--quiet", cwd=cwd,
    )  # fmt: skip


def _dp(out: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    adult = EXAMPLES / "adult"
    return _run(
        "anonymize", "--spec", str(adult / "dp.toml"), "--input", str(adult / "adult.csv.gz"),
        "--output", out, "--quiet", *extra, cwd=cwd,
    )  # fmt: skip


def test_lkc_output_fifo_is_refused(tmp_path: Path) -> None:
    fifo = _special(tmp_path, "fifo")
    proc = _lkc(str(fifo), tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "FIFO" in proc.stderr and "Traceback" not in proc.stderr
    assert fifo.is_fifo()


def test_lkc_output_tsv_is_refused(tmp_path: Path) -> None:
    proc = _lkc("o.tsv", tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert ".tsv" in proc.stderr and ".parquet" in proc.stderr
    assert not (tmp_path / "o.tsv").exists()


def test_dp_output_symlink_is_refused(tmp_path: Path) -> None:
    link = _special(tmp_path, "symlink")
    proc = _dp(str(link), tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "symbolic link" in proc.stderr
    assert link.is_symlink() and (tmp_path / "target.csv").read_text() == "keep\n"


@pytest.mark.parametrize("which", ["--output", "--report"])
def test_dp_missing_folder_is_refused_not_created(tmp_path: Path, which: str) -> None:
    extra = ("--report", "missing/r.json") if which == "--report" else ()
    out = "missing/a/dp.csv" if which == "--output" else "dp.csv"
    proc = _dp(out, tmp_path, *extra)
    assert proc.returncode == 2, proc.stderr
    assert "folder does not exist" in proc.stderr and which in proc.stderr
    assert not (tmp_path / "missing").exists() and not (tmp_path / "dp.csv").exists()


def test_dp_parent_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("hi\n")
    proc = _dp("afile/dp.csv", tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "not a directory" in proc.stderr and "File exists" not in proc.stderr


def test_generate_rt_missing_folder_and_fifo(tmp_path: Path) -> None:
    proc = _run("generate-rt", "--n", "10", "--out", "missing/rt.csv", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "folder does not exist" in proc.stderr
    assert not (tmp_path / "missing").exists()
    fifo = _special(tmp_path, "fifo")
    proc = _run("generate-rt", "--n", "10", "--out", str(fifo), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert fifo.is_fifo()


def test_audit_json_symlink_is_refused(tmp_path: Path) -> None:
    t1 = EXAMPLES / "table1"
    shutil.copy(t1 / "table1.csv", tmp_path / "released.csv")
    link = _special(tmp_path, "symlink")
    proc = _run(
        "audit", "--spec", str(t1 / "run.toml"), "--released", "released.csv",
        "--json", str(link), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "symbolic link" in proc.stderr
    assert (tmp_path / "target.csv").read_text() == "keep\n"
