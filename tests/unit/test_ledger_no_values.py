"""The hospital's ledger never stores a record value: a Prepare that failed on the data is
ledgered with where it failed and what was expected, not with the offending value (the
ledger is shown to privacy officers and copied into reports)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.errors import InputError
from fedanon.ledger.daemon import DaemonLedger
from fedanon.ledger.show import rows
from fedanon.party.ledgered import LedgerGate
from fedanon.security.policy import PartyPolicy

SECRET = "Lindqvist-1957-03-14"


class _Ctx:
    def peer(self) -> str:
        return "ipv4:10.0.0.5:40000"

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}

    def set_trailing_metadata(self, md: tuple[tuple[str, str], ...]) -> None:
        pass


def test_a_data_failure_is_ledgered_without_the_value(tmp_path: Path) -> None:
    policy = PartyPolicy(min_K=2, min_L=1, max_C=1.0)
    led = DaemonLedger(tmp_path / "l.sqlite", policy, tmp_path / "data.csv")
    gate = LedgerGate(led, "leader")
    error = InputError(
        "number outside the declared domain",
        file=str(tmp_path / "data.csv"),
        line=2,
        column="age",
        value=SECRET,
        expected="a number in [17, 91)",
    )
    assert SECRET in str(error)  # what the engine raises carries it
    with pytest.raises(InputError), gate.prepare(_Ctx(), b"r" * 16):  # type: ignore[arg-type]
        raise error
    ledgered = [r for r in rows(led.store) if r.get("run_id") == (b"r" * 16).hex()]
    assert ledgered, "the failed Prepare is ledgered"
    text = repr(ledgered)
    assert SECRET not in text
    assert "line 2" in text and "age" in text  # where it failed stays
    led.close()
