"""Output paths are checked before any work: never over a file the run reads, report and
output distinct, folders that exist; and the table and report are published together."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fedanon.apispec import Spec
from fedanon.centralized import anonymize_file
from fedanon.errors import OutputError
from fedanon.io.fsutil import Pending, atomic_write_all
from fedanon.methods import publish


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedanon.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture()
def case(table1_dir: Path, tmp_path: Path) -> Path:
    for f in table1_dir.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()
    }


def _anonymize(case: Path, output: Path, report: Path | None) -> subprocess.CompletedProcess[str]:
    args = ["anonymize", "--spec", str(case / "run.toml"), "--input", str(case / "table1.csv")]
    args += ["--output", str(output), "--quiet"]
    if report is not None:
        args += ["--report", str(report)]
    return _run(*args)


@pytest.mark.parametrize("target", ["job.txt", "age.txt", "run.toml", "table1.csv"])
def test_anonymize_output_over_a_file_it_reads(case: Path, target: str) -> None:
    before = _digests(case)
    proc = _anonymize(case, case / target, None)
    assert proc.returncode == 2, proc.stderr
    assert "refusing to overwrite" in proc.stderr and "--output" in proc.stderr
    assert _digests(case) == before


def test_anonymize_report_over_a_taxonomy_via_other_spelling(case: Path) -> None:
    (case / "sub").mkdir()
    before = _digests(case)
    proc = _anonymize(case, case / "out.csv", case / "sub" / ".." / "sex.txt")
    assert proc.returncode == 2, proc.stderr
    assert "--report" in proc.stderr
    assert _digests(case) == before and not (case / "out.csv").exists()


def test_anonymize_report_equal_to_output(case: Path) -> None:
    proc = _anonymize(case, case / "out.csv", case / "out.csv")
    assert proc.returncode == 2, proc.stderr
    assert "--report and --output are the same file" in proc.stderr
    assert not (case / "out.csv").exists()


def test_anonymize_report_is_a_directory(case: Path) -> None:
    (case / "rep").mkdir()
    proc = _anonymize(case, case / "out.csv", case / "rep")
    assert proc.returncode == 2, proc.stderr
    assert "--report is a directory" in proc.stderr and "Traceback" not in proc.stderr
    assert not (case / "out.csv").exists()


def test_anonymize_output_folder_missing(case: Path) -> None:
    proc = _anonymize(case, case / "nope" / "out.csv", None)
    assert proc.returncode == 2, proc.stderr
    assert "folder does not exist" in proc.stderr
    assert not (case / "nope").exists()


def test_table_and_report_are_published_together(
    case: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: Path, rep: object) -> Pending:
        def write(fh: object) -> None:
            raise OSError(28, "No space left on device")

        return Pending(path, write)

    monkeypatch.setattr(publish, "report_file", broken)  # the one publisher of every method
    with pytest.raises(OutputError, match="No space"):  # exit 2 naming the file
        anonymize_file(
            Spec.from_toml(case / "run.toml"),
            case / "table1.csv",
            case / "out.csv",
            case / "rep.json",
            False,
        )
    assert not (case / "out.csv").exists() and not (case / "rep.json").exists()
    assert not [p for p in case.iterdir() if p.name.endswith(".tmp")]


def test_atomic_write_all_publishes_nothing_on_failure(tmp_path: Path) -> None:
    first = tmp_path / "a.txt"
    first.write_text("old")

    def fail(fh: object) -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        atomic_write_all(
            [Pending(first, lambda fh: fh.write("new")), Pending(tmp_path / "b.txt", fail)]
        )
    assert first.read_text() == "old" and not (tmp_path / "b.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


FEDERATION = """
[run]
spec = "run.toml"
output = "{output}"
{report}
[leader]
name = "leader"

[tls]
ca = "certs/ca.pem"
cert = "certs/leader.pem"
key = "certs/leader.key"

[[party]]
name = "a"
address = "127.0.0.1:1"
[[party]]
name = "b"
address = "127.0.0.1:2"
[[party]]
name = "c"
address = "127.0.0.1:3"
"""


@pytest.mark.parametrize(
    ("output", "report", "needle"),
    [
        ("run.toml", "", "refusing to overwrite"),
        ("federation.toml", "", "refusing to overwrite"),
        ("certs/leader.key", "", "refusing to overwrite"),
        ("certs/ca.pem", "", "refusing to overwrite"),
        ("certs/leader.pem", "", "refusing to overwrite"),
        ("job.txt", "", "refusing to overwrite"),
        ("out.csv", 'report = "out.csv"', "same file"),
        ("out.csv", 'report = "certs"', "is a directory"),
    ],
)
def test_leader_run_output_over_its_inputs(
    case: Path, output: str, report: str, needle: str
) -> None:
    certs = case / "certs"
    certs.mkdir()
    for name in ("ca.pem", "leader.pem", "leader.key"):
        (certs / name).write_text(f"placeholder {name}\n")
    cfg = case / "federation.toml"
    cfg.write_text(FEDERATION.format(output=output, report=report))
    before = _digests(case) | {f"certs/{k}": v for k, v in _digests(certs).items()}
    proc = _run("leader", "run", "--config", str(cfg), "--quiet")
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr, proc.stderr
    after = _digests(case) | {f"certs/{k}": v for k, v in _digests(certs).items()}
    assert after == before
