"""m-privacy across hospitals with MPyC (Shamir secret sharing, honest majority t < n/2).

Per candidate the leader would take, every hospital counts its own records in the groups the
candidate creates (:func:`fedanon.privacy.mprivacy.cell_counts` / ``group_counts``: a
function of the shared state and its own rows) and secret-shares that (G, width) array with
the other hospitals.  Together they compute, for every coalition S of 1..m hospitals and
every group at once (secure arrays: one batch of comparisons per check, not one coroutine
per comparison), the rest r = Σ_{i ∉ S} c_i (a public 0/1 matrix times the shared counts:
no communication) and

* identity: r < K (``r - K < 0``) and r = 0, the latter as "every hospital outside S has no
  record in the group" (one zero test per hospital and group, multiplied out per coalition),
  so a failure is ``[r < K] - [r = 0]`` (0 < r < K).  The comparisons are on integers of
  the size of N, the records of all hospitals; the zero tests number n per group, not one
  per coalition;
* confidence (C < 1): ``num * r - den * r_s < 0`` (a sensitive value above C of the rest).

Only whether the failures add up to 0 is opened: one bit per candidate, "passes" or
"fails".  No count, sum or comparison result is ever opened.

Before any hospital's counts of a check are secret-shared, the workers agree on the
question: each sends the others (over their authenticated connections) a hash of the run's
terms, the check's number and what its daemon was asked (the chain of Instructions applied,
their number, the candidate) and the groups' shape (:meth:`MpcConfig.check_digest`); one
that differs ends the check at every worker with "not the same question" (``!`` to the
daemon, :class:`ChecksDiffer`), before any count is input.  A leader that asks one hospital
about one candidate and the others about another (so the opened bit would depend on the one
hospital's counts alone) gets that, and nothing else.

Process shape: the hospital's daemon starts one worker per run (``python -m
fedanon.party.mpc CONFIG``), the workers connect to each other with the federation's mTLS
certificates (each side checks that the peer's certificate names the hospital the run's
ring gives that position, and has the *party* role, and the first message binds the
connection to the run: :meth:`MpcConfig.tag`, a worker of another run is refused and
logged), and the daemon feeds the worker its count vectors on stdin and reads the bits on
stdout; the worker exits when stdin closes (the run's end).  This is the one place where
hospitals connect to each other: it needs ``[policy] allow_mpc = true`` and the MPC port
declared in party.toml (docs/m-privacy.md).

Shares travel as field elements: secure integers with MPyC's ``to_bytes``, secure arrays
with :class:`fedanon.party.mpccodec.ArrayCodec` (integers only, in place of the pickle
MPyC's numpy paths would use), and :meth:`SafeRuntime.transfer` replaces MPyC's pickled
``transfer`` (its only use on this path is the shutdown barrier): nothing from a peer is
ever unpickled.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
import os
import select
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import ConfigError, InputError, ProtocolError

log = logging.getLogger(__name__)
RECORDS = struct.Struct("<Q")  # first on stdin: this hospital's records, once its table is read
# per check: what the daemon was asked (32-byte hash), groups, width; then groups * width
# int64 (little endian)
HEADER = struct.Struct("<32sQQ")
DIFFER = b"!"  # the worker's answer when the hospitals were not asked the same check


class ChecksDiffer(InputError):
    """The hospitals' workers were not asked the same coalition check (the leader's questions
    differ: run, state, candidate or groups): nothing was shared, the run cannot go on.  Exit
    2 at the leader (the party answers kind ``input``)."""


@dataclass(frozen=True)
class MpcConfig:
    """One worker's terms for one run (every hospital's worker gets the same but ``pid``)."""

    pid: int
    names: tuple[str, ...]  # the hospitals in ring order: MPyC party i is names[i]
    hosts: tuple[str, ...]
    ports: tuple[int, ...]
    ca: str
    cert: str
    key: str
    m: int
    K: int
    C_num: int  # C as an exact fraction
    C_den: int
    run: str  # the run id (hex): binds the workers' connections and checks to the run

    def __post_init__(self) -> None:
        n = len(self.names)
        try:
            ok = len(bytes.fromhex(self.run)) > 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ConfigError("MPC configuration: the run id (hex)")
        if not (len(self.hosts) == len(self.ports) == n) or not 0 <= self.pid < n:
            raise ConfigError("MPC configuration: one host and port per hospital")
        if self.K < 1 or self.C_num < 0 or self.C_den < 1:
            raise ConfigError("MPC configuration: K >= 1 and C >= 0")
        if self.m > 0 and n < 2 * self.m + 1:
            raise ConfigError(
                f"m = {self.m} needs an honest majority: at least {2 * self.m + 1} hospitals, "
                f"the run has {n}"
            )

    def bits(self, total: int) -> int:
        """Bit length of the secure integers for ``total`` records in all: every tested
        quantity fits (r - K, |r - K| <= max(N, K); num * r - den * r_s, at most
        max(num, den) * N in size), with a sign bit and slack."""
        return self.compared_bits(total, confidence=True) + 1

    def compared_bits(self, total: int, confidence: bool) -> int:
        """Bit length of the compared quantities (sign included): the rests and counts
        (identity), or the confidence differences."""
        n = max(total, self.K, 1)
        if confidence:
            n *= max(self.C_num, self.C_den)
        return n.bit_length() + 1

    def tag(self) -> bytes:
        """What a worker's first message carries and its peer compares with its own: the run
        id and the terms every hospital's worker shares (32 bytes)."""
        terms = json.dumps([self.names, self.m, self.K, self.C_num, self.C_den]).encode()
        return hashlib.sha256(b"fedanon-mpc-run-v1\0" + bytes.fromhex(self.run) + terms).digest()

    def check_digest(self, check: int, asked: bytes, groups: int, width: int) -> bytes:
        """What the workers compare before check number ``check`` shares anything: the run,
        the check, what the daemon was asked (``asked``: its hash of the state and the
        candidate, :func:`fedanon.party.mpcrun.asked_digest`) and the groups' shape."""
        head = struct.pack("<QQQ", check, groups, width)
        return hashlib.sha256(b"fedanon-mpc-check-v1\0" + self.tag() + head + asked).digest()

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> MpcConfig:
        raw = json.loads(path.read_text())
        for key in ("names", "hosts", "ports"):
            raw[key] = tuple(raw[key])
        return cls(**raw)


def coalitions(n: int, m: int) -> list[tuple[int, ...]]:
    return [s for j in range(1, min(m, n) + 1) for s in itertools.combinations(range(n), j)]


def keep_matrix(n: int, m: int) -> IntArray:
    """(coalitions of 1..m hospitals, n) 0/1: row S marks the hospitals outside S, whose
    records are the rest when S removes its own."""
    coal = coalitions(n, m)
    keep = np.ones((len(coal), n), dtype=np.int64)
    for row, s in enumerate(coal):
        keep[row, list(s)] = 0
    return keep


# --- the daemon's side: one worker per run ------------------------------------------------


class MpcSession:
    """The worker of this hospital for one run: started (it connects to the other hospitals'
    workers) before the table is read, :meth:`begin` with the records once it is read,
    :meth:`check` per candidate, :meth:`close` at the run's end (every hospital must ask the
    same checks in the same order)."""

    def __init__(self, config: MpcConfig, config_path: Path) -> None:
        config.dump(config_path)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fedanon.party.mpc", str(config_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def begin(self, records: int) -> None:
        """This hospital's records (their sum N over the hospitals, opened by the workers,
        sizes the secure integers): before the first check."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(RECORDS.pack(records))
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise ProtocolError("the MPC worker has ended (see the daemon's log)") from None

    def check(self, groups: IntArray, asked: bytes, timeout: float | None = None) -> bool:
        """``groups`` (G, width): this hospital's records (then sensitive values) per group
        the candidate creates; ``asked``: the 32-byte hash of the question (every hospital's
        worker must get the same, else :class:`ChecksDiffer` and nothing is shared); True
        when every coalition leaves every group LKC-private.  No answer within ``timeout``
        seconds: the worker is killed (the run cannot go on)."""
        g, w = groups.shape
        assert self.proc.stdin is not None and self.proc.stdout is not None
        end = None if timeout is None else time.monotonic() + timeout
        # the counts go out within the deadline too: a worker that does not read them (stuck
        # waiting for a peer that never sends) would otherwise block this write for ever
        # once they exceed the pipe's buffer
        self._send(HEADER.pack(asked, g, w) + groups.astype("<i8").tobytes(), end, timeout)
        fd = self.proc.stdout.fileno()
        left = None if end is None else max(end - time.monotonic(), 0.0)
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            self._timed_out(timeout)
        bit = os.read(fd, 1)  # one byte per check, nothing else: no buffered read
        if bit == DIFFER:
            self.kill()  # it shares nothing more: it was ending by itself
            raise ChecksDiffer(
                "the hospitals' MPC workers were not asked the same coalition check (run, "
                "state, candidate or groups differ): no count was shared; the run is aborted"
            )
        if bit not in (b"0", b"1"):
            self.kill()
            raise ProtocolError("the MPC worker ended before answering (see the daemon's log)")
        return bit == b"1"

    def _send(self, data: bytes, end: float | None, timeout: float | None) -> None:
        """Write ``data`` to the worker's stdin, giving up (the worker killed) at ``end``."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.flush()
            fd = self.proc.stdin.fileno()
            os.set_blocking(fd, False)
            view = memoryview(data)
            while view:
                left = None if end is None else max(end - time.monotonic(), 0.0)
                _, writable, _ = select.select([], [fd], [], left)
                if not writable:
                    self._timed_out(timeout)
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    continue
        except (BrokenPipeError, ValueError):
            raise ProtocolError("the MPC worker has ended (see the daemon's log)") from None
        finally:
            with contextlib.suppress(OSError, ValueError):
                os.set_blocking(self.proc.stdin.fileno(), True)

    def _timed_out(self, timeout: float | None) -> None:
        from fedanon.party.faults import TimedOut  # the daemon's (the worker never loads it)

        self.kill()
        raise TimedOut(f"the MPC worker gave no answer within {timeout:g}s: killed")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self, timeout: float = 30.0) -> None:
        """The run's end: the workers pass MPyC's shutdown barrier and exit."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):  # the worker is gone already
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- the worker ---------------------------------------------------------------------------


def _read_exact(stream: Any, n: int) -> bytes | None:
    data = stream.read(n)
    if not data:
        return None
    if len(data) != n:
        raise ProtocolError("truncated count vector from the daemon")
    return bytes(data)


def main(argv: list[str]) -> int:
    cfg = MpcConfig.load(Path(argv[0]))
    # the answers go out on the original stdout only; anything MPyC prints goes to stderr
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.argv = [sys.argv[0]]  # MPyC parses sys.argv when imported: give it nothing
    from fedanon.party.mpcruntime import make_runtime

    rt = make_runtime(cfg)
    return int(rt._loop.run_until_complete(_serve(rt, cfg, answers)))  # the loop MPyC bound


async def _serve(rt: Any, cfg: MpcConfig, stdout: Any) -> int:
    n = len(cfg.names)
    keep = keep_matrix(n, cfg.m)
    stdin = sys.stdin.buffer
    await rt.start()  # while the daemon reads its table
    try:
        if (raw := _read_exact(stdin, RECORDS.size)) is None:
            return 0  # the run ended before the table was read
        # N, the records of all hospitals (public: the release has N rows), sizes the integers
        count = rt.SecInt(64)
        (records,) = RECORDS.unpack(raw)
        total = int(await rt.output(rt.sum(rt.input(count(records), senders=list(range(n))))))
        secint = rt.SecInt(cfg.bits(total))
        bits = (cfg.compared_bits(total, False), cfg.compared_bits(total, True))
        for check in itertools.count():
            if (head := _read_exact(stdin, HEADER.size)) is None:
                break
            asked, g, w = HEADER.unpack(head)
            body = _read_exact(stdin, g * w * 8) if g * w else b""
            own = np.frombuffer(body or b"", dtype="<i8").astype(np.int64).reshape(g, w)
            if not await _same_question(rt, cfg, cfg.check_digest(check, asked, g, w), check):
                _answer(stdout, DIFFER)
                return 2
            ok = await _check(rt, secint, own, keep, cfg, bits)
            if not _answer(stdout, b"1" if ok else b"0"):
                return 1
    finally:
        # the run's end for every hospital (stdin closed): every answer was opened by all, so
        # the connections just close (a transport flushes what it still holds first)
        for peer in rt.parties:
            if peer.pid != rt.pid and peer.protocol is not None:
                peer.protocol.transport.close()
        await asyncio.sleep(0)
    return 0


def _answer(stdout: Any, answer: bytes) -> bool:
    """Hand the daemon one answer; False when the daemon is gone (killed: its end of the
    pipe closed), which ends the worker quietly instead of with a traceback in its log."""
    try:
        stdout.write(answer)
        stdout.flush()
    except BrokenPipeError:
        log.warning("the daemon is gone: the MPC worker ends")
        return False
    return True


async def _same_question(rt: Any, cfg: MpcConfig, digest: bytes, check: int) -> bool:
    """Every worker's digest of check ``check`` is this one's (exchanged in the clear over the
    authenticated connections: a hash of what the leader told each hospital, no count)."""
    got = await rt.exchange(digest)
    differ = [cfg.names[i] for i, d in enumerate(got) if d != digest]
    if differ:
        log.warning(
            "coalition check %d: %s were asked another question (run, state, candidate or "
            "groups): nothing shared, the worker ends",
            check,
            ", ".join(differ),
        )
    return not differ


async def _check(
    rt: Any, secint: Any, own: IntArray, keep: IntArray, cfg: MpcConfig, bits: tuple[int, int]
) -> bool:
    """One candidate: ``own`` (G, width) this hospital's counts; ``keep`` (coalitions, n)
    from :func:`keep_matrix`; ``bits`` the compared bit lengths (identity, confidence)."""
    g, w = own.shape
    n_coal, n = keep.shape
    if g * w == 0 or n_coal == 0:
        return True
    shared = rt.np_stack(rt.input(secint.array(own), senders=list(range(n))))  # (n, G, w)
    counts = shared[:, :, 0]  # (n, G): every hospital's records per group
    rest = keep @ counts  # (coalitions, G): public times shared, computed locally
    below = rt.np_sgn(rest - cfg.K, l=bits[0], LT=True)  # 1 iff r < K
    empty = rt.np_sgn(counts, l=bits[0], EQ=True)  # 1 iff hospital i has none of g's records
    # 1 iff every hospital outside S has none (r = 0): the product over them, 1 for S's own
    outside = rt.np_reshape(empty, (1, n, g)) * keep[:, :, None] + (1 - keep)[:, :, None]
    nobody = rt.np_prod(outside, axis=1)
    failures = rt.np_sum(below - nobody)  # r = 0 implies r < K (K >= 1): 1 iff 0 < r < K
    if w > 1 and cfg.C_num < cfg.C_den:  # C < 1: the confidence part, < 0 iff above C
        rest_s = rt.np_reshape(keep @ rt.np_reshape(shared[:, :, 1:], (n, -1)), (n_coal, g, w - 1))
        over = rt.np_reshape(rest, (n_coal, g, 1)) * cfg.C_num - rest_s * cfg.C_den
        failures += rt.np_sum(rt.np_sgn(over, l=bits[1], LT=True))
    tests = n_coal * g * w  # failures <= tests
    opened = await rt.output(rt.sgn(failures, l=tests.bit_length() + 1, EQ=True))
    return bool(int(opened))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
