"""A daemon that `fedanon federate` started with --digest-file stops when it cannot write the
file: federate waits for that file as long as the daemon lives (up to LOAD_WAIT_S, 600 s), so
a daemon that only logged the failure (a full disk, its directory gone) held the run for ten
minutes before anything was said."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from fedanon.party import server


def test_a_digest_that_cannot_be_written_stops_the_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(server.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    write = server._digest_writer(tmp_path / "gone" / "h0.digest")  # no such directory
    write(None)
    assert sent == [(server.os.getpid(), signal.SIGTERM)]


def test_a_written_digest_leaves_the_daemon_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(server.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    server._digest_writer(tmp_path / "h0.digest")(None)
    assert (tmp_path / "h0.digest").read_text() == "-\n" and sent == []


class _Exited:
    def poll(self) -> int:
        return 0


def test_federate_names_a_daemon_that_listened_then_stopped(tmp_path: Path) -> None:
    # its port file was written, then it stopped (its digest unwritten): named with its log
    # at once, not left for the leader to find 'connection refused'
    from fedanon.errors import RunAborted
    from fedanon.leader.localdaemons import Daemon, _wait_ready

    (tmp_path / "h0.port").write_text("4242\n")
    (tmp_path / "h0.log").write_text("ERROR cannot write the table digest: OSError; stopping\n")
    d = Daemon("h0", _Exited(), tmp_path / "h0.port", tmp_path / "h0.toml")  # type: ignore[arg-type]
    with pytest.raises(RunAborted, match="party daemon h0 exited at start-up") as err:
        _wait_ready([d], tmp_path)
    assert "cannot write the table digest" in str(err.value)
