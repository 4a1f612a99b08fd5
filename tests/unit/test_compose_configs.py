"""The compose demo's configs (deploy/compose): every hospital has a policy, the demo's run
meets it, and the policy is a real floor (a weaker run of the same spec is refused)."""

from __future__ import annotations

import dataclasses
import re
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


def _dockerfile_owned_dirs(dockerfile: str) -> set[str]:
    """The directories the image's ``chown fedanon:fedanon ...`` hands to the daemon's user."""
    owned: set[str] = set()
    for match in re.finditer(r"chown\s+fedanon:fedanon\s+([^;\\\n]+)", dockerfile):
        owned.update(match.group(1).split())
    return owned


def _mounts(service: dict[str, object]) -> list[tuple[str, str, bool]]:
    """(source, target, writable) of a service's short-syntax volume entries."""
    out = []
    for entry in service.get("volumes", []) or []:  # type: ignore[union-attr]
        source, target, *mode = str(entry).split(":")
        out.append((source, target, "ro" not in mode))
    return out


def test_every_writable_named_volume_is_mounted_on_a_directory_of_the_daemon_user() -> None:
    """A fresh named volume takes the owner of the image's directory it is mounted on, and
    root's when the image has none: the daemon (uid 10001) then cannot write it (a ledger
    that cannot be created stops the hospital, which compose reports as "unhealthy")."""
    import yaml

    doc = yaml.safe_load((COMPOSE.parent / "docker-compose.yml").read_text(encoding="utf-8"))
    owned = _dockerfile_owned_dirs((COMPOSE.parent / "Dockerfile").read_text(encoding="utf-8"))
    assert "/ledger" in owned and "/out" in owned, owned
    for name, service in doc["services"].items():
        for source, target, writable in _mounts(service):
            if writable and not source.startswith((".", "/")):  # a named volume, read-write
                assert target in owned, f"{name}: {source}:{target} is not the daemon user's"


@pytest.mark.parametrize("letter", HOSPITALS)
def test_each_hospital_ledger_is_on_its_own_writable_volume(letter: str) -> None:
    """The ledger persists on a volume of this hospital alone; the config folder is read-only."""
    import yaml

    doc = yaml.safe_load((COMPOSE.parent / "docker-compose.yml").read_text(encoding="utf-8"))
    services = doc["services"]
    config = load_party_config(COMPOSE / f"party-{letter}.toml")
    assert config.ledger is not None and config.ledger.is_absolute(), config.ledger
    mounts = {
        target: (source, rw) for source, target, rw in _mounts(services[f"hospital-{letter}"])
    }
    assert mounts["/config"][1] is False, "/config must be mounted read-only"
    parent = str(config.ledger.parent)
    assert parent in mounts, f"{config.ledger}: no volume is mounted on {parent}"
    source, writable = mounts[parent]
    assert writable and source in doc["volumes"], (source, writable)
    others = [svc for svc_name, svc in services.items() if svc_name != f"hospital-{letter}"]
    assert not any(source == s for svc in others for s, _, _ in _mounts(svc)), source
