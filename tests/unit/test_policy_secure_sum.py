"""[policy] secure_sum: which secure sums a hospital joins (default: pairwise only)."""

from __future__ import annotations

import tomllib

import pytest

from fedanon.errors import ConfigError
from fedanon.security.policy import PartyPolicy, PolicyRefused, policy_for_spec
from fedanon.security.policytoml import parse_policy, policy_to_toml

BASE = {"min_K": 5, "min_L": 2, "max_C": 1.0}


def test_the_default_joins_pairwise_sums_only() -> None:
    policy = parse_policy(BASE, "party.toml")
    assert policy.secure_sum == ("pairwise",)
    policy.check_secure_sum("pairwise")
    with pytest.raises(PolicyRefused) as err:
        policy.check_secure_sum("ring")
    assert err.value.rule == "secure_sum" and err.value.exit_code == 2
    assert str(err.value) == 'secure_sum = "ring" is not in secure_sum = ["pairwise"]'


def test_the_ring_only_when_listed() -> None:
    policy = parse_policy({**BASE, "secure_sum": ["pairwise", "ring"]}, "party.toml")
    policy.check_secure_sum("ring")
    policy.check_secure_sum("pairwise")
    ring_only = parse_policy({**BASE, "secure_sum": ["ring"]}, "party.toml")
    with pytest.raises(PolicyRefused, match=r'secure_sum = \["ring"\]'):
        ring_only.check_secure_sum("pairwise")


@pytest.mark.parametrize("value", [[], ["mixnet"], ["ring", "ring"], "pairwise", [1]])
def test_invalid_values_are_a_config_error(value: object) -> None:
    with pytest.raises(ConfigError, match="secure_sum") as err:
        parse_policy({**BASE, "secure_sum": value}, "party.toml")
    assert err.value.exit_code == 2 and "party.toml" in str(err.value)


def test_round_trip_and_federate() -> None:
    both = PartyPolicy(**BASE, secure_sum=("ring", "pairwise"))
    back = parse_policy(tomllib.loads(policy_to_toml(both))["policy"], "x")
    assert back.secure_sum == ("ring", "pairwise")
    assert "secure_sum" not in policy_to_toml(PartyPolicy(**BASE))
    from fedanon.model.spec import parse_spec

    spec = parse_spec(
        "[privacy]\nL = 1\nK = 2\nC = 1\n"
        '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
    )
    policy_for_spec(spec).check_secure_sum("ring")  # fedanon federate: one owner, both
