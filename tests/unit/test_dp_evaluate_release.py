"""`fedanon evaluate` of a DiffGen release (not row-aligned): CA on generalized test records,
BA and LA on the raw data."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dp_helpers import load, run, small_case

from fedanon.cli.main import main
from fedanon.dp.evaluate import accuracy, make_classifier

TABLE1 = Path(__file__).resolve().parents[2] / "examples" / "table1"


def _case(tmp_path: Path, h: int = 4) -> tuple[Path, Path, Path]:
    spec, train = small_case(tmp_path, h=h, rows=600, seed=0)
    (tmp_path / "t").mkdir()
    _, test = small_case(tmp_path / "t", h=h, rows=300, seed=1)
    return spec, train, test


def _evaluate(spec: Path, released: Path, *extra: str) -> int:
    return main(["evaluate", "--spec", str(spec), "--released", str(released), *extra])


def _metrics(tmp_path: Path, spec: Path, released: Path, train: Path, test: Path) -> Any:
    out = tmp_path / f"{released.stem}.json"
    extra = ["--train", str(train), "--test", str(test), "--json", str(out)]
    assert _evaluate(spec, released, *extra) == 0
    return json.loads(out.read_text())


def test_ca_from_the_released_file_equals_the_in_memory_pipeline(tmp_path: Path) -> None:
    spec, train, test = _case(tmp_path)
    released = tmp_path / "rel.csv"
    args = ["dp-anonymize", "--spec", str(spec), "--input", str(train), "--output", str(released)]
    assert main([*args, "--seed", "5", "--quiet"]) == 0
    m = _metrics(tmp_path, spec, released, train, test)
    # the engine's own run with the same seed, evaluated without reading the CSV back
    dspec, schema, table = load(spec, train)
    _, _, test_table = load(spec, test)
    result = run(dspec, schema, [table], 5)
    ca = accuracy(
        result.decider, result.counts, test_table.qid_leaves, test_table.cls, make_classifier
    )
    assert m["CA"] == pytest.approx(ca)
    assert m["released_records"] == int(result.counts.counts.sum())
    assert m["test_records"] == 300
    # LA recomputed here: the majority class of the training CSV, on the test CSV
    train_cls = Counter(r["Class"] for r in csv.DictReader(train.open()))
    test_cls = [r["Class"] for r in csv.DictReader(test.open())]
    majority = train_cls.most_common(1)[0][0]
    assert m["LA"] == pytest.approx(sum(c == majority for c in test_cls) / len(test_cls))
    assert 0.8 < m["BA"] <= 1.0  # Class follows Job up to 10 % label noise
    # the expanded form of the same release gives the same CA
    expanded = tmp_path / "relx.csv"
    assert main([*args[:-1], str(expanded), "--seed", "5", "--quiet", "--expand"]) == 0
    mx = _metrics(tmp_path, spec, expanded, train, test)
    assert mx["CA"] == pytest.approx(m["CA"])
    assert mx["released_rows"] == m["released_records"]


def _write_release(path: Path, rows: list[tuple[str, str, str, str, int]]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Job", "Age", "Sex", "Class", "count"])
        w.writerows(rows)


def test_hand_made_release_known_accuracy(tmp_path: Path) -> None:
    spec, train, test = _case(tmp_path)
    rel = tmp_path / "hand.csv"
    # White -> Y, Blue and Other -> N; Age split at 40, Sex not released
    counts = [("White", "Y", 50), ("White", "N", 3), ("Blue", "N", 40), ("Blue", "Y", 2)]
    counts += [("Other", "N", 0), ("Other", "Z", 0)]
    rows = [
        (job, age, "ANY_Sex", cls, n) for job, cls, n in counts for age in ("[0-40)", "[40-100)")
    ]
    _write_release(rel, rows)
    m = _metrics(tmp_path, spec, rel, train, test)
    recs = list(csv.DictReader(test.open()))
    expected = sum((r["Job"] in ("Lawyer", "Doctor")) == (r["Class"] == "Y") for r in recs)
    assert m["CA"] == pytest.approx(expected / len(recs))
    assert m["released_rows"] == 12 and m["released_records"] == 190


@pytest.mark.parametrize(
    "bad",
    [
        ("Blue", "Janitor"),  # overlap: not a cut
        ("Blue", "White"),  # Other's leaves not covered
        ("Blue", "Nurse"),  # not in the taxonomy
    ],
)
def test_release_that_is_not_a_cut_is_refused(tmp_path: Path, bad: tuple[str, str]) -> None:
    spec, train, test = _case(tmp_path)
    rel = tmp_path / "bad.csv"
    _write_release(rel, [(j, "[0-100)", "ANY_Sex", "N", 5) for j in bad])
    assert _evaluate(spec, rel, "--train", str(train), "--test", str(test)) == 2


def test_bad_interval_and_count_refused(tmp_path: Path) -> None:
    spec, train, test = _case(tmp_path)
    for rows in (
        [("ANY_Job", "[0-45)", "ANY_Sex", "N", 5), ("ANY_Job", "[45-100)", "ANY_Sex", "N", 5)],
        [("ANY_Job", "[0-100)", "ANY_Sex", "N", -1)],
        [("ANY_Job", "[0-100)", "ANY_Sex", "Q", 4)],
    ):
        rel = tmp_path / "bad.csv"
        _write_release(rel, rows)
        assert _evaluate(spec, rel, "--train", str(train), "--test", str(test)) == 2


def test_modes_do_not_mix(tmp_path: Path) -> None:
    spec, train, test = _case(tmp_path)
    rel = tmp_path / "r.csv"
    _write_release(rel, [("ANY_Job", "[0-100)", "ANY_Sex", "N", 5)])
    assert _evaluate(spec, rel, "--train", str(train)) == 2  # no --test
    assert _evaluate(spec, rel, "--original", str(train)) == 2  # dp: not row-aligned
    lkc = TABLE1 / "run.toml"
    table2 = TABLE1 / "table2.csv"
    assert _evaluate(lkc, table2, "--train", str(train), "--test", str(test)) == 2
