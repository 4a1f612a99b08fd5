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


def test_a_certificate_of_another_member_names_both_files(tmp_path: Path) -> None:
    """[tls] cert and key of hospital-b in hospital-a's party.toml: it said 'certificate is
    for 'hospital-b', config names 'hospital-a'', naming neither the certificate's file nor
    the field, nor the two ways out."""
    from fedanon.party.server import startup_checks
    from fedanon.security import certs
    from fedanon.security.tls import TlsMaterial

    certs.init_ca(tmp_path)
    certs.issue(tmp_path, "hospital-b", "party")
    (tmp_path / "patients.csv").write_text("a\n1\n")
    text = PARTY.replace("hospital-a.pem", "hospital-b.pem").replace(
        "hospital-a.key", "hospital-b.key"
    )
    source = str(tmp_path / "party.toml")
    cfg = parse_party_config(text, source, tmp_path)
    tls = TlsMaterial.load(cfg.ca, cfg.cert, cfg.key)
    with pytest.raises(ConfigError) as err:
        startup_checks(cfg, tls)
    msg = str(err.value)
    assert msg.startswith(f"{source}: [party] name is 'hospital-a'"), msg
    assert str(tmp_path / "hospital-b.pem") in msg, msg
    assert 'name = "hospital-b"' in msg and "issued for hospital-a" in msg, msg
