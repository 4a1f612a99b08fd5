"""`fedanon federate`: certificates, one real party daemon per table, the leader, clean-up.

For tests, demos and benchmarks on one machine: every party is a separate process serving
mTLS on 127.0.0.1 with an ephemeral port.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedanon.errors import ConfigError, RunAborted
from fedanon.io.fsutil import check_outputs
from fedanon.leader import forked, tethered
from fedanon.leader.cli import add_seed_option, check_seed
from fedanon.leader.config import (
    SECURE_SUM_CHOICES,
    UNION_CHOICES,
    FederationConfig,
    PartyAddress,
)
from fedanon.leader.federateinputs import (
    LEADER,
    check_distinct_tables,
    check_party_files,
    parse_parties,
)
from fedanon.security import certs
from fedanon.security.policytoml import policy_to_toml, toml_str

if TYPE_CHECKING:  # (the policy module loads the spec model and numpy: not for every CLI call)
    from fedanon.model.spec import RunSpec
    from fedanon.security.policy import PartyPolicy

log = logging.getLogger(__name__)
START_TIMEOUT_S = 30.0
LOAD_WAIT_S = 600.0  # a daemon loading its table ahead (it always says when it is done)
MAX_FIELD_BYTES = 1 << 16


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes] | forked.Forked
    port_file: Path
    config: Path
    port: int = 0
    mpc_port: int = 0  # its MPC worker's fixed port (m-private specs; 0: none)
    digest_file: Path | None = None  # its pinned table's digest, once loaded (--digest-file)


def register(sub: Any) -> None:
    f = sub.add_parser("federate", help="local federation: one daemon per table, then the leader")
    f.add_argument("--spec", type=Path, required=True, help="run spec (TOML)")
    f.add_argument(
        "--party", action="append", default=[], metavar="NAME=DATA.csv", help="one per party"
    )
    f.add_argument("--output", type=Path, required=True, help="released CSV")
    f.add_argument("--report", type=Path, help="JSON report")
    f.add_argument(
        "--max-field-bytes",
        type=_field_bytes,
        default=64,
        help=f"padded size of each released non-QID field in the mix-net (1..{MAX_FIELD_BYTES})",
    )
    f.add_argument(
        "--union",
        choices=UNION_CHOICES,
        default="auto",
        help="how the released records are integrated (as [run] union in federation.toml)",
    )
    f.add_argument(
        "--secure-sum",
        choices=SECURE_SUM_CHOICES,
        default="pairwise",
        help="how the statistics are summed (as [run] secure_sum in federation.toml)",
    )
    f.add_argument("--quiet", action="store_true")
    add_seed_option(f)
    from fedanon.report.cli import add_html_option

    add_html_option(f)
    f.set_defaults(handler=federate_cli)


def _field_bytes(text: str) -> int:
    """argparse type of --max-field-bytes (argparse names the flag in its error)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_FIELD_BYTES:
        raise argparse.ArgumentTypeError(
            f"{text!r}: must be an integer in 1..{MAX_FIELD_BYTES} (bytes)"
        )
    return value


def _party_toml(
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
                _party_toml(
                    name, data, certdir, (pins or {}).get(name), policy, ports.get(name, 0)
                ),
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
                "party",
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
            if d.proc.poll() is not None:
                tail = (workdir / f"{d.name}.log").read_text(errors="replace")[-2000:]
                raise RunAborted(f"party daemon {d.name} exited at start-up:\n{tail}")
            if time.monotonic() > end:
                raise RunAborted(f"party daemon {d.name} did not start in {START_TIMEOUT_S:g}s")
            time.sleep(0.02)
        d.port = int(d.port_file.read_text().strip())


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


def federation_config(
    ds: Sequence[Daemon],
    workdir: Path,
    spec: Path,
    output: Path,
    report: Path | None,
    max_field_bytes: int = 64,
    union: str = "auto",
    secure_sum: str = "pairwise",
) -> FederationConfig:
    certdir = workdir / "certs"
    return FederationConfig(
        spec=spec,
        output=output,
        report=report,
        name=LEADER,
        ca=certdir / "ca.pem",
        cert=certdir / f"{LEADER}.pem",
        key=certdir / f"{LEADER}.key",
        parties=tuple(
            PartyAddress(
                d.name, f"127.0.0.1:{d.port}", f"127.0.0.1:{d.mpc_port}" if d.mpc_port else ""
            )
            for d in ds
        ),
        max_field_bytes=max_field_bytes,
        union=union,
        source="fedanon federate",
        secure_sum=secure_sum,
    )


@dataclass(frozen=True)
class _Plan:
    """The spec (for its taxonomy files) and every daemon's policy: exactly this spec
    allowed (its method's :meth:`~fedanon.methods.base.Method.local_policy`)."""

    run_spec: RunSpec
    policy: PartyPolicy
    pin: bool  # the policy accepts the spec: every daemon pins it and loads its table early


def federate(
    spec: Path,
    parties: Sequence[tuple[str, Path]],
    output: Path,
    report: Path | None,
    max_field_bytes: int = 64,
    union: str = "auto",
    fork_daemons: bool = False,
    seed: int | None = None,
    secure_sum: str = "pairwise",
) -> dict[str, Any]:
    """Start the daemons, run the leader, stop the daemons; the report.  ``fork_daemons``:
    fork them warm from this process (the CLI: a fresh process; see :mod:`fedanon.leader.forked`).
    Every federated method runs :func:`fedanon.leader.run.run_federation` (``seed``: for a
    method that draws, tests only)."""
    from fedanon.leader.links import PartyRejected
    from fedanon.leader.run import run_federation
    from fedanon.model.spec import taxonomy_paths
    from fedanon.party.faults import logged_refusal

    check_seed(seed, spec)
    plan = _plan(spec, union, max_field_bytes)
    check_party_files(parties)
    reads = [spec, *taxonomy_paths(plan.run_spec, spec), *(data for _, data in parties)]
    check_outputs({"--output": output, "--report": report}, reads)
    with tempfile.TemporaryDirectory(prefix="fedanon-federate-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o700)
        t0 = time.perf_counter()
        # the content check runs while the daemons start and load their tables: it reads
        # every table too, and nothing of the run happens before it passes.  Every daemon
        # pins the spec its policy accepts (it allows exactly that spec anyway), so it reads
        # its table as it starts, alongside the check, instead of at Prepare
        with daemons(
            parties,
            work,
            pins={name: spec for name, _ in parties} if plan.pin else None,
            policy=plan.policy,
            fork=fork_daemons,
            while_starting=lambda ds: check_distinct_tables(parties, plan.run_spec, loaded(ds)),
            mpc=plan.run_spec.m > 0,  # m-privacy: the daemons' MPC workers get their ports
        ) as ds:
            startup = time.perf_counter() - t0
            log.info("%d party daemons ready in %.2fs", len(ds), startup)
            cfg = federation_config(
                ds, work, spec, output, report, max_field_bytes, union, secure_sum
            )
            try:
                out = run_federation(cfg, seed=seed, startup_seconds=startup)
            except PartyRejected as exc:  # its user holds every table: where, as logged
                where = logged_refusal(work / f"{exc.party}.log")
                if where is None:
                    raise
                raise PartyRejected(f"{exc}: {where}", party=exc.party, rule=exc.rule) from None
        return out.report


def _plan(spec: Path, union: str, max_field_bytes: int) -> _Plan:
    """The spec, checked before any daemon starts (its method runs federated and takes the
    options); every daemon allows exactly it."""
    from fedanon.apispec import Spec
    from fedanon.leader.run import leader_side_of
    from fedanon.methods import registry
    from fedanon.security.policy import PolicyRefused

    if not 1 <= max_field_bytes <= MAX_FIELD_BYTES:
        raise ConfigError(
            f"--max-field-bytes must be an integer in 1..{MAX_FIELD_BYTES}",
            value=str(max_field_bytes),
        )
    method = registry.require_federated(spec)  # exit 2 with the reason, e.g. ArtUC's
    one = Spec.from_toml(spec)  # the one spec; checked by its method
    run_spec = one.run_spec
    leader_side_of(spec, run_spec, union, "--union", None)
    policy = method.local_policy(run_spec)
    try:  # as a daemon checks a pinned spec at start-up (fedanon.party.server)
        policy.check_spec(one.view)
    except PolicyRefused:  # refused at Prepare instead, naming the rule (not pinned)
        return _Plan(run_spec, policy, pin=False)
    return _Plan(run_spec, policy, pin=True)


def federate_cli(args: argparse.Namespace) -> int:
    from fedanon.apispec import Spec
    from fedanon.report.cli import html_with_outputs

    parties = parse_parties(args.party)
    reads = [data for _, data in parties]
    page_spec = None if args.html is None else Spec.from_toml(args.spec)
    with html_with_outputs(args.html, page_spec, args.output, args.report, reads=reads):
        rep = federate(
            args.spec,
            parties,
            args.output,
            args.report,
            args.max_field_bytes,
            args.union,
            fork_daemons=True,
            seed=args.seed,
            secure_sum=args.secure_sum,
        )
    if not args.quiet:
        from fedanon.leader.run import summary

        print(summary(args.spec, rep, args.output, args.report))
    return 0  # the process then ends without teardown (fedanon.cli.main.entry)
