"""--insecure (no TLS, no identities) is for experiments on one machine: a daemon refuses to
serve plaintext on any other interface, and a leader to talk plaintext to a hospital that is
not on this machine (exit 2 naming the file, the field and the address), before anything
binds or connects."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.cli.main import main
from fedanon.errors import ConfigError
from fedanon.security.tls import require_loopback

PARTY = """
[party]
name = "hospital-a"
listen = "{listen}"
data = "patients.csv"

[policy]
min_K = 10
min_L = 3
max_C = 1

[tls]
ca = "ca.pem"
cert = "hospital-a.pem"
key = "hospital-a.key"
"""


@pytest.mark.parametrize("address", ["127.0.0.1:7443", "127.9.9.9:0", "[::1]:7443", "localhost:1"])
def test_loopback_addresses_pass(address: str) -> None:
    require_loopback(address, "[party] listen", "party.toml")


@pytest.mark.parametrize(
    "address", ["0.0.0.0:7443", "[::]:7443", "10.1.2.3:7443", "hospital-a.example.org:7443"]
)
def test_other_addresses_are_refused(address: str) -> None:
    with pytest.raises(ConfigError) as err:
        require_loopback(address, "[party] listen", "party.toml")
    text = str(err.value)
    assert text.startswith("party.toml: [party] listen: --insecure"), text
    assert repr(address) in text and "127.0.0.1" in text, text


def test_party_serve_insecure_on_all_interfaces_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It served plaintext on 0.0.0.0 with a warning: anyone on the network could call it as
    its leader."""
    config = tmp_path / "party.toml"
    config.write_text(PARTY.format(listen="0.0.0.0:0"))
    assert main(["party", "serve", "--config", str(config), "--insecure"]) == 2
    err = capsys.readouterr().err
    assert "[party] listen: --insecure" in err and "'0.0.0.0:0'" in err, err
    assert not list(tmp_path.glob("*.sqlite*")), "refused before the ledger is opened"


def test_leader_run_insecure_to_another_machine_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "federation.toml"
    parties = "".join(
        f'[[party]]\nname = "hospital-{x}"\naddress = "{addr}"\n'
        for x, addr in zip("abc", ["127.0.0.1:7441", "10.0.0.2:7443", "127.0.0.1:7443"])
    )
    config.write_text(
        '[run]\nspec = "run.toml"\noutput = "released.csv"\n\n'
        '[tls]\nca = "ca.pem"\ncert = "leader.pem"\nkey = "leader.key"\n\n' + parties
    )
    assert main(["leader", "run", "--config", str(config), "--insecure"]) == 2
    err = capsys.readouterr().err
    assert "[[party]] hospital-b address: --insecure" in err and "'10.0.0.2:7443'" in err, err
