"""Issue 24 item 8: an output the file system refuses (file too large, disk full, read-only
or denied location) ends the command with exit 2 naming the file and the reason, and
nothing is published: no table, no report, no temporary left behind."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

from fedanon.errors import OutputError
from fedanon.io import fsutil
from fedanon.io.fsutil import Pending, atomic_write, atomic_write_all

EXAMPLES = Path(__file__).parent.parent.parent / "examples"
ADULT = EXAMPLES / "adult"
LIMIT = 20_000  # bytes: below every Adult release, above what the commands write otherwise


# the file size limit is set by the child itself, then the CLI runs: a ``preexec_fn`` would run
# Python between fork and exec in a copy of this process, whose gRPC (loaded by other tests)
# then polled closed descriptors and aborted the child (-6) now and then
_LIMITED = (
    "import resource, sys\n"
    "n = int(sys.argv.pop(1))\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))\n"
    "from fedanon.cli.main import entry\n"
    "entry()\n"
)


def _cli(
    *args: str, fsize: int | None = LIMIT, quiet: bool = True
) -> subprocess.CompletedProcess[str]:
    start = ["-m", "fedanon.cli"] if fsize is None else ["-c", _LIMITED, str(fsize)]
    return subprocess.run(
        [sys.executable, *start, *args, *(["--quiet"] if quiet else [])],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _refused(proc: subprocess.CompletedProcess[str], named: Path, folder: Path) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert str(named) in proc.stderr and "File too large" in proc.stderr, proc.stderr
    left = sorted(p.name for p in folder.iterdir() if p.name.startswith(("out", ".out", "rep")))
    assert left == [], left  # neither the table, nor the report, nor a temporary


@pytest.mark.parametrize("name", ["out.csv", "out.csv.gz", "out.parquet"])
def test_lkc_release_too_large(tmp_path: Path, name: str) -> None:
    out, rep = tmp_path / name, tmp_path / "rep.json"
    spec, data = ADULT / "run.toml", ADULT / "adult.csv.gz"
    limit = 2_000 if name.endswith(".parquet") else LIMIT  # the Parquet release is ~50 KB
    proc = _cli(
        "anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out),
        "--report", str(rep), fsize=limit,
    )  # fmt: skip
    _refused(proc, out, tmp_path)


def test_lkc_report_too_large_publishes_neither(tmp_path: Path) -> None:
    """The table fits, the report does not: neither is published."""
    out, rep = tmp_path / "out.csv", tmp_path / "rep.json"
    spec, data = EXAMPLES / "table1" / "run.toml", EXAMPLES / "table1" / "table1.csv"
    ok = _cli(
        "anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out),
        "--report", str(rep), fsize=None,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    sizes = out.stat().st_size, rep.stat().st_size
    out.unlink()
    rep.unlink()
    if sizes[1] <= sizes[0]:
        pytest.skip(f"the report ({sizes[1]} B) is not larger than the table ({sizes[0]} B)")
    proc = _cli(
        "anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out),
        "--report", str(rep), fsize=sizes[0] + 1,
    )  # fmt: skip
    _refused(proc, rep, tmp_path)


def test_dp_release_too_large(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    proc = _cli(
        "dp-anonymize", "--spec", str(ADULT / "dp.toml"), "--input", str(ADULT / "adult.csv.gz"),
        "--output", str(out), "--expand", "--seed", "3", fsize=LIMIT,
    )  # fmt: skip
    _refused(proc, out, tmp_path)


def test_kkm_release_too_large(tmp_path: Path) -> None:
    work = tmp_path / "rt"
    shutil.copytree(EXAMPLES / "rt", work)
    (tmp_path / "adult").symlink_to(ADULT)
    data = tmp_path / "rt.csv"
    gen = _cli(
        "generate-rt", "--n", "2000", "--seed", "1", "--out", str(data), fsize=None, quiet=False
    )
    assert gen.returncode == 0, gen.stderr
    out = work / "out.csv"
    proc = _cli(
        "anonymize", "--spec", str(work / "run.toml"), "--input", str(data), "--output", str(out),
        fsize=4_000,
    )  # fmt: skip
    if proc.returncode == 0:
        pytest.fail(f"the (k,k^m) release fit in 4 KB: {out.stat().st_size} B")
    _refused(proc, out, work)


def test_unwritable_location_is_exit_2(tmp_path: Path) -> None:
    """/proc passes the up-front checks (a folder, writable to root) but refuses the file."""
    out = Path("/proc/out.csv")
    proc = _cli(
        "anonymize", "--spec", str(ADULT / "run.toml"), "--input", str(ADULT / "adult.csv.gz"),
        "--output", str(out), fsize=None,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "/proc/out.csv" in proc.stderr
    assert "cannot write" in proc.stderr


# unit level: each failure point of an atomic write -------------------------------------------


def _fail(code: int) -> Any:
    def write(fh: IO[Any]) -> None:
        fh.write("partial")
        raise OSError(code, os.strerror(code))

    return write


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG, errno.EROFS, errno.EACCES])
def test_failing_write_is_an_output_error(tmp_path: Path, code: int) -> None:
    with pytest.raises(OutputError) as err:
        atomic_write(tmp_path / "a.csv", _fail(code))
    assert err.value.exit_code == 2
    assert str(tmp_path / "a.csv") in str(err.value) and os.strerror(code) in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_failing_second_write_publishes_neither(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="No space left"):
        atomic_write_all(
            [
                Pending(tmp_path / "t.csv", lambda fh: fh.write("a,b\n")),
                Pending(tmp_path / "r.json", _fail(errno.ENOSPC)),
            ]
        )
    assert list(tmp_path.iterdir()) == []


def test_failing_rename_publishes_neither(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.replace

    def replace(src: str, dst: Any) -> None:
        if str(dst).endswith("r.json"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        real(src, dst)

    monkeypatch.setattr(fsutil.os, "replace", replace)
    with pytest.raises(OutputError, match="Read-only file system"):
        atomic_write_all(
            [
                Pending(tmp_path / "t.csv", lambda fh: fh.write("a,b\n")),
                Pending(tmp_path / "r.json", lambda fh: fh.write("{}")),
            ]
        )
    assert list(tmp_path.iterdir()) == []


def test_failing_folder_is_an_output_error(tmp_path: Path) -> None:
    """The folder vanished (replaced by a file) after the up-front checks."""
    (tmp_path / "gone").write_text("")
    with pytest.raises(OutputError) as err:
        atomic_write(tmp_path / "gone" / "a.csv", lambda fh: fh.write("x"))
    assert str(tmp_path / "gone" / "a.csv") in str(err.value)


def test_held_outputs_failing_rename_publish_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.replace

    def replace(src: str, dst: Any) -> None:
        if str(dst).endswith("page.html"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(src, dst)

    monkeypatch.setattr(fsutil.os, "replace", replace)
    out = tmp_path / "t.csv"
    with pytest.raises(OutputError, match=r"page\.html"), fsutil.hold([out]) as held:
        atomic_write(out, lambda fh: fh.write("a,b\n"))
        held.publish([Pending(tmp_path / "page.html", lambda fh: fh.write("<p>"))])
    assert list(tmp_path.iterdir()) == []
