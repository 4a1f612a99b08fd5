"""party.toml and federation.toml: validated on load, clear errors (exit 2 family)."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.errors import ConfigError
from leader.config import parse_federation_config
from party.config import parse_party_config

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
    from leader.config import check_parties

    cfg = parse_federation_config(FEDERATION, "federation.toml")
    with pytest.raises(ConfigError, match="3"):
        check_parties(cfg.parties[:2], "federation.toml")
