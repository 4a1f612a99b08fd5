"""model = "dp" in the registry of privacy models: parsed by the spec reader through its own
parameters class, not an LKC instance, refused by the deterministic round loop."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from dp_helpers import small_case

from fedanon.dp.model import DiffGen
from fedanon.errors import SpecError
from fedanon.io.table import build_schema, encode_table
from fedanon.model.params import DiffGenParams
from fedanon.model.spec import load_spec, parse_spec
from fedanon.privacy.base import model_names, params_class
from fedanon.scores.base import make_score, score_names
from fedanon.security.policy import PartyPolicy, PolicyRefused
from fedanon.tds.decide import Decider
from fedanon.tds.ports import PrivacyModel
from fedanon.union.localparty import LocalParty

ATTRS = """
[[attribute]]
name = "Age"
role = "qid"
type = "numeric"
domain = [0, 100]

[[attribute]]
name = "Class"
role = "class"
values = ["N", "Y"]
"""


def test_registered_with_its_own_parameters() -> None:
    assert "dp" in model_names() and "max" in score_names()
    assert params_class("dp") is DiffGenParams
    assert make_score("max").needs_class
    spec = parse_spec('[privacy]\nmodel = "dp"\nepsilon = 0.1\nspecializations = 4\n' + ATTRS)
    p = spec.privacy
    assert p.model == "dp" and spec.score == "max"  # the model's default score
    assert p.params == DiffGenParams(Fraction(1, 10), 4, "half")
    assert p.params.epsilon == Fraction(1, 10)  # the decimal written, exactly
    assert p.as_lkc(1) is None and p.sensitive_values == ()
    assert p.parameters() == {
        "model": "dp",
        "epsilon": 0.1,
        "specializations": 4,
        "noise_budget": "half",
    }
    assert p.describe() == "model=dp epsilon=0.1 specializations=4 noise_budget=half"
    with pytest.raises(SpecError, match="no L, K, C"):
        _ = p.L
    lkc = parse_spec("[privacy]\nL = 1\nK = 2\nC = 0.5\n" + ATTRS)
    assert lkc.score == "infogain"  # unchanged default of the other models
    with pytest.raises(SpecError, match=r"does not apply to model = 'dp'.*value 'K'"):
        parse_spec('[privacy]\nmodel = "dp"\nepsilon = 1\nspecializations = 4\nK = 2\n' + ATTRS)


def test_the_lkc_round_loop_refuses_a_dp_spec(tmp_path: Path) -> None:
    """A DP spec handed to the deterministic Decider, or to a party that releases records, is
    refused when they are built (DiffGen is no PrivacyModel of the engine): it must never
    publish an exact, non-private generalization."""
    spec_path, data = small_case(tmp_path)
    rs, reader = load_spec(spec_path)
    schema = build_schema(rs, reader)
    table = encode_table(schema, data)
    with pytest.raises(SpecError, match="not run by the LKC round loop"):
        Decider(rs, schema.new_trees(), len(table.class_labels))
    with pytest.raises(SpecError, match="not run by the LKC round loop"):
        LocalParty(schema, table)
    assert not isinstance(DiffGen(rs), PrivacyModel)  # no hook that would have to refuse


def test_diffgen_composes_the_engine_parts(tmp_path: Path) -> None:
    """DiffGen's leader is the engine's Decider composed of its selector and releaser (no
    privacy model); its party is the engine's party with the count release, which has no
    records to give."""
    from fedanon.dp.decider import ExponentialSelector, NoisyCountReleaser
    from fedanon.dp.party import CountRelease, DPParty
    from fedanon.dp.randomness import RandomSource
    from fedanon.dp.run import new_decider
    from fedanon.dp.spec import DPSpec
    from fedanon.tds.party import EngineParty
    from fedanon.tds.ports import Releaser, Selector

    spec_path, data = small_case(tmp_path)
    rs, reader = load_spec(spec_path)
    schema = build_schema(rs, reader)
    dp = new_decider(DPSpec.of(rs), schema, RandomSource(3))
    assert type(dp.engine) is Decider and dp.engine.model is None
    assert isinstance(dp.engine.selector, ExponentialSelector)
    assert isinstance(dp.engine.selector, Selector)
    assert isinstance(dp.engine.releaser, NoisyCountReleaser)
    assert isinstance(dp.engine.releaser, Releaser)
    party = DPParty(schema, encode_table(schema, data))
    assert isinstance(party, EngineParty) and isinstance(party.release, CountRelease)
    assert not hasattr(party, "released_columns") and not hasattr(party, "released_coded")


def test_policy_admits_dp_only_through_max_epsilon(tmp_path: Path) -> None:
    spec_path, _ = small_case(tmp_path)
    rs, _ = load_spec(spec_path)
    both = PartyPolicy(
        2,
        1,
        1.0,
        release_unchanged=("Class", "Note"),
        max_epsilon=1.0,
        allowed_models=("lkc", "dp"),
    )
    from fedanon.lkc.policy import check_lkc_policy

    with pytest.raises(PolicyRefused, match="states no L, K, C"):
        check_lkc_policy(both, rs)  # no LKC equivalent: the LKC rules cannot admit it
    both.check_spec(rs)  # the spec's method's rules: DiffGen's max_epsilon
    with pytest.raises(PolicyRefused, match="no max_epsilon"):
        PartyPolicy(2, 1, 1.0, release_unchanged=("Class",)).check_spec(rs)


PINNED = """[privacy]
model = "dp"
epsilon = 0.1
specializations = 4
[utility]
score = "max"
[[attribute]]
name = "Age"
role = "qid"
type = "numeric"
domain = [0, 100]
step = 5
[[attribute]]
name = "Id"
role = "identifier"
[[attribute]]
name = "Class"
role = "class"
values = ["N", "Y"]
"""


def test_dp_run_hash_is_the_pinned_value() -> None:
    """Parties pin run hashes: the value computed before model "dp" was registered (when
    the attributes were parsed under a placeholder LKC section) still holds."""
    from fedanon.dp.spec import dp_run_hash, parse_dp_spec

    digest = dp_run_hash(parse_dp_spec(PINNED), {"x.txt": "abc"})
    assert digest.hex() == "d860e04e8e5f0719bfc80be9f2e33568d0abeb97f73fb3c566bf347bdd1db583"
