"""The compose demo's configs (deploy/compose): every hospital has a policy, the demo's run
meets it, and the policy is a real floor (a weaker run of the same spec is refused)."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from fedanon.model.spec import AttributeSpec, load_spec
from fedanon.party.config import load_party_config
from fedanon.security.policy import PolicyRefused

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "compose"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HOSPITALS = ("a", "b", "c")


def _federation() -> dict[str, object]:
    return tomllib.loads((COMPOSE / "federation.toml").read_text(encoding="utf-8"))


def _ring() -> list[str]:
    parties = _federation()["party"]
    assert isinstance(parties, list)
    return [p["name"] for p in parties]


def _spec_path() -> Path:
    run = _federation()["run"]
    assert isinstance(run, dict)
    # /examples is the repository's examples/ folder, mounted read-only in the containers.
    return EXAMPLES / Path(run["spec"]).relative_to("/examples")


@pytest.mark.parametrize("letter", HOSPITALS)
def test_each_hospital_has_a_policy_the_demo_run_meets(letter: str) -> None:
    config = load_party_config(COMPOSE / f"party-{letter}.toml")
    assert config.name == f"hospital-{letter}"
    assert config.policy is not None, "the compose demo's hospitals must carry a [policy]"
    assert config.spec is not None and config.spec.name == _spec_path().name
    assert config.cert == Path(f"/certs/hospital-{letter}.pem")
    assert config.key == Path(f"/certs/hospital-{letter}.key")
    spec, _ = load_spec(_spec_path())
    ring = _ring()
    assert config.name in ring and len(set(ring)) >= 3
    config.policy.check(spec, ring, config.name, config.leader)


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"K": 19}, "min_K"),
        ({"L": 3}, "min_L"),
        ({"C": 0.25}, "max_C"),
    ],
)
def test_the_demo_policy_refuses_a_weaker_run(change: dict[str, float], rule: str) -> None:
    config = load_party_config(COMPOSE / "party-a.toml")
    assert config.policy is not None
    spec, _ = load_spec(_spec_path())
    weaker = dataclasses.replace(spec, privacy=spec.privacy.replace(**change))
    with pytest.raises(PolicyRefused) as info:
        config.policy.check(weaker, _ring(), config.name, config.leader)
    assert info.value.rule == rule


def test_the_demo_policy_refuses_raw_columns_and_small_rings() -> None:
    config = load_party_config(COMPOSE / "party-b.toml")
    assert config.policy is not None
    spec, _ = load_spec(_spec_path())
    raw = [
        AttributeSpec(name=a.name, role="other") if a.name == "native-country" else a
        for a in spec.attributes
    ]
    with pytest.raises(PolicyRefused) as info:
        config.policy.check(
            dataclasses.replace(spec, attributes=tuple(raw)), _ring(), config.name, config.leader
        )
    assert info.value.rule == "release_unchanged"
    with pytest.raises(PolicyRefused):
        config.policy.check(spec, [config.name], config.name, config.leader)


def test_hospitals_share_no_network_and_the_leader_reaches_each() -> None:
    """Pairwise sums: no network path between hospital containers (issue 19)."""
    import yaml

    doc = yaml.safe_load((COMPOSE.parent / "docker-compose.yml").read_text(encoding="utf-8"))
    services = doc["services"]

    def nets(name: str) -> set[str]:
        raw = services[name].get("networks", {})
        return set(raw) if isinstance(raw, dict | list) else set()

    hospitals = [f"hospital-{x}" for x in HOSPITALS]
    for i, a in enumerate(hospitals):
        assert nets(a), a
        assert nets(a) <= nets("leader"), a
        for b in hospitals[i + 1 :]:
            assert not nets(a) & nets(b), (a, b)
    assert all(doc["networks"][n].get("internal") for n in nets("leader"))
    run = _federation()["run"]
    assert isinstance(run, dict) and run.get("secure_sum") == "pairwise"
