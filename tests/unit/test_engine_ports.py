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


def test_decider_composes_the_default_parts(tmp_path: Path) -> None:
    """The deterministic Decider is the argmax selector and the records releaser composed
    with the spec's model; composed by hand from the same parts it decides the same; a
    record release without a privacy model (whose count blocks it reads) is refused."""
    from fedanon.errors import InternalError
    from fedanon.io.table import encode_table
    from fedanon.tds.argmax import ArgmaxSelector
    from fedanon.tds.engine import LocalFederation, run
    from fedanon.tds.ports import Releaser, Selector, make_model
    from fedanon.tds.records import RecordsReleaser
    from fedanon.tds.state import SharedState
    from fedanon.union.localparty import LocalParty

    spec, reader = load_spec(ADULT / "run-kanon.toml")
    schema = build_schema(spec, reader)
    table = encode_table(schema, ADULT / "adult.csv.gz")
    n_class = len(table.class_labels)
    default = Decider(spec, schema.new_trees(), n_class)
    assert isinstance(default.selector, ArgmaxSelector) and isinstance(default.selector, Selector)
    assert isinstance(default.releaser, RecordsReleaser)
    assert isinstance(default.releaser, Releaser)
    model = make_model(spec)
    scorer = InfoGain()
    state = SharedState(schema.new_trees(), n_class, model.width - 1, scorer)
    by_hand = Decider.composed(
        spec, state, ArgmaxSelector(scorer, state.m, True), RecordsReleaser(), model
    )
    a = run(default, LocalFederation([LocalParty(schema, table)]))
    b = run(by_hand, LocalFederation([LocalParty(schema, table)]))
    assert a.specializations == b.specializations and a.rounds == b.rounds > 0
    with pytest.raises(InternalError, match="needs a privacy model"):
        Decider.composed(spec, state, ArgmaxSelector(scorer, state.m), RecordsReleaser())
