"""`fedanon leader run` parses its command line without importing the DP engine (the
handshakes with the parties start after parsing: every tenth of a second counts on a WAN);
``--seed`` still checks its value."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fedanon.leader import cli


def test_the_leader_parser_does_not_import_the_dp_engine() -> None:
    code = (
        "import argparse, sys\n"
        "from fedanon.leader import cli\n"
        "p = argparse.ArgumentParser()\n"
        "cli.register(p.add_subparsers())\n"
        "print('fedanon.dp.method' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_seed_is_still_checked() -> None:
    import argparse

    p = argparse.ArgumentParser()
    cli.register(p.add_subparsers(dest="c"))
    args = p.parse_args(["leader", "run", "--config", "f.toml", "--seed", "7"])
    assert args.seed == 7
    with pytest.raises(SystemExit):
        p.parse_args(["leader", "run", "--config", "f.toml", "--seed", "x"])
