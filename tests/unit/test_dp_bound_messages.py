"""What a DP run says when it is too large to hold (attack-user findings 02, 03, 09 of issue
24 items 6 and 7): an out-of-memory is exit 2 with what to lower, never a traceback; a grown
array stays near the size asked for; the --expand refusal says its total is redrawn; the
refusals name the spec file, who holds the bound and only a flag the command accepts."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
from dp_helpers import load, small_case, split_table

from fedanon.arrays import grown
from fedanon.cli.main import main
from fedanon.dp.party import DPParty
from fedanon.dp.randomness import RandomSource
from fedanon.dp.run import new_decider, run_dp
from fedanon.errors import InputError, SpecError
from fedanon.process import run_command
from fedanon.tds.engine import LocalFederation


def _dp(spec: Path, data: Path, out: Path, *extra: str) -> int:
    args = ["dp-anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out)]
    return main([*args, "--quiet", *extra])


def test_grown_array_keeps_within_an_eighth_of_the_rows_asked_for() -> None:
    """Doubling 5.5 M partitions allocated 11 M rows under the 10 M row bound (02)."""
    arr = np.arange(1000, dtype=np.uint16).reshape(500, 2)
    out = grown(arr, 501)
    assert 501 <= out.shape[0] <= 501 + 501 // 8
    assert (out[:500] == arr).all() and (out[500:] == 0).all()
    # still geometric: many appends one at a time reallocate O(log n) times
    a, moves = np.zeros((16, 1)), 0
    for n in range(17, 100_000):
        b = grown(a, n)
        moves += b is not a
        a = b
    assert moves < 100


def test_out_of_memory_is_exit_2_with_what_to_lower(capsys: pytest.CaptureFixture[str]) -> None:
    def handler(args: argparse.Namespace) -> int:
        raise MemoryError("Unable to allocate 294. MiB for an array with shape (11009792, 14)")

    args = argparse.Namespace(quiet=True, max_table_rows=None)
    assert run_command(handler, args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert "out of memory (Unable to allocate 294. MiB" in err
    assert "a smaller h" in err and "--max-table-rows" in err


def test_out_of_memory_message_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    def handler(args: argparse.Namespace) -> int:
        raise MemoryError("x" * 1_000_000)

    assert run_command(handler, argparse.Namespace(quiet=True)) == 2
    err = capsys.readouterr().err
    assert len(err) < 500 and "--max-table-rows" not in err and "more memory" in err


def test_expand_refusal_says_the_total_is_redrawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, data = small_case(tmp_path, h=3)
    out = tmp_path / "r.csv"
    assert _dp(spec, data, out, "--expand", "--seed", "1", "--max-expanded-rows", "10") == 2
    err = capsys.readouterr().err
    assert "drawn anew on each run" in err and "no --expand" in err
    assert "N >=" not in err and not out.exists()


def test_centralized_refusal_names_the_run_and_the_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, data = small_case(tmp_path, h=8)
    assert _dp(spec, data, tmp_path / "r.csv", "--max-table-rows", "30", "--seed", "2") == 2
    err = capsys.readouterr().err
    assert "the 30 this run allows" in err and "leader" not in err
    assert str(spec) in err and "--max-table-rows N" in err


def test_federated_refusal_suggests_no_flag_federate_lacks(tmp_path: Path) -> None:
    spec, schema, table = load(*small_case(tmp_path, h=8))
    parties = [DPParty(schema, t) for t in split_table(table, 3)]
    decider = new_decider(spec, schema, RandomSource(2), max_table_rows=30, federated=True)
    with pytest.raises(InputError) as info:
        run_dp(decider, LocalFederation(parties))
    text = str(info.value)
    assert "the 30 the leader allows" in text and "--max-table-rows" not in text
    assert "expected a smaller h" in text


def test_specializations_out_of_range_says_the_range(tmp_path: Path) -> None:
    spec, data = small_case(tmp_path, h=3)
    spec.write_text(spec.read_text().replace("specializations = 3", "specializations = 1000000"))
    with pytest.raises(SpecError) as info:
        load(spec, data)
    assert "specializations must be in [1, 1000]" in str(info.value)
    assert "must be an integer" not in str(info.value)
