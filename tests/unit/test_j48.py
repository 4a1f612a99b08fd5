"""C4.5 (Weka J48) as an evaluation classifier: the ARFF writer and the prediction parser
(always), J48 itself on hand-made tables (only where Weka and Java are installed)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest

from fedanon.apispec import Spec
from fedanon.cli.main import main
from fedanon.errors import InputError
from fedanon.evaluation import j48
from fedanon.evaluation.j48 import Attribute, arff_quote, j48_predict, parse_predictions, write_arff

HAVE_WEKA = shutil.which("java") is not None and j48.weka_jar().is_file()
needs_weka = pytest.mark.skipif(
    not HAVE_WEKA, reason="Weka J48 not installed (apt-get install weka: weka.jar and java)"
)


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ("red", "red"),
        ("[10-20)", "[10-20)"),
        ("a,b", "'a,b'"),
        ("two words", "'two words'"),
        ("it's", r"'it\'s'"),
        ('say "hi"', "'say \"hi\"'"),
        ("back\\slash", r"'back\\slash'"),
        ("{x}", "'{x}'"),
        ("50%", "'50%'"),
        ("?", "'?'"),
        ("", "''"),
        ("tab\there", r"'tab\there'"),
    ],
)
def test_arff_quote(value: str, token: str) -> None:
    assert arff_quote(value) == token


def test_write_arff_header_rows_and_weights() -> None:
    attrs = [Attribute("work class", ("a,b", "it's", "plain")), Attribute("age")]
    fh = io.StringIO()
    write_arff(
        fh,
        attrs,
        [np.array([0, 1, 2]), np.array([17.0, np.nan, 2.5])],
        np.array([1, 0, 1]),
        2,
        weights=np.array([3.0, 1.0, 0.5]),
        relation="t t",
    )
    assert fh.getvalue() == (
        "@relation 't t'\n\n"
        "@attribute 'work class' {'a,b','it\\'s',plain}\n"
        "@attribute age numeric\n"
        "@attribute class {c0,c1}\n\n"
        "@data\n"
        "'a,b',17,c1,{3}\n"
        "'it\\'s',?,c0,{1}\n"
        "plain,2.5,c1,{0.5}\n"
    )


def test_write_arff_refuses_bad_input() -> None:
    fh = io.StringIO()
    with pytest.raises(ValueError, match="code outside"):
        write_arff(fh, [Attribute("a", ("x",))], [np.array([1])], np.array([0]), 2)
    with pytest.raises(ValueError, match="one value per row"):
        write_arff(fh, [Attribute("a", ("x",))], [np.array([0, 0])], np.array([0]), 2)
    with pytest.raises(ValueError, match="not 'class'"):
        write_arff(fh, [Attribute("class", ("x",))], [np.array([0])], np.array([0]), 2)
    with pytest.raises(ValueError, match="weights"):
        write_arff(
            fh, [Attribute("a", ("x",))], [np.array([0])], np.array([0]), 2, np.array([-1.0])
        )
    with pytest.raises(ValueError, match="repeats"):
        Attribute("a", ("x", "x"))


WEKA_36_OUTPUT = """
=== Predictions on test data ===

 inst#     actual  predicted error prediction
     1       1:c0       1:c0       1
     2       2:c1       2:c1       0.9
     3       2:c1       1:c0   +   0.5

"""


def test_parse_predictions() -> None:
    assert parse_predictions(WEKA_36_OUTPUT, 3).tolist() == [0, 1, 0]
    with pytest.raises(j48.WekaError, match="2 predictions for 3"):
        parse_predictions(WEKA_36_OUTPUT.replace("     2       2:c1", "     x"), 3)


def test_missing_weka_is_an_input_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(j48.JAR_ENV, str(tmp_path / "no-weka.jar"))
    with pytest.raises(InputError, match="apt-get install weka") as err:
        j48.require_j48()
    assert err.value.exit_code == 2
    out = tmp_path / "out"
    assert main(["experiment", "dp", "--out", str(out), "--classifier", "j48", "--rows", "50"]) == 2
    assert not out.exists()


# A hand-made table: colour decides the class except for "it's blue", where n < 10 does; the
# values need quoting.  Test: 4 records J48 gets right and one mislabelled red one -> 4/5.
COLOURS = ("red", "green, light", "it's blue")
TRAIN_COLOUR = np.array([0] * 5 + [1] * 5 + [2] * 6)
TRAIN_N = np.array([1.0, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 30, 40, 50])
TRAIN_CLS = np.array([1] * 5 + [0] * 5 + [1, 1, 1, 0, 0, 0])
TEST_COLOUR = np.array([0, 1, 2, 2, 0])
TEST_N = np.array([5.0, 5, 2, 20, 3])
TEST_CLS = np.array([1, 0, 1, 0, 0])


@needs_weka
def test_j48_hand_made_table() -> None:
    attrs = [Attribute("colour", COLOURS), Attribute("n")]
    pred = j48_predict(attrs, [TRAIN_COLOUR, TRAIN_N], TRAIN_CLS, [TEST_COLOUR, TEST_N], 2)
    assert pred.tolist() == [1, 0, 1, 0, 1]
    assert float(np.mean(pred == TEST_CLS)) == pytest.approx(0.8)


@needs_weka
def test_j48_honours_weights() -> None:
    """One value, both classes: the weights (not the row count) decide the majority, and a
    weighted table predicts as its expanded form."""
    attrs = [Attribute("v", ("only value",))]
    rows = [np.array([0, 0, 0])]
    cls = np.array([0, 1, 1])
    test = [np.array([0])]
    assert j48_predict(attrs, rows, cls, test, 2).tolist() == [1]  # unweighted: 2 of 3
    w = np.array([10.0, 1.0, 1.0])
    assert j48_predict(attrs, rows, cls, test, 2, w).tolist() == [0]
    expanded = [np.zeros(12, dtype=np.int64)]
    assert j48_predict(attrs, expanded, np.array([0] * 10 + [1, 1]), test, 2).tolist() == [0]


@needs_weka
def test_evaluate_dp_release_with_j48(tmp_path: Path) -> None:
    """`fedanon evaluate --classifier j48` on a released CSV gives the CA of the in-memory
    pipeline (same seed, same cut) with J48, and J48's own BA."""
    import json

    from dp_helpers import load, run, small_case

    from fedanon.dp.evaluate import accuracy, make_classifier

    spec, train = small_case(tmp_path, h=4, rows=600, seed=0)
    (tmp_path / "t").mkdir()
    _, test = small_case(tmp_path / "t", h=4, rows=300, seed=1)
    released, out = tmp_path / "rel.csv", tmp_path / "m.json"
    args = ["dp-anonymize", "--spec", str(spec), "--input", str(train), "--output", str(released)]
    assert main([*args, "--seed", "5", "--quiet"]) == 0
    ev = ["evaluate", "--spec", str(spec), "--released", str(released), "--train", str(train)]
    ev += ["--test", str(test), "--json", str(out), "--classifier", "j48"]
    assert main(ev) == 0
    m = json.loads(out.read_text())
    dspec, schema, table = load(spec, train)
    _, _, test_table = load(spec, test)
    result = run(dspec, schema, [table], 5)
    leaves, cls = test_table.qid_leaves, test_table.cls
    ca = accuracy(result.decider, result.counts, leaves, cls, make_classifier, "j48")
    assert m["CA"] == pytest.approx(ca)
    assert 0.8 < m["BA"] <= 1.0  # Class follows Job up to 10 % label noise


@needs_weka
def test_dp_experiment_with_j48(tmp_path: Path) -> None:
    """`fedanon experiment dp --classifier j48` writes its own files (dp_ca_j48*) and its BA is
    J48's on the raw predictors, not the tree's."""
    import csv

    from fedanon.dp.experiment import (
        DEFAULT_DATA,
        DEFAULT_SPEC,
        Grid,
        load_setting,
        run_dp_experiment,
    )

    grid = Grid(("1",), (4,), ("max",), 2)
    written = run_dp_experiment(
        tmp_path, Spec.from_toml(DEFAULT_SPEC), rows=3000, grid=grid, classifier="j48"
    )
    assert {p.name for p in written} == {"dp_ca_j48.csv", "dp_ca_j48_runs.csv", "dp_ca_j48_max.png"}
    (summary,) = list(csv.DictReader((tmp_path / "dp_ca_j48.csv").open()))
    assert 0.5 < float(summary["CA_mean"]) <= 1.0
    j48_ba = load_setting(
        Spec.from_toml(DEFAULT_SPEC), DEFAULT_DATA, rows=3000, classifier="j48"
    ).BA
    tree_ba = load_setting(Spec.from_toml(DEFAULT_SPEC), DEFAULT_DATA, rows=3000).BA
    assert float(summary["BA"]) == pytest.approx(j48_ba, abs=1e-5)
    assert j48_ba != tree_ba
    assert j48_ba > float(summary["LA"])
