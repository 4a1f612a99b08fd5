"""``fedanon report --party-config party.toml --ledger``: a hospital's [policy] and its privacy
ledger's rows of the run on the page, after a federated run with real daemons (read while they
still run, read-only: the ledger file is byte-identical after); a missing or corrupt ledger is
exit 2; an error's text a failed Prepare left in the ledger never reaches the page."""

from __future__ import annotations

import dataclasses
import hashlib
import html
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_ledger_run import NAMES, POLICY, ledgered_run

from fedanon.cli.main import main
from fedanon.ledger.store import Store
from fedanon.report.hospital import ledger_section
from fedanon.report.html import render
from fedanon.report.ledger import WITHHELD, read_ledger
from fedanon.report.model import Headline, ReportData

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(adult_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    with ledgered_run(adult_dir, tmp_path_factory.mktemp("ledgered")) as out:
        yield out


def _report(run: dict[str, Path], page: Path, *extra: str) -> int:
    argv = ["report", "--spec", str(run["spec"]), "--released", str(run["released.csv"])]
    argv += ["--run-report", str(run["report.json"]), "--html", str(page), *extra]
    return main(argv)


def _rows(cfg: Path) -> list[dict[str, object]]:
    cmd = [sys.executable, "-m", "fedanon.cli", "party", "ledger", "show", "--config", str(cfg)]
    proc = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_policy_and_the_runs_ledger_rows(run: dict[str, Path], tmp_path: Path) -> None:
    run_id = json.loads(run["report.json"].read_text())["federation"]["run_id"]
    ledger = run["north.ledger"]
    before = _sha(ledger)
    page = tmp_path / "page.html"
    assert _report(run, page, "--party-config", str(run["north.toml"]), "--ledger") == 0
    assert _sha(ledger) == before  # read while the daemon runs, never written
    text = page.read_text()
    # the policy: every key, budgets included, set ones marked as from party.toml
    for f in dataclasses.fields(POLICY):
        if f.name != "source":
            assert f"<td>{f.name}</td>" in text, f.name
    assert '<td>max_releases</td><td class="n">5</td><td>party.toml</td>' in text
    assert "<td>max_total_epsilon</td><td>not set (no limit)</td><td>default</td>" in text
    assert '<td>min_K</td><td class="n">20</td><td>party.toml</td>' in text
    # the run's rows, recounted from the officer's own `ledger show`
    rows = [r for r in _rows(run["north.toml"]) if r["run_id"] == run_id]
    assert [r["event"] for r in rows] == ["reserved", "released"]
    for r in rows:
        row = f'<td class="n">{r["seq"]}</td><td>{str(r["time"])[:19]}Z</td><td>{r["event"]}</td>'
        assert row in text, row
    sent = rows[1]["bytes"]
    assert isinstance(sent, int) and sent > 0
    assert f"<dt>bytes of statistics sent by this hospital</dt><dd>{sent:,}</dd>" in text
    assert f"<dd>{run_id}</dd>" in text
    assert "<dt>distinct releases of this table</dt><dd>1 of max_releases = 5</dd>" in text
    every = _rows(run["north.toml"])
    head = every[-1]
    assert f"<dd>row {head['seq']} hash {head['hash']}</dd>" in text
    assert "<dt>hash chain</dt><dd>intact</dd>" in text
    # nothing of the data source: not its path, not its fingerprint's description
    data = json.loads(str(rows[0]["data"]))
    assert data["file"] not in text and data["sha256"] not in text
    assert "north.csv" not in text and "127.0.0.1" not in text
    assert "<script" not in text.lower()


def test_ledger_given_directly_shows_each_hospitals_rows(
    run: dict[str, Path], tmp_path: Path
) -> None:
    for name in NAMES:
        page = tmp_path / f"{name}.html"
        assert _report(run, page, "--ledger", str(run[f"{name}.ledger"])) == 0
        text = page.read_text()
        assert "<td>reserved</td>" in text and "<td>released</td>" in text
        assert "This hospital&#x27;s policy" not in text  # no --party-config, no policy


def test_another_runs_ledger_is_flagged(run: dict[str, Path], tmp_path: Path) -> None:
    rep = json.loads(run["report.json"].read_text())
    rep["federation"]["run_id"] = "0" * 32
    other = tmp_path / "other.json"
    other.write_text(json.dumps(rep))
    page = tmp_path / "page.html"
    argv = ["report", "--spec", str(run["spec"]), "--released", str(run["released.csv"])]
    argv += ["--run-report", str(other), "--ledger", str(run["north.ledger"]), "--html", str(page)]
    assert main(argv) == 0
    assert f"has no row of run {'0' * 32}" in page.read_text()


def test_bad_ledger_inputs_exit_2(
    run: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "page.html"
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"not a database at all " * 200)
    cases = [
        (("--ledger", str(tmp_path / "missing.sqlite")), r"ledger .*missing\.sqlite: no such file"),
        (("--ledger", str(corrupt)), r"ledger .*corrupt\.sqlite: cannot read it: .*corrupt"),
        (("--ledger",), r"--ledger without a path reads the ledger --party-config names"),
        (("--party-config", str(tmp_path / "nope.toml")), r"--party-config: no such file"),
    ]  # fmt: skip
    for extra, message in cases:
        assert _report(run, page, *extra) == 2, extra
        err = capsys.readouterr().err
        assert re.search(message, err), (extra, err)
        assert not page.exists()
    # a run report without a run id (a centralized run's, or an older leader's)
    rep = json.loads(run["report.json"].read_text())
    del rep["federation"]["run_id"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(rep))
    argv = ["report", "--spec", str(run["spec"]), "--released", str(run["released.csv"])]
    argv += ["--run-report", str(old), "--ledger", str(run["north.ledger"]), "--html", str(page)]
    assert main(argv) == 2
    assert "names no run id (federation.run_id)" in capsys.readouterr().err
    argv = ["report", "--spec", str(run["spec"]), "--released", str(run["released.csv"])]
    argv += ["--ledger", str(run["north.ledger"]), "--html", str(page)]
    assert main(argv) == 2
    assert "--ledger shows the rows of one run" in capsys.readouterr().err
    assert not page.exists()


RUN = "ab" * 16


def _synthetic(path: Path) -> None:
    """A ledger with what a failed or aborted Prepare writes: an error's text quoting a value."""
    store = Store(path)
    with store.transaction() as txn:
        txn.append("start", reason="daemon started (pid 1)")
        txn.append("failed", run_id=RUN, identity="<b>leader</b>", phase="Prepare",
                   reason="north.csv, line 7, column 'age': not a number (value 'SECRET-41x')",
                   bytes=0)  # fmt: skip
        txn.append("aborted", run_id=RUN, phase="Prepare: bad value 'SECRET-7'", bytes=0)
        why = "max_releases: a new release of this table would be release 6"
        txn.append("refused", run_id=RUN, identity="leader", phase="Prepare", reason=why, bytes=0)
    store.close()


def test_error_texts_are_withheld_and_everything_escaped(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    _synthetic(path)
    view = read_ledger(path, RUN)
    assert [e.event for e in view.entries] == ["failed", "aborted", "refused"]
    page = render(
        ReportData(
            "t", "m", "s", "r", Headline("holds", 1, 1, 1, 1.0, 1.0, None, 1.0),
            sections=(ledger_section(view, None, "north"),),
        )
    )  # fmt: skip
    assert "SECRET" not in page
    assert page.count(html.escape(WITHHELD, quote=True)) == 2
    assert "max_releases: a new release of this table would be release 6" in page
    assert "&lt;b&gt;leader&lt;/b&gt;" in page and "<b>leader" not in page


def test_the_report_does_not_write_the_ledger(tmp_path: Path) -> None:
    """Read-only even when the daemon is not running and SQLite would like to recover."""
    path = tmp_path / "l.sqlite"
    _synthetic(path)
    path.chmod(0o444)
    before = _sha(path)
    view = read_ledger(path, RUN)
    assert view.rows == 4 and view.broken is None and _sha(path) == before


def test_the_tables_epsilon_spent_against_its_budget(tmp_path: Path) -> None:
    """Every DP run reserved on the table counts (aborted ones too), as the budgets count."""
    path = tmp_path / "l.sqlite"
    store = Store(path)
    with store.transaction() as txn:
        for run, eps in ((RUN, "1/2"), ("cd" * 16, "1/4")):
            txn.append("reserved", run_id=run, identity="leader", method="dp",
                       params=f"epsilon={eps}", epsilon=eps, data_fp="f" * 64, bytes=0)  # fmt: skip
        txn.append("aborted", run_id="cd" * 16, phase="aborted", bytes=12)
        txn.append("reserved", run_id="ef" * 16, method="lkc", data_fp="0" * 64, release_key="k")
    store.close()
    policy = dataclasses.replace(POLICY, max_epsilon=1.0, max_total_epsilon=1.0)
    section = ledger_section(read_ledger(path, RUN), policy, "north")
    facts = dict(section.facts)
    assert facts["epsilon spent on this table"] == "0.75 of max_total_epsilon = 1 (0.25 left)"
    assert facts["runs reserved on this table"] == "2"
    assert facts["table (data fingerprint)"] == "f" * 16  # the other table is not this run's
