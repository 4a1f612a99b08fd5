"""A hospital's side of a federated m-private run (``[privacy] m > 0``): its MPC worker for
the run, the leader's coalition checks, and the rule that nothing unchecked is specialized.

* Prepare (before the table is read, :func:`check_proposal`): the run needs this daemon's
  ``[mpc] listen`` port, free of another m-private run (one at a time per daemon: the port
  is fixed; a second is refused, ``rule = "mpc"``, and the first goes on), an MPC address
  for every hospital of the ring and an honest majority (at least 2m + 1 hospitals);
  ``[policy] allow_mpc`` is the policy's rule
  (:meth:`fedanon.security.policy.PartyPolicy.check_mpc`);
* once the proposal passed the checks and the ledger's budgets (:func:`launch`, before the
  table is read): the worker (:class:`fedanon.party.mpc.MpcSession`) starts and connects to
  the other hospitals' workers while the table is read; once the run is accepted
  (:meth:`MpcRun.begin`) it gets this hospital's record count; a run not accepted after all
  closes it;
* per ``CoalitionCheck`` (:meth:`MpcRun.check`): in the state after the Instructions the
  leader names, this hospital's counts of the groups the candidate creates
  (:func:`fedanon.privacy.mprivacy.own_groups`, vectorised) go to the worker with the hash
  of the question (:func:`asked_digest`: the chain of Instructions applied, their number,
  the check, the candidate), which the workers compare before sharing anything; the opened
  bit is the answer.  Checks are asked in order (check 0, 1, ...), each once;
* an Instruction specializing a candidate that did not pass a check in that same state is
  refused (:meth:`MpcRun.admit`): the hospital obeys the check, not just the leader;
* the run's end, abort, idle reaping or the daemon's shutdown (:meth:`MpcRun.close`): the
  worker is stopped (killed if it does not end within a few seconds), its files removed,
  the port free for the next m-private run.  The port is never held longer than the run:
  a run the leader has not moved on for ``run_idle_timeout_seconds`` (a re-sent old
  ``Instruct`` or a call kept waiting is no progress), or open for longer than
  ``run_max_age_seconds``, is dropped (:mod:`fedanon.party.runs`), and no call waits
  longer than ``max_wait_seconds`` (:mod:`fedanon.party.callcap`; second review, R2).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import struct
import tempfile
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fedanon.errors import ProtocolError
from fedanon.model.spec import RunSpec
from fedanon.party.mpc import ChecksDiffer, MpcConfig, MpcSession
from fedanon.privacy.mprivacy import MAX_DENOMINATOR, CoalitionQuery, own_groups
from fedanon.security.policy import PolicyRefused, check_honest_majority
from fedanon.tds.ports import Candidate
from fedanon.tds.state import Update

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from fedanon.party.config import PartyConfig
    from fedanon.tds.party import EngineParty


class RunState(Protocol):
    """What this module reads of a run (:class:`fedanon.party.runstate.RunState`, which
    holds the :class:`MpcRun`: no import back)."""

    @property
    def run_id(self) -> bytes: ...
    @property
    def spec(self) -> RunSpec: ...
    @property
    def party(self) -> EngineParty: ...
    @property
    def ring(self) -> Sequence[Any]: ...
    @property
    def position(self) -> int: ...
    @property
    def instructions(self) -> int: ...
    @property
    def chain(self) -> bytes: ...
    @property
    def cond(self) -> threading.Condition: ...
    @property
    def max_wait_s(self) -> float: ...

    def progress(self) -> None: ...
    def wait(self, ready: Callable[[], bool], deadline: float, what: str) -> None: ...


log = logging.getLogger(__name__)
CLOSE_S = 5.0  # a worker still running this long after its run ended is killed
BUSY = "the MPC port is in use by another run; try again after it ends"


class _Port:
    """This daemon's ``[mpc] listen`` port: held by one m-private run at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holder: bytes | None = None

    def check(self) -> None:
        with self.lock:
            if self.holder is not None:
                raise PolicyRefused("mpc", BUSY)

    def take(self, run_id: bytes) -> None:
        with self.lock:
            if self.holder is not None:
                raise PolicyRefused("mpc", BUSY)
            self.holder = run_id

    def free(self, run_id: bytes) -> None:
        with self.lock:
            if self.holder == run_id:
                self.holder = None


PORT = _Port()


def asked_digest(run: RunState, query: CoalitionQuery) -> bytes:
    """What this hospital was asked in check ``query.check``: the state (the chain of the
    Instructions applied and their number) and the candidate, under the run id."""
    b, x = query.candidate if query.candidate is not None else (2**64 - 1, 2**64 - 1)  # root
    head = struct.pack("<QQQQ", query.check, query.instructions, b, x)
    return hashlib.sha256(b"fedanon-mpc-asked-v1\0" + run.run_id + head + run.chain).digest()


def _host_port(address: str, who: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ProtocolError(f"the ring gives no valid MPC address for {who}")
    return host, int(port)


def check_proposal(
    cfg: PartyConfig, spec: RunSpec, names: tuple[str, ...], mpc: tuple[str, ...]
) -> None:
    """What an m-private run needs beside the policy: reads no data."""
    if spec.m <= 0:
        return
    if cfg.mpc_listen is None:
        raise PolicyRefused(
            "mpc",
            f"[privacy] m = {spec.m} needs this hospital's MPC port: [mpc] listen in party.toml",
        )
    check_honest_majority(spec.m, len(names))
    PORT.check()  # taken for good by launch()
    if len(mpc) != len(names):
        raise ProtocolError("the ring gives no MPC address per hospital")
    for name, address in zip(names, mpc, strict=True):
        _host_port(address, name)


class MpcRun:
    """This hospital's MPC for one run: the worker, the checks in order, what passed."""

    def __init__(
        self, spec: RunSpec, session: MpcSession, workdir: Path, run_id: bytes = b""
    ) -> None:
        self.run_id = run_id  # the holder of this daemon's MPC port
        self.spec = spec
        self.session = session
        self.workdir = workdir
        self.lock = threading.Lock()  # one check at a time, in order
        self.next = 0  # the number of the next check
        self.passed: dict[int, Candidate] = {}  # Instructions applied -> the candidate passed
        self.closed = False
        self.begun = False

    def begin(self, records: int) -> MpcRun:
        """The table is read: this hospital's records to the worker (before any check)."""
        self.session.begin(records)
        self.begun = True
        return self

    def check(self, run: RunState, query: CoalitionQuery, deadline: float) -> bool:
        """Check number ``query.check``: this hospital's group counts into the MPC; the bit.
        The wait for the worker ends by the daemon's maximum wait, whatever ``deadline``."""
        with self.lock:
            if self.closed or not self.begun:
                raise ProtocolError("the run's MPC worker was stopped or never began")
            deadline = min(deadline, time.monotonic() + run.max_wait_s)
            if query.check != self.next:
                raise ProtocolError(f"coalition check {query.check} asked, {self.next} is next")
            with run.cond:  # the state the leader decided on (the Instructions before it)
                run.wait(
                    lambda: run.instructions >= query.instructions,
                    deadline,
                    f"instruction {query.instructions - 1}",
                )
                if run.instructions != query.instructions:
                    raise ProtocolError(
                        f"coalition check in the state after {query.instructions} Instructions, "
                        f"this hospital applied {run.instructions}"
                    )
                groups = own_groups(self.spec, run.party, query.candidate)
                asked = asked_digest(run, query)
            self.next += 1
            run.progress()  # a new check (each is asked once)
            try:
                ok = self.session.check(groups, asked, max(deadline - time.monotonic(), 0.01))
            except ChecksDiffer as exc:
                log.warning(
                    "run %s: coalition check %d: %s", run.run_id.hex()[:8], query.check, exc
                )
                raise ChecksDiffer(f"coalition check {query.check}: {exc.message}") from None
            if ok and query.candidate is not None:  # the root's check admits no Instruction
                self.passed[query.instructions] = query.candidate
            log.info(
                "run %s: coalition check %d of %d groups: %s",
                run.run_id.hex()[:8],
                query.check,
                groups.shape[0],
                "passes" if ok else "fails",
            )
            return ok

    def admit(self, seq: int, update: Update) -> None:
        """Instruction ``seq`` may specialize only the candidate that passed in its state."""
        if update.best is None:
            return
        if self.passed.get(seq) != tuple(update.best):
            raise ProtocolError(
                f"instruction {seq} specializes a candidate that passed no coalition check "
                "([privacy] m > 0): refused"
            )

    def close(self, finished: bool = False) -> None:
        """Stop the worker (a check waiting on it ends with a ProtocolError).  Only a run
        that ``finished`` lets it pass MPyC's shutdown barrier with the others' (up to
        :data:`CLOSE_S`); an aborted, reaped or refused run's worker is killed at once: its
        peers may never reach that barrier, and nothing more is shared."""
        self.closed = True
        try:
            if self.begun and finished:
                self.session.close(CLOSE_S)
            else:
                self.session.kill()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)
            PORT.free(self.run_id)


def launch(
    cfg: PartyConfig,
    spec: RunSpec,
    run_id: bytes,
    ring: Sequence[Any],
    position: int,
    mpc: tuple[str, ...],
) -> MpcRun | None:
    """Start this hospital's worker for a run whose proposal passed the checks, before the
    table is read: it starts and connects to the other hospitals' workers meanwhile, and
    waits for :meth:`MpcRun.begin` (None: m = 0, no MPC).  The caller closes it when the
    run is not accepted after all."""
    if spec.m <= 0:
        return None
    assert cfg.mpc_listen is not None  # check_proposal
    own_host, own_port = _host_port(cfg.mpc_listen, cfg.name)
    hosts, ports = [], []
    for i, (peer, address) in enumerate(zip(ring, mpc, strict=True)):
        host, port = (own_host, own_port) if i == position else _host_port(address, peer.name)
        hosts.append(host)
        ports.append(port)
    c = Fraction(repr(float(spec.privacy.C))).limit_denominator(MAX_DENOMINATOR)
    config = MpcConfig(
        pid=position,
        names=tuple(p.name for p in ring),
        hosts=tuple(hosts),
        ports=tuple(ports),
        ca=str(cfg.ca),
        cert=str(cfg.cert),
        key=str(cfg.key),
        m=spec.m,
        K=spec.privacy.K,
        C_num=c.numerator,
        C_den=c.denominator,
        run=run_id.hex(),
    )
    PORT.take(run_id)  # another m-private run got it since check_proposal: refused
    try:
        workdir = Path(tempfile.mkdtemp(prefix=f"fedanon-mpc-{run_id.hex()[:8]}-"))
        try:
            session = MpcSession(config, workdir / "mpc.json")
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
    except BaseException:
        PORT.free(run_id)
        raise
    log.info("run %s: MPC worker started (position %d)", run_id.hex()[:8], position)
    return MpcRun(spec, session, workdir, run_id)
