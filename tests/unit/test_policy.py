"""A hospital's [policy]: which proposed runs (spec + ring) its daemon refuses, and why."""

from __future__ import annotations

import pytest

from fedanon.errors import ConfigError, InputError
from fedanon.model.spec import RunSpec, parse_spec
from fedanon.security.policy import (
    PartyPolicy,
    PolicyRefused,
    check_ring,
    policy_for_spec,
)
from fedanon.security.policytoml import parse_policy, policy_to_toml

RING = ["hospital-a", "hospital-b", "hospital-c"]


def spec(
    K: int = 10, L: int = 3, C: float = 0.5, sens: str = '["hiv"]', other: str = "other"
) -> RunSpec:
    return parse_spec(
        f"[privacy]\nL = {L}\nK = {K}\nC = {C}\nsensitive_values = {sens}\n"
        '[[attribute]]\nname = "id"\nrole = "identifier"\n'
        '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
        '[[attribute]]\nname = "zip"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
        '[[attribute]]\nname = "sex"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 2]\n'
        '[[attribute]]\nname = "disease"\nrole = "sensitive"\n'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
        f'[[attribute]]\nname = "notes"\nrole = "{other}"\n'
    )


POLICY = PartyPolicy(
    min_K=10,
    min_L=3,
    max_C=0.5,
    release_unchanged=("disease", "y"),
    sensitive_column="disease",
    sensitive_values=("hiv",),
)


def refusal(s: RunSpec, ring: list[str] = RING, me: str = "hospital-b") -> PolicyRefused:
    with pytest.raises(PolicyRefused) as err:
        POLICY.check(s, ring, me, "leader")
    return err.value


def test_accepts_a_run_within_the_policy() -> None:
    POLICY.check(spec(other="identifier"), RING, "hospital-b", "leader")
    POLICY.check(spec(K=50, C=0.2, other="identifier"), [*RING, "hospital-d"], "hospital-d")


def test_privacy_parameters() -> None:
    err = refusal(spec(K=1, other="identifier"))
    assert str(err) == "K = 1 < min_K = 10" and err.rule == "min_K"
    assert isinstance(err, InputError) and err.exit_code == 2
    assert str(refusal(spec(L=2, other="identifier"))) == "L = 2 < min_L = 3"
    assert str(refusal(spec(C=0.6, other="identifier"))) == "C = 0.6 > max_C = 0.5"
    err = refusal(spec(sens="[]", other="identifier"))
    assert err.rule == "sensitive_values" and "lack 'hiv'" in str(err)


def test_l_only_has_to_cover_the_qids_there_are() -> None:
    few = PartyPolicy(min_K=2, min_L=5, max_C=1.0, release_unchanged=("disease", "y"))
    few.check(spec(L=3, other="identifier"), RING, "hospital-a")  # 3 QIDs: L = 3 is all
    with pytest.raises(PolicyRefused, match="L = 2 < min_L = 5"):
        few.check(spec(L=2, other="identifier"), RING, "hospital-a")


def test_only_listed_columns_leave_unchanged() -> None:
    err = refusal(spec())  # 'notes' (role other) is not in release_unchanged
    assert err.rule == "release_unchanged"
    assert "'notes'" in str(err) and "role = other" in str(err) and "'disease'" in str(err)
    strict = PartyPolicy(
        min_K=10,
        min_L=3,
        max_C=0.5,
        release_unchanged=("disease",),
        sensitive_column="disease",
        sensitive_values=("hiv",),
    )
    with pytest.raises(PolicyRefused, match="'y' would be released unchanged"):
        strict.check(spec(other="identifier"), RING, "hospital-a")


@pytest.mark.parametrize(
    ("ring", "needle"),
    [
        (["hospital-b"], "ring of 1 < min_parties = 3"),
        (["hospital-a", "hospital-b"], "ring of 2 < min_parties = 3"),
        (["hospital-a", "hospital-b", "hospital-b"], "lists 'hospital-b' twice"),
        (["hospital-a", "hospital-c", "hospital-d"], "does not list this party"),
        (["hospital-a", "hospital-b", "leader"], "lists the leader"),
    ],
)
def test_ring(ring: list[str], needle: str) -> None:
    assert needle in str(refusal(spec(other="identifier"), ring))


def test_min_parties_above_three() -> None:
    four = PartyPolicy(
        min_K=2, min_L=1, max_C=1.0, min_parties=4, release_unchanged=("disease", "y", "notes")
    )
    with pytest.raises(PolicyRefused, match="ring of 3 < min_parties = 4"):
        four.check(spec(), RING, "hospital-a")
    four.check(spec(), [*RING, "hospital-d"], "hospital-a")
    with pytest.raises(PolicyRefused, match="min_parties = 3"):
        check_ring(["a", "b"], "a", min_parties=1)  # never below 3


def test_toml_round_trip_and_federate_policy() -> None:
    import tomllib

    s = spec()
    derived = policy_for_spec(s)
    assert derived.release_unchanged == ("disease", "y", "notes")
    assert derived.min_K == 2 and derived.min_parties == 3
    derived.check(s, RING, "hospital-a")
    with pytest.raises(PolicyRefused, match="K = 1 < min_K = 2"):
        derived.check(spec(K=1), RING, "hospital-a")
    weird = PartyPolicy(
        min_K=3,
        min_L=2,
        max_C=0.25,
        release_unchanged=('a"b', "c\\d", "é"),
        sensitive_column='a"b',
        sensitive_values=("ü\\",),
    )
    back = parse_policy(tomllib.loads(policy_to_toml(weird))["policy"], "x")
    assert back == PartyPolicy(**{**weird.__dict__, "source": "x"})


def test_allowed_parties() -> None:
    known = PartyPolicy(
        min_K=2, min_L=1, max_C=1.0, release_unchanged=("disease", "y", "notes"),
        allowed_parties=("hospital-a", "hospital-c"),
    )  # fmt: skip
    known.check(spec(), RING, "hospital-b")  # itself need not be listed
    with pytest.raises(PolicyRefused, match="'hospital-x' is not in allowed_parties") as err:
        known.check(spec(), ["hospital-a", "hospital-b", "hospital-x"], "hospital-b")
    assert err.value.rule == "allowed_parties"
    import tomllib

    assert parse_policy(tomllib.loads(policy_to_toml(known))["policy"], "<policy>") == known


def test_max_c_below_one_needs_the_sensitive_column() -> None:
    """Attack finding 5: with max_C < 1 and no sensitive_column, a spec could release the
    sensitive column as 'other' and C bound nothing; the daemon now does not start."""
    with pytest.raises(ConfigError) as err:
        PartyPolicy(min_K=10, min_L=3, max_C=0.2, release_unchanged=("marital", "y"), source="p")
    text = str(err.value)
    assert err.value.exit_code == 2 and text.startswith("p: [policy] max_C = 0.2 needs")
    assert "sensitive_column" in text and "max_C = 1" in text  # the two fixes
    PartyPolicy(min_K=10, min_L=3, max_C=1.0, release_unchanged=("marital", "y"))  # C unbound
    PartyPolicy(min_K=10, min_L=3, max_C=0.2)  # nothing leaves unchanged: nothing to bind
