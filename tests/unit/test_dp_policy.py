"""A hospital's [policy] for DP runs (max_epsilon) and the party's Prepare of a DP spec."""

from __future__ import annotations

from pathlib import Path

import pytest
from dp_helpers import small_case

from fedanon.dp.party import DPParty
from fedanon.dp.spec import dp_run_hash, load_dp_spec, parse_dp_spec
from fedanon.errors import ConfigError, ProtocolError
from fedanon.io.sources import parse_source
from fedanon.io.table import build_schema
from fedanon.model.spec import RunSpec
from fedanon.party.config import PartyConfig, parse_party_config
from fedanon.party.prepare import Proposal, prepare_run
from fedanon.party.run import Peer
from fedanon.security.policy import PartyPolicy, PolicyRefused, policy_for_spec
from fedanon.security.policytoml import parse_policy, policy_to_toml
from fedanon.union.localparty import LocalParty

RING = ["hospital-a", "hospital-b", "hospital-c"]
LKC = {
    "min_K": 10,
    "min_L": 3,
    "max_C": 0.5,
    "release_unchanged": ["Class"],
    "sensitive_column": "notes",  # max_C < 1 names the column it bounds
    "sensitive_values": ["x"],
}


def dp_spec(epsilon: str = "1.0", cls_role: str = "class", other: str = "other") -> RunSpec:
    return parse_dp_spec(
        f'[privacy]\nmodel = "dp"\nepsilon = {epsilon}\nspecializations = 3\n'
        '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
        f'[[attribute]]\nname = "notes"\nrole = "{other}"\n'
        f'[[attribute]]\nname = "Class"\nrole = "{cls_role}"\nvalues = ["n", "y"]\n'
    ).run  # the run spec of a DP run, as a party receives it


def policy(**kw: object) -> PartyPolicy:
    return parse_policy({**LKC, **kw}, "party.toml")


def refusal(p: PartyPolicy, spec: RunSpec) -> PolicyRefused:
    with pytest.raises(PolicyRefused) as err:
        p.check(spec, RING, "hospital-b", "leader")
    return err.value


def test_no_max_epsilon_refuses_every_dp_run() -> None:
    err = refusal(policy(), dp_spec("0.01"))
    assert err.rule == "max_epsilon" and err.exit_code == 2
    assert "no max_epsilon" in str(err) and "epsilon = 0.01" in str(err)


@pytest.mark.parametrize(
    ("eps", "limit", "ok"),
    [
        ("1.0", 1.0, True),
        ("0.1", 0.1, True),  # the decimals as written: 1/10 <= 0.1, not the float above it
        ("0.3", 0.3, True),
        ("0.300001", 0.3, False),
        ("2", 1, False),
        ("0.5", 1, True),
    ],
)
def test_epsilon_against_max_epsilon(eps: str, limit: float, ok: bool) -> None:
    p = policy(max_epsilon=limit)
    if ok:
        p.check(dp_spec(eps), RING, "hospital-b", "leader")
    else:
        err = refusal(p, dp_spec(eps))
        assert err.rule == "max_epsilon"
        assert str(err) == f"epsilon = {float(eps):g} > max_epsilon = {limit:g}"


def test_lkc_keys_do_not_apply_but_ring_and_class_do() -> None:
    strict = policy(min_K=1000, min_L=50, max_C=0.01, max_epsilon=1.0)
    strict.check(dp_spec(other="sensitive"), RING, "hospital-b")
    # the class column is released (with noisy counts): it must be allowed unchanged
    err = refusal(policy(max_epsilon=1.0, release_unchanged=[]), dp_spec())
    assert err.rule == "release_unchanged" and "'Class'" in str(err)
    # min_parties and allowed_parties still hold
    with pytest.raises(PolicyRefused) as err2:
        policy(max_epsilon=1.0, min_parties=4).check(dp_spec(), RING, "hospital-b")
    assert err2.value.rule == "min_parties"
    with pytest.raises(PolicyRefused) as err3:
        policy(max_epsilon=1.0, allowed_parties=["hospital-a"]).check(
            dp_spec(),
            RING,
            "hospital-b",
        )
    assert err3.value.rule == "allowed_parties"


@pytest.mark.parametrize("bad", [0, -1, 101, True, "1", float("nan"), float("inf")])
def test_invalid_max_epsilon(bad: object) -> None:
    with pytest.raises(ConfigError) as err:
        policy(max_epsilon=bad)
    assert "max_epsilon" in str(err.value) and err.value.exit_code == 2


def test_party_toml_round_trip() -> None:
    p = PartyPolicy(**{**policy(max_epsilon=0.5).__dict__, "max_total_epsilon": 1.0})
    assert p.max_epsilon == 0.5 and policy().max_epsilon is None
    text = (
        '[party]\nname = "hospital-b"\nlisten = "127.0.0.1:0"\ndata = "d.csv"\n'
        '[tls]\nca = "ca.pem"\ncert = "b.pem"\nkey = "b.key"\n' + policy_to_toml(p)
    )
    cfg = parse_party_config(text, "party.toml")
    assert cfg.policy == PartyPolicy(**{**p.__dict__, "source": "party.toml"})
    assert "max_epsilon = 0.5" in policy_to_toml(p) and "max_epsilon" not in policy_to_toml(
        policy()
    )


def test_policy_for_dp_spec_allows_exactly_the_spec() -> None:
    s = dp_spec("0.25")
    p = policy_for_spec(s)  # the DP method's local policy
    p.check(s, RING, "hospital-b")
    assert p.max_epsilon == 0.25 and p.release_unchanged == ("Class",)
    refusal(p, dp_spec("0.250001"))


# ---------------------------------------------------------------------- party Prepare
def _cfg(tmp: Path, data: Path, pol: PartyPolicy | None, pin: Path | None = None) -> PartyConfig:
    return PartyConfig(
        name="hospital-b",
        listen="127.0.0.1:0",
        data=parse_source(str(data), None, None, tmp),
        ca=tmp / "ca.pem",
        cert=tmp / "b.pem",
        key=tmp / "b.key",
        spec=pin,
        policy=pol,
    )


def _proposal(spec: Path) -> Proposal:
    files = {
        f: (spec.parent / f).read_bytes()
        for f in ("job.txt", "sex.txt")
        if (spec.parent / f).exists()
    }
    return Proposal(
        run_id=b"r" * 16,
        spec_toml=spec.read_text(),
        files=files,
        ring=tuple(Peer(n, f"{n}:1") for n in RING),
        position=1,
    )


def test_prepare_builds_a_dp_party_and_answers_the_dp_run_hash(tmp_path: Path) -> None:
    spec_path, data = small_case(tmp_path, epsilon="0.5")
    pol = PartyPolicy(2, 1, 1.0, release_unchanged=("Class",), max_epsilon=0.5)
    run, digest = prepare_run(_cfg(tmp_path, data, pol), _proposal(spec_path))
    spec, reader = load_dp_spec(spec_path)
    assert isinstance(run.party, DPParty) and run.dp == spec.params
    assert digest == dp_run_hash(spec, build_schema(spec.run, reader).files)
    # the hash covers epsilon, h and the score
    for old, new in (
        ("epsilon = 0.5", "epsilon = 0.4"),
        ("specializations = 3", "specializations = 4"),
        ('score = "max"', 'score = "infogain"'),
    ):
        other = tmp_path / "other.toml"
        other.write_text(spec_path.read_text().replace(old, new))
        assert other.read_text() != spec_path.read_text(), old
        s2, r2 = load_dp_spec(other)
        assert dp_run_hash(s2, build_schema(s2.run, r2).files) != digest, new
    # a DP party hands out no records: it has none to give, and the union RPCs are refused
    assert not hasattr(run.party, "released_columns")
    with pytest.raises(ProtocolError, match="noisy counts only"):
        run.union_batch([], b"", 64)


def test_prepare_refuses_without_max_epsilon_before_reading(tmp_path: Path) -> None:
    spec_path, _ = small_case(tmp_path, epsilon="0.5")
    pol = PartyPolicy(2, 1, 1.0, release_unchanged=("Class",))
    missing = tmp_path / "not-there.csv"  # never read: the policy refuses first
    with pytest.raises(PolicyRefused) as err:
        prepare_run(_cfg(tmp_path, missing, pol), _proposal(spec_path))
    assert err.value.rule == "max_epsilon"


def test_pinned_dp_spec(tmp_path: Path) -> None:
    spec_path, data = small_case(tmp_path)
    run, _ = prepare_run(_cfg(tmp_path, data, None, pin=spec_path), _proposal(spec_path))
    assert isinstance(run.party, DPParty)
    lkc = tmp_path / "lkc.toml"
    lkc.write_text(
        '[privacy]\nL = 1\nK = 2\nC = 1.0\n[[attribute]]\nname = "Id"\nrole = "identifier"\n'
        '[[attribute]]\nname = "Note"\nrole = "identifier"\n'
        '[[attribute]]\nname = "Job"\nrole = "identifier"\n'
        '[[attribute]]\nname = "Sex"\nrole = "identifier"\n'
        '[[attribute]]\nname = "Age"\nrole = "qid"\n'
        'type = "numeric"\ndomain = [0, 100]\n[[attribute]]\nname = "Class"\nrole = "class"\n'
        'values = ["N", "Y", "Z"]\n'
    )
    run2, _ = prepare_run(_cfg(tmp_path, data, None, pin=lkc), _proposal(spec_path))
    assert type(run2.party) is LocalParty and run2.dp is None


# ------------------------------------------------------- what a DP party accepts from the leader
def test_dp_party_enforces_h_full_children_and_no_union(tmp_path: Path) -> None:
    from fedanon.dp.randomness import RandomSource
    from fedanon.dp.run import new_decider, run_dp
    from fedanon.io.table import encode_table
    from fedanon.tds.engine import LocalFederation
    from fedanon.tds.state import Update
    from fedanon.union.sketch_union import SketchParams

    spec_path, data = small_case(tmp_path, h=3)
    spec, reader = load_dp_spec(spec_path)
    schema = build_schema(spec.run, reader)
    table = encode_table(schema, data)
    ok = DPParty(schema, table, max_selections=3)
    run_dp(new_decider(spec, schema, RandomSource(5)), LocalFederation([ok]))
    assert ok.selections == 3
    short = DPParty(schema, table, max_selections=2)  # a leader asking for more than h
    with pytest.raises(ProtocolError, match="selection 3 of a DP run with h = 2"):
        run_dp(new_decider(spec, schema, RandomSource(5)), LocalFederation([short]))
    fresh = DPParty(schema, table, max_selections=3)
    n_root_children = len(fresh.state.trees[0].children[0])
    with pytest.raises(ProtocolError, match="every child"):
        fresh.apply(
            Update(round=0, best=(0, 0), children_mask=b"\x01" + b"\x00" * (n_root_children - 1))
        )
    with pytest.raises(ProtocolError, match="no record union"):
        fresh.apply(Update(round=0, union=SketchParams.__new__(SketchParams)))
