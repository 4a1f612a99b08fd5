"""party.toml and federation.toml: validated on load, clear errors (exit 2 family)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.errors import ConfigError
from fedanon.leader.config import parse_federation_config
from fedanon.party.config import parse_party_config

PARTY = """
[party]
name = "hospital-a"
listen = "0.0.0.0:7443"
data = "patients.csv"
[tls]
ca = "ca.pem"
cert = "hospital-a.pem"
key = "hospital-a.key"
"""

FEDERATION = """
[run]
spec = "run.toml"
output = "released.csv"
[leader]
name = "leader"
[tls]
ca = "ca.pem"
cert = "leader.pem"
key = "leader.key"
""" + "".join(f'[[party]]\nname = "h{i}"\naddress = "h{i}.example:7443"\n' for i in range(3))


def test_party_config_paths_are_relative_to_the_file() -> None:
    cfg = parse_party_config(PARTY, "party.toml", Path("/etc/fedanon"))
    assert cfg.name == "hospital-a" and cfg.leader == "leader"
    assert cfg.data == Path("/etc/fedanon/patients.csv")
    assert cfg.key == Path("/etc/fedanon/hospital-a.key")


def test_federation_config() -> None:
    cfg = parse_federation_config(FEDERATION, "federation.toml", Path("/srv"))
    assert [p.name for p in cfg.parties] == ["h0", "h1", "h2"]
    assert cfg.output == Path("/srv/released.csv") and cfg.report is None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (PARTY.replace('key = "hospital-a.key"', 'key = "k"\nkee = "x"'), "unknown key"),
        (PARTY.replace("[tls]", "[tlz]"), "tlz"),
        (PARTY.replace('name = "hospital-a"', 'name = "Hospital A"'), "name"),
        (PARTY + "[[[", "not valid TOML"),
    ],
)
def test_party_config_errors(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_party_config(text, "party.toml")


def test_fewer_than_three_parties_is_an_error() -> None:
    from fedanon.leader.config import check_parties

    cfg = parse_federation_config(FEDERATION, "federation.toml")
    with pytest.raises(ConfigError, match="3"):
        check_parties(cfg.parties[:2], "federation.toml")


POLICY = """
[policy]
min_K = 10
min_L = 3
max_C = 0.5
min_parties = 4
release_unchanged = ["salary-class", "marital-status"]
sensitive_column = "marital-status"
sensitive_values = ["Divorced"]
"""


def test_party_config_policy() -> None:
    cfg = parse_party_config(PARTY + POLICY, "party.toml")
    assert cfg.policy is not None
    assert (cfg.policy.min_K, cfg.policy.min_L, cfg.policy.max_C) == (10, 3, 0.5)
    assert cfg.policy.min_parties == 4 and cfg.policy.sensitive_column == "marital-status"
    cfg.require_policy()
    # defaults: at least 3 parties, nothing released unchanged
    minimal = parse_party_config(PARTY + "[policy]\nmin_K = 5\nmin_L = 1\nmax_C = 1\n")
    assert minimal.policy is not None and minimal.policy.min_parties == 3
    assert minimal.policy.release_unchanged == () and minimal.policy.max_C == 1.0


def test_party_config_without_policy_or_pinned_spec_is_refused_for_serving() -> None:
    cfg = parse_party_config(PARTY, "party.toml")
    with pytest.raises(ConfigError, match=r"add a \[policy\] table") as err:
        cfg.require_policy()
    assert "party.toml" in str(err.value) and 'spec = "run.toml"' in str(err.value)
    pinned = parse_party_config(PARTY.replace("[tls]", 'spec = "run.toml"\n[tls]'), "p.toml")
    pinned.require_policy()


RU = 'release_unchanged = ["salary-class", "marital-status"]'


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (("min_K = 10", 'min_K = "10"'), "min_K is invalid.*'10'"),
        (("min_K = 10", "min_K = 0"), "min_K is invalid"),
        (("min_K = 10", "min_K = true"), "min_K is invalid"),
        (("min_L = 3", "min_L = 2.5"), "min_L is invalid"),
        (("max_C = 0.5", "max_C = 1.5"), r"max_C is invalid.*\(0, 1\]"),
        (("max_C = 0.5", "max_C = 0"), "max_C is invalid"),
        (("max_C = 0.5", "max_C = true"), "max_C is invalid"),
        (("min_parties = 4", "min_parties = 2"), "min_parties is invalid.*>= 3"),
        ((RU, 'release_unchanged = "salary-class"'),
         "release_unchanged is invalid"),
        ((RU, "release_unchanged = [1]"),
         "release_unchanged is invalid"),
        ((RU, 'release_unchanged = ["a", "a"]'),
         "release_unchanged is invalid"),
        (("min_K = 10", "min_k = 10"), "unknown key.*min_k"),
        (("min_L = 3\n", ""), r"\[policy\] needs min_L"),
    ],
)  # fmt: skip
def test_party_config_policy_errors(change: tuple[str, str], needle: str) -> None:
    text = PARTY + POLICY.replace(*change)
    with pytest.raises(ConfigError, match=needle) as err:
        parse_party_config(text, "party.toml")
    assert str(err.value).startswith("party.toml")


def test_party_config_idle_timeout() -> None:
    text = PARTY.replace("[tls]", "run_idle_timeout_seconds = 2.5\n[tls]")
    assert parse_party_config(text).idle_timeout_s == 2.5
    with pytest.raises(ConfigError, match="run_idle_timeout_seconds"):
        parse_party_config(text.replace("2.5", "-1"))


def test_federation_connect_timeout() -> None:
    cfg = parse_federation_config(FEDERATION, "federation.toml")
    assert cfg.connect_timeout_seconds == 10.0
    text = FEDERATION.replace("[leader]", "connect_timeout_seconds = 3\n[leader]")
    assert parse_federation_config(text).connect_timeout_seconds == 3.0
    with pytest.raises(ConfigError, match="connect_timeout_seconds"):
        parse_federation_config(text.replace("= 3", "= 0"))
