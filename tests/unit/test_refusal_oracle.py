"""Issue 24, item 1: a refusal that depends on a hospital's data tells the leader one fixed
sentence.  Before, the leader was told the line and column of the first record that did not
fit its spec: choosing ``domain = [17, mid]`` binary-searched one patient's age."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from fedanon.errors import DataError, InputError, SpecError
from fedanon.io.sources import parse_source
from fedanon.party.config import PartyConfig
from fedanon.party.faults import DATA_LOG_MARKER, DataRefused, Failure, classify, logged_refusal
from fedanon.party.prepare import Proposal, prepare_run
from fedanon.party.run import Peer
from fedanon.security.policy import PartyPolicy

RING = ("hospital-a", "hospital-b", "hospital-c")
HEADER = "id,age,sex,marital,y\n"
ROWS = [
    "1,39,F,Divorced,n",
    "2,24,M,Married,y",
    "3,31,F,Never-married,n",
    "4,61,M,Married,y",
    "5,45,F,Widowed,n",
]


def _spec(
    age_hi: int = 100, marital: str = '"Divorced", "Married", "Never-married", "Widowed"'
) -> str:
    return (
        "[privacy]\nL = 2\nK = 2\nC = 1\n"
        '[[attribute]]\nname = "id"\nrole = "identifier"\n'
        f'[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [17, {age_hi}]\n'
        "step = 1\n"
        '[[attribute]]\nname = "sex"\nrole = "qid"\ntype = "categorical"\ntaxonomy = "sex.txt"\n'
        f'[[attribute]]\nname = "marital"\nrole = "other"\nvalues = [{marital}]\n'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
    )


POLICY = PartyPolicy(min_K=2, min_L=1, max_C=1.0, release_unchanged=("marital", "y"))


def _prepare_failure(tmp: Path, rows: list[str], spec_text: str) -> Failure:
    """Prepare at hospital-b over ``rows``; the failure it would answer the leader with."""
    data = tmp / "b.csv"
    data.write_text(HEADER + "\n".join(rows) + "\n")
    cfg = PartyConfig(
        name="hospital-b",
        listen="127.0.0.1:0",
        data=parse_source(str(data), None, None, tmp),
        ca=tmp / "ca.pem",
        cert=tmp / "b.pem",
        key=tmp / "b.key",
        policy=POLICY,
        keep_table=False,
    )
    proposal = Proposal(
        run_id=b"r" * 16,
        spec_toml=spec_text,
        files={"sex.txt": b"ANY\n  F\n  M\n"},
        ring=tuple(Peer(n, f"{n}:1") for n in RING),
        position=1,
    )
    with pytest.raises(InputError) as err:
        prepare_run(cfg, proposal)
    return classify(err.value, "hospital-b", "Prepare")


def test_classify_sends_one_sentence_for_a_data_error() -> None:
    a = classify(
        DataRefused(
            DataError("value outside the domain", file="/srv/b.csv", line=2, column="age",
                      value="39", expected="a number in [17, 39)")
        ),
        "hospital-b",
        "Prepare",
    )  # fmt: skip
    b = classify(
        DataError("unknown value", line=7, column="marital", value="Widowed"),
        "hospital-b",
        "Prepare",
    )
    c = classify(DataRefused(MemoryError()), "hospital-b", "Prepare")
    assert a == b == c
    assert a.detail == "hospital-b's data does not fit the spec (the hospital's own log says why)"
    assert (a.kind, a.code, a.rule, a.phase) == (
        "input",
        grpc.StatusCode.INVALID_ARGUMENT,
        "",
        "Prepare",
    )
    for leak in ("age", "line", "39", "marital", "Widowed", "/srv"):
        assert leak not in a.detail


def test_classify_keeps_the_detail_of_a_spec_error() -> None:
    f = classify(
        SpecError("unknown role", line=3, column="role", value="qi"), "hospital-b", "Prepare"
    )
    assert "line 3" in f.detail and "unknown role" in f.detail


def test_prepare_refusal_does_not_depend_on_the_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the attack: domain = [17, 40) -- is record 1's age below 40?  Both tables are refused
    # (record 4, 61, never fits); before, the line of the first failing record told which.
    older = [ROWS[0].replace(",39,", ",40,"), *ROWS[1:]]
    probe = _spec(age_hi=40)
    assert _prepare_failure(tmp_path, ROWS, probe) == _prepare_failure(tmp_path, older, probe)
    assert "line 2" in caplog.text and "line 5" in caplog.text  # the hospital's own log: where
    caplog.clear()
    # dropping one value of a kept column: which record holds it?
    drop = _spec(marital='"Married", "Never-married", "Widowed"')
    moved = [
        ROWS[0].replace("Divorced", "Widowed"),
        ROWS[1],
        ROWS[2],
        ROWS[3],
        ROWS[4].replace("Widowed", "Divorced"),
    ]
    f1 = _prepare_failure(tmp_path, ROWS, drop)
    assert f1 == _prepare_failure(tmp_path, moved, drop)
    assert f1.detail.startswith("hospital-b's data does not fit the spec")
    assert "line 2" in caplog.text and "line 6" in caplog.text
    assert "Divorced" not in caplog.text  # never the record's value


def test_federate_finds_where_in_the_daemon_log(tmp_path: Path) -> None:
    """``fedanon federate``'s user holds every table: it adds the logged place to the message."""
    log = tmp_path / "q1.log"
    assert logged_refusal(log) is None  # no log (yet)
    log.write_text(
        "2026-01-01 INFO fedanon.party.server: serving\n"
        f"2026-01-01 ERROR fedanon.party.faults: Prepare: {DATA_LOG_MARKER}q1.csv, line 2, "
        "column 'Job': unknown value\n"
    )
    assert logged_refusal(log) == "q1.csv, line 2, column 'Job': unknown value"
