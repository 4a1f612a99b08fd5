"""Issue 24 attack, finding 3: a typo in ``[policy] sensitive_values`` no longer disables C.

The policy said ``"divorced"``, the data ``Divorced``: every hospital accepted (the leader's
spec set ``allow_absent_sensitive = true``) and the release had groups at 0.75 Divorced
against max_C = 0.5.  At Prepare each policy value must occur in the hospital's own table;
otherwise the run is refused, the leader hears the fixed data sentence and the local log
names the policy value and its case-insensitive match in the data."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fedanon.io.sources import parse_source
from fedanon.lkc.owncheck import near_match
from fedanon.party.config import PartyConfig
from fedanon.party.faults import DataRefused, classify, data_refusal
from fedanon.party.prepare import Proposal, prepare_run
from fedanon.party.run import Peer
from fedanon.security.policy import PartyPolicy

RING = ("hospital-a", "hospital-b", "hospital-c")
ROWS = ["Divorced", "Married", "Never-married", "Married", "Separated", "Married"]


def _cfg(tmp: Path, values: tuple[str, ...]) -> PartyConfig:
    data = tmp / "b.csv"
    data.write_text(
        "age,marital,y\n" + "".join(f"{20 + i},{m},{'ny'[i % 2]}\n" for i, m in enumerate(ROWS))
    )
    policy = PartyPolicy(
        min_K=2,
        min_L=1,
        max_C=0.5,
        release_unchanged=("marital", "y"),
        sensitive_column="marital",
        sensitive_values=values,
    )
    return PartyConfig(
        name="hospital-b",
        listen="127.0.0.1:0",
        data=parse_source(str(data), None, None, tmp),
        ca=tmp / "ca.pem",
        cert=tmp / "b.pem",
        key=tmp / "b.key",
        policy=policy,
        keep_table=False,
    )


def _spec(values: list[str]) -> str:
    listed = ", ".join(f'"{v}"' for v in values)
    return (
        f"[privacy]\nL = 1\nK = 2\nC = 0.5\nsensitive_values = [{listed}]\n"
        "allow_absent_sensitive = true\n"
        '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
        '[[attribute]]\nname = "marital"\nrole = "sensitive"\n'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
    )


def _prepare(cfg: PartyConfig, spec: str) -> object:
    ring = tuple(Peer(n, f"{n}:1") for n in RING)
    return prepare_run(cfg, Proposal(b"r" * 16, spec, {}, ring, 1))


def test_a_policy_value_no_record_holds_refuses_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = _cfg(tmp_path, ("divorced",))  # the admin's typo
    with pytest.raises(DataRefused) as err:  # allow_absent_sensitive does not relax it
        _prepare(cfg, _spec(["divorced", "Divorced"]))
    with caplog.at_level(logging.ERROR):
        f = classify(err.value, "hospital-b", "Prepare")
    assert f.detail == data_refusal("hospital-b")  # the leader: the fixed sentence only
    log = caplog.text
    assert "'divorced'" in log and "the data has 'Divorced'" in log, log
    for other in ("Married", "Never-married", "Separated"):  # no other record value
        assert other not in log


def test_no_near_match_names_no_record_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = _cfg(tmp_path, ("Widowed",))
    with pytest.raises(DataRefused) as err:
        _prepare(cfg, _spec(["Widowed"]))
    with caplog.at_level(logging.ERROR):
        classify(err.value, "hospital-b", "Prepare")
    assert "'Widowed'" in caplog.text and "the data has" not in caplog.text


def test_policy_values_present_are_accepted(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, ("Divorced", "Separated"))
    _prepare(cfg, _spec(["Divorced", "Separated", "Widowed"]))  # the spec's extra may be absent


def test_near_match() -> None:
    assert near_match("divorced", ("Married", " Divorced")) == " Divorced"
    assert near_match("HIV", ("Married",)) is None
