"""The daemons `fedanon federate` starts with a pinned spec write the digest of the table they
load (``--digest-file``): the same as :func:`fedanon.io.sametable.loaded_digest` of the table
encoded here, and "-" (nothing loaded ahead: the check reads that file itself) for a daemon
whose table cannot be read."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES, TEST_POLICY

from fedanon.apispec import Spec
from fedanon.io.sametable import loaded_digest
from fedanon.io.table import encode_table
from fedanon.leader.federate import daemons, loaded
from fedanon.methods import registry

pytestmark = pytest.mark.slow
TABLE1 = EXAMPLES / "table1"


def test_pinned_daemons_report_the_digest_of_what_they_loaded(tmp_path: Path) -> None:
    spec_path = TABLE1 / "run.toml"
    one = Spec.from_toml(spec_path)
    schema = registry.get(one.run_spec.privacy.model).schema(one.run_spec, one.taxonomy_reader())
    bad = tmp_path / "bad.csv"
    bad.write_text("ID,Job\n1,Janitor\n")  # columns of the spec missing: no load
    lines = (TABLE1 / "table1.csv").read_text().splitlines()
    halves = []
    for i, rows in enumerate((lines[1::2], lines[2::2])):
        halves.append(tmp_path / f"half{i}.csv")
        halves[-1].write_text("\n".join([lines[0], *rows]) + "\n")
    parties = [("a", halves[0]), ("b", halves[1]), ("c", bad)]
    work = tmp_path / "w"
    work.mkdir()
    pins = {name: spec_path for name, _ in parties}
    with daemons(parties, work, pins=pins, policy=TEST_POLICY) as ds:
        got = loaded(ds)
        assert (work / "c.digest").read_text() == "-\n"
    want = [loaded_digest(encode_table(schema, p, memory_budget="off")) for _, p in parties[:2]]
    assert got == [*want, None]
    assert want[0] != want[1]


def test_party_toml_keeps_quotes_and_backslashes_in_paths(tmp_path: Path) -> None:
    """A path with a quote, a backslash or a tab reads back as itself (it was written
    unescaped: the daemon could read another file than the one the check compared)."""
    import tomllib

    from fedanon.leader.localdaemons import party_toml

    odd = tmp_path / 'a"b\\c\td'
    text = party_toml("h", odd / "t.csv", odd / "certs", odd / "s.toml", TEST_POLICY)
    doc = tomllib.loads(text)
    assert doc["party"]["data"] == str((odd / "t.csv").resolve())
    assert doc["party"]["spec"] == str((odd / "s.toml").resolve())
    assert doc["tls"]["key"] == str(odd / "certs" / "h.key")


def test_federate_with_a_quote_and_backslash_in_the_paths(tmp_path: Path) -> None:
    import subprocess
    import sys

    odd = tmp_path / 'we"ird\\dir'
    odd.mkdir()
    lines = (TABLE1 / "table1.csv").read_text().splitlines()
    args = []
    for i in range(3):
        part = odd / f"p{i}.csv"
        part.write_text("\n".join([lines[0], *lines[1 + i :: 3]]) + "\n")
        args += ["--party", f"h{i}={part}"]
    out = odd / "out.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "fedanon.cli", "federate", "--spec", str(TABLE1 / "run.toml"),
         *args, "--output", str(out), "--quiet"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(out.read_text().splitlines()) == len(lines)


def test_a_digest_that_cannot_be_written_does_not_kill_the_loading_thread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fedanon.party import server

    stops: list[int] = []  # the daemon stops itself (SIGTERM: graceful), here only recorded
    monkeypatch.setattr(server.os, "kill", lambda _pid, sig: stops.append(sig))
    write = server._digest_writer(tmp_path / "no such folder" / "h.digest")
    with caplog.at_level("WARNING"):
        write(None)  # an OSError inside: logged, not raised into the preload thread
    assert "cannot write the table digest" in caplog.text and len(stops) == 1
