"""The leader shows each party's Prepare progress while a hospital loads a large table.

One party's table is a pipe that a writer fills slowly (more than one 4 MB read block, then
a pause of several seconds): while its Prepare is outstanding the leader prints, on stderr,
a plain line naming that party and the records it has read (rounded, a count only).  A
small table prints nothing: no Status call before the Prepare has been outstanding 2 s.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import EXAMPLES, TEST_POLICY, read_rows, write_rows

from fedanon.leader.federate import daemons, federation_config
from fedanon.leader.run import run_federation
from fedanon.security.policy import PartyPolicy

pytestmark = pytest.mark.slow
LINE = re.compile(r"^fedanon: prepare \(\d+ s\): .*\bslow read ([\d,]+) records", re.M)


def _csv(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join([",".join(header), *(",".join(r) for r in rows)]) + "\n"


def _run_with_a_slow_party(tmp_path: Path, policy: PartyPolicy) -> int:
    """A federation whose party "slow" reads a paused pipe; returns the slow table's size."""
    header, rows = read_rows(EXAMPLES / "adult" / "adult.csv.gz")
    rng = random.Random(3)
    big = [rows[rng.randrange(len(rows))] for _ in range(120_000)]  # ~12 MB: several blocks
    parts = []
    for name in ("fast-a", "slow", "fast-b"):
        data = tmp_path / f"{name}.csv"
        write_rows(data, header, rows[:3000])
        parts.append((name, data))
    work = tmp_path / "w"
    work.mkdir()
    spec = EXAMPLES / "adult" / "run-kanon.toml"
    with daemons(parts, work, policy=policy) as ds:
        pipe = parts[1][1]
        pipe.unlink()
        os.mkfifo(pipe)  # after the start-up check: the daemon reads it at Prepare
        text = _csv(header, big)
        cut = len(text) * 3 // 4  # past the first read blocks, then a pause
        cut = text.index("\n", cut) + 1

        def writer() -> None:
            with pipe.open("w", encoding="utf-8") as fh:
                fh.write(text[:cut])
                fh.flush()
                time.sleep(4.5)
                fh.write(text[cut:])

        feed = threading.Thread(target=writer, daemon=True)
        feed.start()
        cfg = federation_config(ds, work, spec, tmp_path / "out.csv", None)
        out = run_federation(cfg)
        feed.join(timeout=10)
    assert out.records == 2 * 3000 + len(big)
    return len(big)


def test_leader_prints_the_prepare_progress_of_a_slow_party(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = _run_with_a_slow_party(tmp_path, TEST_POLICY)
    err = capsys.readouterr().err
    found = [int(m.replace(",", "")) for m in LINE.findall(err)]
    assert found, err
    assert 0 < max(found) < big  # read so far, while the pipe was paused
    digits = str(max(found)).rstrip("0")
    assert len(digits) <= 2  # rounded down to two significant digits
    for value in ("Bachelors", "Married-civ-spouse"):  # counts only, never a value
        assert value not in err


def test_a_hospital_may_keep_its_progress_to_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[policy] share_progress = false: the leader learns that the party is still loading,
    not how many records it has read."""
    _run_with_a_slow_party(tmp_path, replace(TEST_POLICY, share_progress=False))
    err = capsys.readouterr().err
    assert re.search(r"^fedanon: prepare \(\d+ s\): .*\bslow loading", err, re.M), err
    assert not LINE.search(err) and " records" not in err


def test_a_small_table_prints_no_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, rows = read_rows(EXAMPLES / "adult" / "adult.csv.gz")
    parts = []
    for i in range(3):
        data = tmp_path / f"p{i}.csv"
        write_rows(data, header, rows[i * 1000 : (i + 1) * 1000])
        parts.append((f"p{i}", data))
    work = tmp_path / "w"
    work.mkdir()
    with daemons(parts, work, policy=TEST_POLICY) as ds:
        cfg = federation_config(
            ds, work, EXAMPLES / "adult" / "run-kanon.toml", tmp_path / "o.csv", None
        )
        run_federation(cfg)
    assert "prepare (" not in capsys.readouterr().err
