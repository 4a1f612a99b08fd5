"""Resource bounds of a DP run (issue 24 items 6 and 7): a count table or an expanded release
too large to hold is refused with exit 2 and a clear message, before it is allocated or
written -- at the leader, in a party, and from the spec alone when every run would be too
large.

The small case (tests/dp_helpers.py) can make at most 14 specializations (Job: 4 taxonomy
values, Age: 9 splits of its 10 bins, Sex: 1), after which its cut is every leaf: 7 x 10 x 2
groups x 3 class values = 420 rows, whatever the randomness."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from dp_helpers import load, small_case, split_table

from fedanon.cli.main import main
from fedanon.dp.party import DPParty
from fedanon.dp.randomness import RandomSource
from fedanon.dp.run import anonymize_tables, new_decider, run_dp
from fedanon.errors import InputError
from fedanon.tds.engine import LocalFederation
from fedanon.tds.state import Update

ADULT = Path(__file__).resolve().parents[2] / "examples" / "adult"


def _dp(spec: Path, data: Path, out: Path, *extra: str) -> int:
    args = ["dp-anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out)]
    return main([*args, "--report", str(out.with_suffix(".json")), "--quiet", *extra])


def _written(tmp: Path) -> set[str]:
    return {p.name for p in tmp.iterdir()} - {"dp.toml", "data.csv", "job.txt", "sex.txt"}


# --- from the spec alone -------------------------------------------------------------------
def test_spec_whose_every_run_is_too_large_is_refused_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, data = small_case(tmp_path, h=14)
    code = _dp(spec, data, tmp_path / "r.csv", "--max-table-rows", "419", "--seed", "1")
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "specializations = 14 makes at least 420 rows" in err and "419" in err
    assert "--max-table-rows" in err
    assert _written(tmp_path) == set()
    # the bound is exact here: 420 rows are allowed by 420, and the run makes them
    assert _dp(spec, data, tmp_path / "r.csv", "--max-table-rows", "420", "--seed", "1") == 0
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["release"]["rows_with_count"] == 420


@pytest.mark.parametrize("command", ["dp-anonymize", "anonymize"])
def test_adult_with_1000_specializations_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The issue's run (killed by the kernel at 24 GB): refused from the spec, default bound,
    before the data is read (an unreadable input is never opened)."""
    spec = tmp_path / "dp.toml"
    text = (ADULT / "dp.toml").read_text().replace("specializations = 10", "specializations = 1000")
    spec.write_text(text.replace('taxonomy = "taxonomies/', f'taxonomy = "{ADULT}/taxonomies/'))
    missing = tmp_path / "not-read.csv"
    out = tmp_path / "r.csv"
    args = [command, "--spec", str(spec), "--input", str(missing), "--output", str(out)]
    assert main([*args, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "specializations = 1000 makes at least" in err and "10,000,000" in err
    assert "Traceback" not in err and not out.exists()


def test_fewest_groups_is_a_lower_bound_of_real_runs(tmp_path: Path) -> None:
    from dataclasses import replace

    from fedanon.dp.bounds import fewest_groups

    spec, schema, table = load(*small_case(tmp_path, h=14))

    for h in (1, 3, 6, 10, 14, 20):
        least = fewest_groups(schema.new_trees(), h)
        sizes = []
        for seed in range(4):
            s = replace(spec, params=replace(spec.params, specializations=h))
            run = anonymize_tables(s, schema, [table], RandomSource(seed))
            sizes.append(int(run.counts.nodes.shape[0]))
        assert min(sizes) >= least, (h, sizes, least)
        if h >= 14:
            assert sizes == [least] * 4 == [140] * 4  # everything specialized: exact
    assert fewest_groups(schema.new_trees(), 3) == 4  # three splits of Age: 4 intervals


# --- before each selection -----------------------------------------------------------------
def test_leader_refuses_a_selection_before_allocating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """h = 8 could stay at 9 groups (27 rows) by the spec, but this run's selections grow
    past 30 rows: refused at that selection, exit 2, nothing written."""
    spec, data = small_case(tmp_path, h=8)
    assert _dp(spec, data, tmp_path / "r.csv", "--max-table-rows", "30", "--seed", "2") == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "more than the 30 this run allows: refused before allocating them" in err
    assert _written(tmp_path) == set()


class _Recording(LocalFederation):
    def __init__(self, parties: list[DPParty]) -> None:
        super().__init__(parties)
        self.updates: list[Update] = []

    def broadcast(self, update: Update, *, chained: bool = False) -> None:
        self.updates.append(update)
        super().broadcast(update, chained=chained)


def test_leader_never_broadcasts_a_selection_over_the_bound(tmp_path: Path) -> None:
    spec, schema, table = load(*small_case(tmp_path, h=8))
    parties = [DPParty(schema, t) for t in split_table(table, 3)]
    fed = _Recording(parties)
    decider = new_decider(spec, schema, RandomSource(2), max_table_rows=30)
    with pytest.raises(InputError, match="refused before allocating"):
        run_dp(decider, fed)
    for p in parties:  # every party has exactly the leader's state: nothing more was sent
        assert p.state.round == decider.state.round
        assert p.state.alive_ids().size * 3 <= 30
    broadcast = sum(u.best is not None for u in fed.updates)
    assert broadcast == len(decider.selections) == decider.state.round < 8


def test_party_refuses_an_update_before_allocating(tmp_path: Path) -> None:
    """A party applies the leader's selection only if the table stays within its own bound;
    the count depends on the shared state and the update, not on the party's records."""
    _, schema, table = load(*small_case(tmp_path, h=2))
    job = [t.name for t in schema.new_trees()].index("Job")
    update = Update(round=0, best=(job, 0), children_mask=np.ones(3, np.uint8).tobytes())
    tight = DPParty(schema, table, max_table_rows=8)  # ANY_Job -> 3 groups x 3 classes = 9
    before = (tight.state.n_parts, tight.state.pvals.shape, tight.state.round)
    with pytest.raises(InputError) as info:
        tight.apply(update)
    assert "9 rows, more than the 8 this party allows" in str(info.value)
    assert (tight.state.n_parts, tight.state.pvals.shape, tight.state.round) == before
    assert tight.selections == 0
    # the same refusal from any party's data: a different table, the same message
    other = DPParty(schema, split_table(table, 2)[1], max_table_rows=8)
    with pytest.raises(InputError) as again:
        other.apply(update)
    assert str(again.value) == str(info.value)
    roomy = DPParty(schema, table, max_table_rows=9)
    roomy.apply(update)
    assert roomy.state.alive_ids().size == 3


def test_federation_with_a_stricter_party_stops_at_the_party(tmp_path: Path) -> None:
    """A leader allowing more than a party: the party refuses the selection that would pass
    its bound (the in-process stand-in for a party daemon's Instruct)."""
    spec, schema, table = load(*small_case(tmp_path, h=8))
    tables = split_table(table, 3)
    parties = [
        DPParty(schema, t, max_table_rows=30 if i == 1 else 10**6) for i, t in enumerate(tables)
    ]
    decider = new_decider(spec, schema, RandomSource(2), max_table_rows=10**6)
    with pytest.raises(InputError, match="30 this party allows"):
        run_dp(decider, LocalFederation(parties))
    assert parties[1].state.alive_ids().size * 3 <= 30


# --- --expand ------------------------------------------------------------------------------
def test_expand_refuses_a_huge_noisy_total(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, data = small_case(tmp_path, h=14, epsilon="0.000001")  # 420 counts of scale 2e6
    out = tmp_path / "r.csv"
    assert _dp(spec, data, out, "--expand", "--seed", "1") == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--max-expanded-rows" in err
    assert "(the noisy total), more than 100,000,000: nothing written" in err
    total = int(err.split("--expand would write ")[1].split(" rows")[0].replace(",", ""))
    assert total > 100_000_000
    assert _written(tmp_path) == set()
    # the same run without --expand writes the count table, whose counts add up to it
    assert _dp(spec, data, out, "--seed", "1") == 0
    assert json.loads(out.with_suffix(".json").read_text())["release"]["noisy_total"] == total


def test_expand_bound_is_the_users_to_raise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, data = small_case(tmp_path, h=3)
    out = tmp_path / "r.csv"
    assert _dp(spec, data, out, "--expand", "--seed", "1", "--max-expanded-rows", "10") == 2
    assert "more than 10: nothing written" in capsys.readouterr().err
    assert _written(tmp_path) == set()
    assert _dp(spec, data, out, "--expand", "--seed", "1", "--max-expanded-rows", "100000") == 0
    rep = json.loads(out.with_suffix(".json").read_text())
    assert rep["release"]["rows_written"] == rep["release"]["noisy_total"] > 10


def test_library_expand_is_bounded_too(tmp_path: Path) -> None:
    import fedanon

    spec_path, data = small_case(tmp_path, h=14, epsilon="0.000001")
    with pytest.raises(InputError, match="--max-expanded-rows"):
        fedanon.anonymize(data, fedanon.Spec.from_toml(spec_path), seed=1, expand=True)


def test_bound_flags_need_a_dp_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = ADULT / "run.toml"
    args = ["anonymize", "--spec", str(spec), "--input", str(ADULT / "adult.csv.gz")]
    out = ["--output", str(tmp_path / "o.csv")]
    assert main([*args, *out, "--max-table-rows", "5"]) == 2
    assert "--max-table-rows applies only to a differential-privacy spec" in capsys.readouterr().err
