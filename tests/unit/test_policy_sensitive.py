"""Issue 24: the columns a hospital owns (``[policy] identifiers``, ``sensitive_column``,
``sensitive_values``) and ``max_specializations``.

The attack of the issue: the policy checked C only against the sensitive column the leader's
spec declared, so a spec moving marital-status to ``other`` (which ``release_unchanged``
allowed) or naming only a rare sensitive value passed, and the release reached confidence
0.552 for Divorced against ``max_C = 0.5``."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.dp.spec import parse_dp_spec
from fedanon.errors import ConfigError
from fedanon.io.sources import parse_source
from fedanon.model.spec import RunSpec, parse_spec
from fedanon.party.config import PartyConfig
from fedanon.party.prepare import Proposal, accepted_line, prepare_run
from fedanon.party.run import Peer
from fedanon.security.policy import PartyPolicy, PolicyRefused
from fedanon.security.policytoml import parse_policy, policy_to_toml

RING = ["hospital-a", "hospital-b", "hospital-c"]
MARITAL = '["Divorced", "Married", "Never-married", "Widowed"]'
BASE = {
    "min_K": 2,
    "min_L": 1,
    "max_C": 0.5,
    "release_unchanged": ["marital", "y"],
    "identifiers": ["name"],
    "sensitive_column": "marital",
    "sensitive_values": ["Divorced", "Widowed"],
}
POLICY = parse_policy(BASE, "party.toml")


def spec(
    name: str = "identifier",
    marital: str = "sensitive",
    sens: str = '["Divorced", "Widowed"]',
    C: float = 0.5,
) -> RunSpec:
    privacy = f"[privacy]\nL = 2\nK = 2\nC = {C}\n"
    if marital == "sensitive":
        privacy += f"sensitive_values = {sens}\n"
    values = f"values = {MARITAL}\n" if marital != "identifier" else ""
    return parse_spec(
        privacy
        + f'[[attribute]]\nname = "name"\nrole = "{name}"\n'
        + ('type = "numeric"\ndomain = [0, 1000]\n' if name == "qid" else "")
        + '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
        f'[[attribute]]\nname = "marital"\nrole = "{marital}"\n{values}'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
    )


def refusal(s: RunSpec, p: PartyPolicy = POLICY) -> PolicyRefused:
    with pytest.raises(PolicyRefused) as err:
        p.check(s, RING, "hospital-b", "leader")
    return err.value


def test_the_hospital_owns_its_sensitive_column() -> None:
    POLICY.check(spec(), RING, "hospital-b", "leader")
    POLICY.check(spec(sens='["Divorced", "Widowed", "Married"]'), RING, "hospital-b", "leader")
    POLICY.check(spec(marital="identifier"), RING, "hospital-b", "leader")  # dropped
    # the attack: marital moved to 'other' (release_unchanged allows it) -- C bound nothing
    err = refusal(spec(marital="other"))
    assert err.rule == "sensitive_column" and err.exit_code == 2
    assert str(err).startswith(
        "sensitive_column = 'marital' but the spec declares it role = 'other'"
    )
    # the attack: naming only a rare value, so that C bounded Widowed and not Divorced
    err = refusal(spec(sens='["Widowed"]'))
    assert err.rule == "sensitive_values"
    assert str(err) == (
        "the spec's sensitive_values = ['Widowed'] lack 'Divorced' of this hospital's "
        "sensitive_values = ['Divorced', 'Widowed']"
    )
    assert refusal(spec(C=0.6)).rule == "max_C"  # and C itself still has to be low enough


def test_identifiers_are_never_read() -> None:
    err = refusal(spec(name="qid"))  # redeclared as a numeric QID: binary-searchable
    assert err.rule == "identifiers"
    assert str(err) == (
        "column 'name' is in identifiers but the spec declares it role = 'qid' "
        "(it must be role = 'identifier': never read)"
    )
    no_sens = parse_policy(
        {**BASE, "max_C": 1.0, "sensitive_column": None, "sensitive_values": []}, "p"
    )
    assert refusal(spec(name="other"), no_sens).rule == "identifiers"


def test_dp_runs_keep_the_owned_columns_and_max_specializations() -> None:
    def dp(h: int = 3, name: str = "identifier", marital: str = "sensitive") -> RunSpec:
        return parse_dp_spec(
            f'[privacy]\nmodel = "dp"\nepsilon = 1.0\nspecializations = {h}\n'
            f'[[attribute]]\nname = "name"\nrole = "{name}"\n'
            '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
            f'[[attribute]]\nname = "marital"\nrole = "{marital}"\n'
            '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
        ).run

    pol = parse_policy({**BASE, "max_epsilon": 1.0, "max_specializations": 20}, "p")

    def dp_refusal(s: RunSpec) -> PolicyRefused:
        with pytest.raises(PolicyRefused) as err:
            pol.check(s, RING, "hospital-b", "leader")
        return err.value

    for role in ("sensitive", "other", "identifier"):  # a DP run releases none of them
        pol.check(dp(marital=role), RING, "hospital-b", "leader")
    pol.check(dp(h=20), RING, "hospital-b", "leader")
    err = dp_refusal(dp(h=30))
    assert err.rule == "max_specializations"
    assert str(err) == "specializations = 30 > max_specializations = 20"
    assert dp_refusal(dp(name="other")).rule == "identifiers"
    err = dp_refusal(
        parse_dp_spec(
            '[privacy]\nmodel = "dp"\nepsilon = 1.0\nspecializations = 3\n'
            '[[attribute]]\nname = "name"\nrole = "identifier"\n'
            '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
            f'[[attribute]]\nname = "marital"\nrole = "class"\nvalues = {MARITAL}\n'
        ).run
    )
    assert err.rule == "sensitive_column" and "role = 'class'" in str(err)


@pytest.mark.parametrize(
    ("keys", "bad"),
    [
        ({"sensitive_values": []}, "sensitive_values"),  # max_C < 1: the leader would pick
        ({"max_C": 1.0}, "sensitive_values"),  # C = 1 bounds nothing: values are a mistake
        ({"sensitive_column": None}, "sensitive_values"),
        ({"sensitive_column": "name"}, "sensitive_column"),  # also an identifier
        ({"identifiers": ["name", "name"]}, "identifiers"),
        ({"identifiers": "name"}, "identifiers"),
        ({"max_specializations": 0}, "max_specializations"),
        ({"max_specializations": True}, "max_specializations"),
    ],
)
def test_invalid_keys(keys: dict[str, object], bad: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_policy({**BASE, **keys}, "party.toml")
    assert f"[policy] {bad} is invalid" in str(err.value) and "party.toml" in str(err.value)


def test_toml_round_trip() -> None:
    import tomllib

    p = parse_policy({**BASE, "max_epsilon": 1.0, "max_specializations": 7}, "x")
    again = parse_policy(tomllib.loads(policy_to_toml(p))["policy"], "x")
    assert again == p
    c1 = PartyPolicy(min_K=2, min_L=1, max_C=1.0, sensitive_column="marital", source="x")
    assert parse_policy(tomllib.loads(policy_to_toml(c1))["policy"], "x") == c1


def test_accepted_line_shows_what_c_binds(tmp_path: Path) -> None:
    data = tmp_path / "b.csv"
    rows = [f"n{i},{20 + i},{m},{'y' if i % 2 else 'n'}" for i, m in enumerate(
        ["Divorced", "Married", "Never-married", "Widowed", "Married", "Married"])]  # fmt: skip
    data.write_text("name,age,marital,y\n" + "\n".join(rows) + "\n")
    cfg = PartyConfig(
        name="hospital-b",
        listen="127.0.0.1:0",
        data=parse_source(str(data), None, None, tmp_path),
        ca=tmp_path / "ca.pem",
        cert=tmp_path / "b.pem",
        key=tmp_path / "b.key",
        policy=POLICY,
    )
    text = (
        "[privacy]\nL = 2\nK = 2\nC = 0.4\n"
        'sensitive_values = ["Widowed", "Divorced", "Married"]\n'
        '[[attribute]]\nname = "name"\nrole = "identifier"\n'
        '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
        f'[[attribute]]\nname = "marital"\nrole = "sensitive"\nvalues = {MARITAL}\n'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
    )
    prop = Proposal(b"r" * 16, text, {}, tuple(Peer(n, f"{n}:1") for n in RING), 1)
    run, digest = prepare_run(cfg, prop)
    line = accepted_line(run, "leader", digest, POLICY)  # the policy's own values first
    assert "binds=[C=0.4 on marital: Divorced,Widowed + 1 more of the spec: Married]" in line
