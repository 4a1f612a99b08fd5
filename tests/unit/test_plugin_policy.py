"""A hospital's policy and a plug-in privacy model: choosing another model name never
bypasses the policy.  The model must be in ``allowed_models`` (default: lkc only), and its
L, K, C equivalents (k-anonymity: L = |QID|, C = 1) meet min_K, min_L, max_C.  A refused
proposal is refused at Prepare, before the party's table is read: no PartyRun exists, so not
one byte of statistics can be sent."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kanon_plugin import KAnonymity, Opaque

import fedanon.party.prepare
from fedanon.errors import ConfigError
from fedanon.io.sources import parse_source
from fedanon.io.table import build_schema
from fedanon.model.spec import load_spec, parse_spec, run_hash
from fedanon.party.config import PartyConfig, parse_party_config
from fedanon.party.prepare import Proposal, accepted_line, prepare_run
from fedanon.party.run import Peer
from fedanon.privacy.base import register_model
from fedanon.security.policy import PartyPolicy, PolicyRefused, policy_for_spec
from fedanon.security.policytoml import parse_policy, policy_to_toml

register_model("kanon", KAnonymity)  # the same object as test_plugins registers
register_model("opaque", Opaque)

RING = ["hospital-a", "hospital-b", "hospital-c"]
UNCHANGED = ("Transfuse", "Surgery")
ATTRS = (
    '[[attribute]]\nname = "ID"\nrole = "identifier"\n'
    '[[attribute]]\nname = "Job"\nrole = "qid"\ntype = "categorical"\ntaxonomy = "job.txt"\n'
    '[[attribute]]\nname = "Sex"\nrole = "qid"\ntype = "categorical"\ntaxonomy = "sex.txt"\n'
    '[[attribute]]\nname = "Age"\nrole = "qid"\ntype = "numeric"\ndomain = [1, 99]\n'
    'taxonomy = "age.txt"\n'
    '[[attribute]]\nname = "Transfuse"\nrole = "class"\nvalues = ["N", "Y"]\n'
    '[[attribute]]\nname = "Surgery"\nrole = "sensitive"\n'
)


def kanon(k: int = 2, model: str = "kanon") -> str:
    return f'[privacy]\nmodel = "{model}"\nK = {k}\n' + ATTRS


def policy(**kw: object) -> PartyPolicy:
    base = {"min_K": 2, "min_L": 2, "max_C": 1.0, "release_unchanged": list(UNCHANGED)}
    return parse_policy({**base, **kw}, "party.toml")


def refused(p: PartyPolicy, text: str) -> PolicyRefused:
    with pytest.raises(PolicyRefused) as err:
        p.check(parse_spec(text), RING, "hospital-b", "leader")
    return err.value


def test_a_model_outside_allowed_models_is_refused() -> None:
    err = refused(policy(), kanon(50))  # the default: lkc only, whatever K
    assert err.rule == "allowed_models"
    assert str(err) == "model = 'kanon' is not in allowed_models = ['lkc']"
    err = refused(policy(max_epsilon=1.0, allowed_models=["lkc", "dp"]), kanon(50))
    assert err.rule == "allowed_models"
    assert policy().models == ("lkc",) and policy(max_epsilon=1.0).models == ("lkc", "dp")


def test_an_allowed_model_meets_the_floors_through_its_lkc_equivalent() -> None:
    p = policy(min_K=5, min_L=3, allowed_models=["lkc", "kanon"])
    p.check(parse_spec(kanon(5)), RING, "hospital-b", "leader")  # L = |QID| = 3 >= min_L
    err = refused(p, kanon(4))
    assert err.rule == "min_K"
    assert str(err) == "K = 4 < min_K = 5 (model = 'kanon' is LKC with L=3 K=4 C=1)"
    # k-anonymity bounds no confidence: C = 1 > max_C
    # (release_unchanged empty: max_C < 1 with columns released unchanged needs a
    # sensitive_column; max_C is checked before release_unchanged)
    err = refused(policy(max_C=0.5, release_unchanged=[], allowed_models=["kanon"]), kanon(50))
    assert err.rule == "max_C" and str(err).startswith("C = 1 > max_C = 0.5")
    # allowed_models = ["kanon"] alone refuses LKC runs
    lkc = '[privacy]\nL = 3\nK = 9\nC = 1.0\nsensitive_values = ["x"]\n' + ATTRS
    assert refused(policy(allowed_models=["kanon"]), lkc).rule == "allowed_models"
    policy(allowed_models=["lkc"]).check(parse_spec(lkc), RING, "hospital-b")


def test_an_allowed_model_without_lkc_equivalent_is_refused() -> None:
    err = refused(policy(allowed_models=["lkc", "opaque"]), kanon(50, "opaque"))
    assert err.rule == "allowed_models" and "states no L, K, C" in str(err)


def test_allowed_models_in_party_toml() -> None:
    # max_epsilon needs its ledger budget in party.toml (set on the object: parse_policy
    # reads no budget keys)
    dp = policy(allowed_models=["lkc", "kanon"], max_epsilon=0.5)
    p = PartyPolicy(**{**dp.__dict__, "max_total_epsilon": 1.0})
    assert 'allowed_models = ["lkc", "kanon"]' in policy_to_toml(p)
    assert "allowed_models" not in policy_to_toml(policy())
    text = (
        '[party]\nname = "hospital-b"\nlisten = "127.0.0.1:0"\ndata = "d.csv"\n'
        '[tls]\nca = "ca.pem"\ncert = "b.pem"\nkey = "b.key"\n' + policy_to_toml(p)
    )
    assert parse_party_config(text, "party.toml").policy == PartyPolicy(
        **{**p.__dict__, "source": "party.toml"}
    )
    for bad, needle in (
        ("lkc", "allowed_models is invalid"),
        ([], "allowed_models is invalid"),
        (["lkc", "lkc"], "allowed_models is invalid"),
        (["lkc", ""], "allowed_models is invalid"),
        (["dp"], "allowed_models is invalid"),  # dp only with max_epsilon
    ):
        with pytest.raises(ConfigError, match=needle):
            policy(allowed_models=bad)
    assert policy_for_spec(parse_spec(kanon(3))).models == ("lkc", "kanon")


# ---------------------------------------------------------------------- party Prepare
def _case(table1_dir: Path, tmp: Path, text: str) -> Path:
    for f in ("job.txt", "sex.txt", "age.txt", "table1.csv"):
        shutil.copy(table1_dir / f, tmp / f)
    (tmp / "run.toml").write_text(text)
    return tmp / "run.toml"


def _cfg(tmp: Path, data: Path, pol: PartyPolicy) -> PartyConfig:
    return PartyConfig(
        name="hospital-b",
        listen="127.0.0.1:0",
        data=parse_source(str(data), None, None, tmp),
        ca=tmp / "ca.pem",
        cert=tmp / "b.pem",
        key=tmp / "b.key",
        policy=pol,
    )


def _proposal(spec: Path) -> Proposal:
    files = {f: (spec.parent / f).read_bytes() for f in ("job.txt", "sex.txt", "age.txt")}
    ring = tuple(Peer(n, f"{n}:1") for n in RING)
    return Proposal(b"r" * 16, spec.read_text(), files, ring, 1)


def test_prepare_refuses_a_model_not_allowed_before_parsing_or_reading(
    table1_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _case(table1_dir, tmp_path, kanon(50))

    def no(*a: object, **k: object) -> None:
        raise AssertionError("must not be reached")

    class NoSpec:  # the one spec parser must not be reached: refused on the text
        from_text = staticmethod(no)
        from_toml = staticmethod(no)

    monkeypatch.setattr(fedanon.party.prepare, "Spec", NoSpec)
    monkeypatch.setattr(fedanon.party.prepare, "encode_table", no)  # the table is never read
    missing = tmp_path / "never-read.csv"
    with pytest.raises(PolicyRefused) as err:
        prepare_run(_cfg(tmp_path, missing, policy()), _proposal(spec))
    assert err.value.rule == "allowed_models"
    # allowed, but K below min_K: refused after parsing, still before the table
    monkeypatch.setattr(fedanon.party.prepare, "Spec", fedanon.Spec)
    with pytest.raises(PolicyRefused) as err:
        prepare_run(
            _cfg(tmp_path, missing, policy(min_K=60, allowed_models=["kanon"])), _proposal(spec)
        )
    assert err.value.rule == "min_K"


def test_prepare_accepts_an_allowed_model_and_binds_it_in_the_run_hash(
    table1_dir: Path, tmp_path: Path
) -> None:
    spec = _case(table1_dir, tmp_path, kanon(2))
    pol = policy(allowed_models=["lkc", "kanon"])
    run, digest = prepare_run(_cfg(tmp_path, tmp_path / "table1.csv", pol), _proposal(spec))
    assert run.spec.privacy.model == "kanon" and run.spec.privacy.params.K == 2
    s, reader = load_spec(spec)
    assert digest == run_hash(s, build_schema(s, reader).files)
    line = accepted_line(run, "leader", digest)
    assert "model=kanon K=2 score=infogain" in line and "Surgery" in line
    # the same groups as LKC with L = |QID|, C = 1 -- yet another run: another hash
    lkc = tmp_path / "lkc.toml"
    lkc.write_text("[privacy]\nL = 3\nK = 2\nC = 1.0\n" + ATTRS)
    s2, r2 = load_spec(lkc)
    assert run_hash(s2, build_schema(s2, r2).files) != digest
    # the implementation is bound too: the same name served by another class differs
    assert s.canonical()["privacy"]["implementation"] == "kanon_plugin:KAnonymity"


def test_allowed_models_can_exclude_dp_runs() -> None:
    from fedanon.dp.spec import parse_dp_spec

    dp = parse_dp_spec(
        '[privacy]\nmodel = "dp"\nepsilon = 0.5\nspecializations = 3\n'
        '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
        '[[attribute]]\nname = "Transfuse"\nrole = "class"\nvalues = ["n", "y"]\n'
    ).run
    policy(max_epsilon=1.0).check(dp, RING, "hospital-b")  # default: dp with max_epsilon
    with pytest.raises(PolicyRefused) as err:
        policy(max_epsilon=1.0, allowed_models=["lkc"]).check(dp, RING, "hospital-b")
    assert err.value.rule == "allowed_models" and "'dp'" in str(err.value)
    with pytest.raises(PolicyRefused) as err:  # without max_epsilon: the rule of old
        policy().check(dp, RING, "hospital-b")
    assert err.value.rule == "max_epsilon"
