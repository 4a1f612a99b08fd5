"""The engine's ports (fedanon.tds.ports): several specializations per round only for a model
and a score whose own classes declare the rule proven; a subclass that may change the
behaviour (a plug-in deriving from LKCModel or InfoGain) does not inherit it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.io.table import build_schema
from fedanon.model.spec import load_spec
from fedanon.privacy.base import register_model
from fedanon.privacy.lkc import LKCModel
from fedanon.scores.base import register_score
from fedanon.scores.infogain import InfoGain
from fedanon.tds.decide import Decider
from fedanon.tds.ports import chain_proven

ADULT = Path(__file__).resolve().parent.parent.parent / "examples" / "adult"


class DerivedLKC(LKCModel):
    pass


class DerivedInfoGain(InfoGain):
    name = "derived-infogain"


def test_only_the_declaring_class_is_chain_proven() -> None:
    spec, _ = load_spec(ADULT / "run-kanon.toml")
    assert chain_proven(LKCModel(spec)) and chain_proven(InfoGain())
    assert not chain_proven(DerivedLKC(spec)) and not chain_proven(DerivedInfoGain())


@pytest.fixture(scope="module")
def derived_names() -> None:
    register_model("derived-lkc", DerivedLKC)
    register_score("derived-infogain", DerivedInfoGain)


def _decider(text: str, tmp_path: Path) -> Decider:
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(text)
    spec, reader = load_spec(spec_path)
    return Decider(spec, build_schema(spec, reader).new_trees(), 2)


@pytest.mark.usefixtures("derived_names")
@pytest.mark.parametrize(
    ("model", "score", "batch"),
    [
        ("lkc", "infogain", True),
        ("derived-lkc", "infogain", False),
        ("lkc", "derived-infogain", False),
    ],
)
def test_batch_needs_both_declared(model: str, score: str, batch: bool, tmp_path: Path) -> None:
    text = (ADULT / "run-kanon.toml").read_text()
    text = text.replace("[privacy]\n", f'[privacy]\nmodel = "{model}"\n', 1)
    text = text.replace('score = "infogain"', f'score = "{score}"')
    text = text.replace('taxonomy = "', f'taxonomy = "{ADULT}/')
    assert _decider(text, tmp_path).batch is batch
