"""Issue 10: memory per row and per partition, derived statistics, progress lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedanon.apispec import Spec
from fedanon.io.progress import Progress
from fedanon.io.table import build_schema, encode_table
from fedanon.model.spec import load_spec, parse_spec
from fedanon.tds import stats
from fedanon.tds.decide import Decider
from fedanon.tds.engine import LocalFederation, run
from fedanon.tds.state import Phase
from fedanon.union.localparty import LocalParty


def _hard_spec(adult_dir: Path) -> object:
    text = (adult_dir / "run-discernibility.toml").read_text()
    text = text.replace("L = 4", "L = 2").replace("K = 20", "K = 2").replace("C = 0.2", "C = 1")
    text = text.replace('taxonomy = "taxonomies/', f'taxonomy = "{adult_dir}/taxonomies/')
    return parse_spec(text, "hard.toml")


def _run(schema: object, table: object) -> tuple[Decider, LocalParty, list[np.ndarray]]:
    spec = schema.spec  # type: ignore[attr-defined]
    party = LocalParty(schema, table)  # type: ignore[arg-type]
    seen: list[np.ndarray] = []
    orig = party.stats

    def record(phase: Phase, round_: int, size: int, digest: bytes) -> np.ndarray:
        vec = orig(phase, round_, size, digest)
        if phase == Phase.COUNTS:
            seen.append(vec.copy())
        return vec

    party.stats = record  # type: ignore[method-assign]
    decider = Decider(spec, schema.new_trees(), len(table.class_labels))  # type: ignore[attr-defined]
    run(decider, LocalFederation([party]))
    decider.verify()
    return decider, party, seen


def test_codes_use_the_smallest_types(adult_dir: Path) -> None:
    spec, reader = load_spec(adult_dir / "run.toml")
    schema = build_schema(spec, reader)
    table = encode_table(schema, adult_dir / "adult.csv.gz")
    assert table.qid_leaves.dtype == np.uint8 and table.cls.dtype == np.uint8
    assert table.sens.dtype == np.uint8
    party = LocalParty(schema, table)
    assert party.tips.order.dtype == np.int32 and party.state.pvals.dtype == np.uint16


@pytest.mark.parametrize("spec_name", ["run.toml", pytest.param("hard", marks=pytest.mark.slow)])
def test_derived_counts_equal_counts_read_from_rows(
    adult_dir: Path, spec_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The largest child's counts taken as parent minus siblings are the counts its rows
    give, in every round (forced on Adult, where it is normally skipped as too small)."""
    if spec_name == "hard":
        schema = build_schema(_hard_spec(adult_dir), lambda rel: Path(rel).read_text())  # type: ignore[arg-type]
    else:
        schema = build_schema(*load_spec(adult_dir / spec_name))
    table = encode_table(schema, adult_dir / "adult.csv.gz")
    used = []
    orig = stats._usable

    def spy(*a: object) -> object:
        plan = orig(*a)  # type: ignore[arg-type]
        used.append(plan is not None)
        return plan

    monkeypatch.setattr(stats, "MIN_DERIVED_ROWS", 0)
    monkeypatch.setattr(stats, "_usable", spy)
    d1, _, derived = _run(schema, table)
    monkeypatch.setattr(stats, "_usable", lambda *a: None)
    d2, _, plain = _run(schema, table)
    assert sum(used) > len(used) // 2, used
    assert len(derived) == len(plain)
    for a, b in zip(derived, plain, strict=True):
        assert np.array_equal(a, b)
    assert d1.summary() == d2.summary()


def test_leader_and_party_keep_counts_of_alive_partitions_only(adult_dir: Path) -> None:
    spec = _hard_spec(adult_dir)
    schema = build_schema(spec, lambda rel: Path(rel).read_text())  # type: ignore[arg-type]
    table = encode_table(schema, adult_dir / "adult.csv.gz")
    decider, party, _ = _run(schema, table)
    st = decider.state
    alive = int(st.alive[: st.n_parts].sum())
    assert st.n_parts > 5 * alive  # a long run: most partitions ever created are gone
    for store in (decider.blocks, party.tips.blocks):
        assert 0 < store.stored() <= 4 * store.needed()
        assert store.needed() <= alive * (1 + sum(len(t) for t in st.trees))


def test_progress_lines_are_throttled_plain_lines() -> None:
    now = [0.0]
    lines: list[str] = []
    p = Progress(lines.append, interval=5.0, clock=lambda: now[0])
    for n in range(0, 1_000_000, 100_000):
        now[0] += 1.0
        p.rows(n)
    assert lines == ["read 400,000 records (5 s)", "read 900,000 records (10 s)"]
    assert all("\r" not in line for line in lines)


def test_anonymize_prints_progress_lines_when_stderr_is_not_a_terminal(
    adult_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from fedanon.centralized import anonymize_file
    from fedanon.io import progress

    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)  # every step is "a few seconds later"
    anonymize_file(
        Spec.from_toml(adult_dir / "run.toml"),
        adult_dir / "adult.csv.gz",
        tmp_path / "o.csv",
        None,
        True,
    )
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith("fedanon: read 45,223 records") for line in err), err
    assert any(line.startswith("fedanon: round 1: ") and " groups, last " in line for line in err)
    assert any(line.startswith("fedanon: writing 45,223 records") for line in err)
    assert not any("\r" in line for line in err)


def test_daemon_logs_reading_progress(
    adult_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """encode_table without a callback (a party loading its table) logs counts only."""
    from fedanon.io import progress

    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
    spec, reader = load_spec(adult_dir / "run.toml")
    with caplog.at_level("INFO", logger="fedanon.io.table"):
        encode_table(build_schema(spec, reader), adult_dir / "adult.csv.gz")
    msgs = [r.getMessage() for r in caplog.records if r.name == "fedanon.io.table"]
    assert msgs and all("records" in m and "adult.csv.gz" in m for m in msgs)
    assert not any("Private" in m or "Bachelors" in m for m in msgs)


@pytest.mark.parametrize("spec_name", ["run.toml", "run-discernibility.toml"])
def test_threads_give_the_same_statistics_and_partitions(
    adult_dir: Path, spec_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attributes counted in parallel and Link_best regrouped in two halves (forced on
    Adult with a tiny threshold) give exactly the serial COUNTS vectors and groups."""
    from fedanon.tds import threads

    schema = build_schema(*load_spec(adult_dir / spec_name))
    table = encode_table(schema, adult_dir / "adult.csv.gz")
    _, p_serial, serial = _run(schema, table)
    monkeypatch.setattr(threads, "PARALLEL_ROWS", 1)
    monkeypatch.setattr(threads, "workers", lambda: 2)
    _, p_par, parallel = _run(schema, table)
    assert len(serial) == len(parallel)
    for a, b in zip(serial, parallel, strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(
        p_serial.tips.partition_of_rows(p_serial.state), p_par.tips.partition_of_rows(p_par.state)
    )
