"""A federation name mistyped in party.toml or federation.toml ("Hospital A", "Leader"):
the refusal names the file and the field, not only 'invalid federation name'."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.errors import ConfigError
from fedanon.leader.config import parse_federation_config
from fedanon.party.config import parse_party_config

PARTY = """
[party]
name = "hospital-a"
listen = "127.0.0.1:7443"
data = "patients.csv"

[policy]
min_K = 10
min_L = 3
max_C = 1

[tls]
ca = "ca.pem"
cert = "hospital-a.pem"
key = "hospital-a.key"

[peers]
leader = "leader"
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

[[party]]
name = "hospital-a"
address = "127.0.0.1:7441"
[[party]]
name = "hospital-b"
address = "127.0.0.1:7442"
[[party]]
name = "hospital-c"
address = "127.0.0.1:7443"
"""


def _refused(parse: object, text: str) -> str:
    with pytest.raises(ConfigError) as err:
        parse(text, "site/party.toml", Path("site"))  # type: ignore[operator]
    return str(err.value)


def test_the_documented_configs_parse() -> None:
    assert parse_party_config(PARTY, "p.toml", Path(".")).name == "hospital-a"
    assert parse_federation_config(FEDERATION, "f.toml", Path(".")).name == "leader"


@pytest.mark.parametrize(
    ("old", "new", "field", "value"),
    [
        ('name = "hospital-a"', 'name = "Hospital A"', "[party] name", "Hospital A"),
        ('leader = "leader"', 'leader = "Leader"', "[peers] leader", "Leader"),
        ('leader = "leader"', 'leader = ["leader"]', "[peers] leader", "['leader']"),
    ],
)
def test_a_bad_name_in_party_toml_names_file_and_field(
    old: str, new: str, field: str, value: str
) -> None:
    text = _refused(parse_party_config, PARTY.replace(old, new))
    assert text.startswith("site/party.toml: "), text
    assert field in text and repr(value) in text and "a-z, 0-9" in text, text


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('name = "leader"', 'name = "the leader"', "[leader] name"),
        ('name = "hospital-b"', 'name = "Hospital-B"', "[[party]] #2 name"),
    ],
)
def test_a_bad_name_in_federation_toml_names_file_and_field(old: str, new: str, field: str) -> None:
    text = _refused(parse_federation_config, FEDERATION.replace(old, new))
    assert text.startswith("site/party.toml: "), text
    assert field in text and "a-z, 0-9" in text, text
