"""The local party daemons of `fedanon federate` (and of the tests and benchmarks): their
certificates and party.toml, one process per table (forked warm or started fresh), waiting
until they serve and have loaded their tables, and stopping them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fedanon.errors import RunAborted
from fedanon.leader import forked, tethered
from fedanon.leader.federateinputs import LEADER
from fedanon.security import certs
from fedanon.security.policytoml import policy_to_toml, toml_str

if TYPE_CHECKING:  # (the policy module loads the spec model and numpy: not for every CLI call)
    from fedanon.security.policy import PartyPolicy

__all__ = ["Daemon", "daemons", "free_ports", "loaded", "party_toml", "stop"]
START_TIMEOUT_S = 30.0
LOAD_WAIT_S = 600.0  # a daemon loading its table ahead (it always says when it is done)


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes] | forked.Forked
    port_file: Path
    config: Path
    port: int = 0
    mpc_port: int = 0  # its MPC worker's fixed port (m-private specs; 0: none)
    digest_file: Path | None = None  # its pinned table's digest, once loaded (--digest-file)


def party_toml(
    name: str,
    data: Path,
    certdir: Path,
    pin: Path | None = None,
    policy: PartyPolicy | None = None,
    mpc_port: int = 0,
) -> str:
    """party.toml of a local daemon: a pinned spec and/or a [policy] (see Method.local_policy).
    ``mpc_port``: the ``[mpc] listen`` port of its MPC worker (m-private runs; 0: none).

    With neither, the daemon refuses to start: it would accept any run.
    """
    q = toml_str  # every path as a TOML string: a quote or backslash in it stays itself
    spec = f"spec = {q(str(pin.resolve()))}\n" if pin is not None else ""
    rules = f"\n{policy_to_toml(policy)}" if policy is not None else ""
    mpc = f'\n[mpc]\nlisten = "127.0.0.1:{mpc_port}"\n' if mpc_port else ""
    return (
        f'[party]\nname = {q(name)}\nlisten = "127.0.0.1:0"\ndata = {q(str(data.resolve()))}\n'
        f"{spec}{rules}{mpc}\n"
        f"[tls]\nca = {q(str(certdir / 'ca.pem'))}\ncert = {q(str(certdir / (name + '.pem')))}\n"
        f"key = {q(str(certdir / (name + '.key')))}\n\n[peers]\nleader = {q(LEADER)}\n"
    )


@contextmanager
def daemons(
    parties: Sequence[tuple[str, Path]],
    workdir: Path,
    pins: dict[str, Path] | None = None,
    policy: PartyPolicy | None = None,
    fork: bool = False,
    while_starting: Callable[[Sequence[Daemon]], None] | None = None,
    mpc: bool = False,
) -> Iterator[list[Daemon]]:
    """Issue certificates and start one `party serve` process per table; stop them after.
    ``while_starting`` runs once every daemon is started, while they bind and load their
    tables (an exception stops them).  ``mpc``: every daemon gets an MPC port (m-privacy).

    ``pins`` makes some parties accept only runs of that spec file; such a daemon loads its
    table as it starts and writes its digest to ``workdir/NAME.digest``
    (:attr:`Daemon.digest_file`; see :func:`fedanon.leader.federateinputs.
    check_distinct_tables`).  Logs go to
    ``workdir/NAME.log``.  ``fork``: fork the daemons from this process, warm (see
    :mod:`fedanon.leader.forked`; only where :func:`fedanon.leader.forked.can_fork`).
    """
    fork = fork and forked.can_fork()
    if fork:
        forked.preload()
    certdir = workdir / "certs"
    certs.init_ca(certdir)
    certs.issue(certdir, LEADER, "leader")
    started: list[Daemon] = []
    ports = dict(zip((n for n, _ in parties), free_ports(len(parties)), strict=True)) if mpc else {}
    try:
        for name, data in parties:
            certs.issue(certdir, name, "party")
            cfg = workdir / f"{name}.toml"
            cfg.write_text(
                party_toml(name, data, certdir, (pins or {}).get(name), policy, ports.get(name, 0)),
                encoding="utf-8",
            )
            port_file = workdir / f"{name}.port"
            digest = workdir / f"{name}.digest" if (pins or {}).get(name) else None
            extra = [] if digest is None else ["--digest-file", str(digest)]
            if fork:
                argv = ["serve", "--config", str(cfg), "--port-file", str(port_file), *extra]
                proc = forked.fork_daemon(argv, workdir / f"{name}.log")
                started.append(
                    Daemon(
                        name, proc, port_file, cfg, mpc_port=ports.get(name, 0), digest_file=digest
                    )
                )
                continue
            log_file = (workdir / f"{name}.log").open("wb")
            cmd = [
                sys.executable,
                "-m",
                "fedanon.party",
                "serve",
                "--config",
                str(cfg),
                "--port-file",
                str(port_file),
                *extra,
            ]
            popen = subprocess.Popen(  # dies with us, even when we are killed (SIGKILL)
                tethered.command(os.getpid(), cmd), stdout=log_file, stderr=subprocess.STDOUT
            )
            log_file.close()
            started.append(
                Daemon(name, popen, port_file, cfg, mpc_port=ports.get(name, 0), digest_file=digest)
            )
        if while_starting is not None:
            while_starting(started)
        _wait_ready(started, workdir)
        yield started
    finally:
        stop(started)


def free_ports(n: int) -> list[int]:
    """``n`` ports free on 127.0.0.1 right now (the MPC workers' fixed ports: their peers
    must know them before the workers start)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for sk in socks:
            sk.bind(("127.0.0.1", 0))
        return [sk.getsockname()[1] for sk in socks]
    finally:
        for sk in socks:
            sk.close()


def _wait_ready(ds: Sequence[Daemon], workdir: Path) -> None:
    end = time.monotonic() + START_TIMEOUT_S
    for d in ds:
        while not d.port_file.exists():
            _check_alive(d, workdir)
            if time.monotonic() > end:
                raise RunAborted(f"party daemon {d.name} did not start in {START_TIMEOUT_S:g}s")
            time.sleep(0.02)
        d.port = int(d.port_file.read_text().strip())
    for d in ds:  # also one that listened, then stopped (its table digest not written)
        _check_alive(d, workdir)


def _check_alive(d: Daemon, workdir: Path) -> None:
    if d.proc.poll() is not None:
        tail = (workdir / f"{d.name}.log").read_text(errors="replace")[-2000:]
        raise RunAborted(f"party daemon {d.name} exited at start-up:\n{tail}")


def loaded(ds: Sequence[Daemon]) -> list[str | None]:
    """Every daemon's digest of the table it loaded as it started (see :func:`daemons`),
    once all are written; None for a daemon that loaded nothing ahead (no pinned spec, a
    table it could not read: the check then reads that file itself), exited or took longer
    than :data:`LOAD_WAIT_S`."""
    end = time.monotonic() + LOAD_WAIT_S
    out: list[str | None] = []
    for d in ds:
        text = None
        while d.digest_file is not None:
            if d.digest_file.exists():
                text = d.digest_file.read_text(encoding="utf-8").strip()
                break
            if d.proc.poll() is not None or time.monotonic() > end:
                break
            time.sleep(0.01)
        out.append(text if text and text != "-" else None)
    return out


def stop(ds: Sequence[Daemon]) -> None:
    for d in ds:
        if d.proc.poll() is None:
            d.proc.terminate()
    for d in ds:
        try:
            d.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            d.proc.kill()
            d.proc.wait()
