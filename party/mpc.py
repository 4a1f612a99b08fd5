"""m-privacy across hospitals with MPyC (Shamir secret sharing, honest majority t < n/2).

Per candidate the leader would take, every hospital counts its own records in the groups the
candidate creates (:func:`fedanon.privacy.mprivacy.cell_counts` / ``group_counts``: a
function of the shared state and its own rows), secret-shares that vector with the other
hospitals, and together they compute, for every coalition S of 1..m hospitals and every
group, the rest r = total - Σ_S and the tests ``r (r - K) < 0`` (0 < r < K) and, when C < 1,
``den * r_s - num * r > 0`` (a sensitive value above C of the rest).  Only the AND of all
tests is opened: one bit per candidate, "passes" or "fails".  No count, sum or comparison
result is ever opened.

Process shape: the hospital's daemon starts one worker per run (``python -m
fedanon.party.mpc CONFIG``), the workers connect to each other with the federation's mTLS
certificates (each side checks that the peer's certificate names the hospital the run's
ring gives that position, and has the *party* role), and the daemon feeds the worker its
count vectors on stdin and reads the bits on stdout; the worker exits when stdin closes
(the run's end).  This is the one place where hospitals connect to each other: it needs
``[policy] allow_mpc = true`` and the MPC port declared in party.toml (docs/m-privacy.md).

MPyC is used with list-based secure integers and ``mix32_64bit`` so shares travel as field
elements (``to_bytes``), and :meth:`SafeRuntime.transfer` replaces MPyC's pickled
``transfer`` (its only use on this path is the shutdown barrier): nothing from a peer is
ever unpickled.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import select
import struct
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import ConfigError, ProtocolError
from fedanon.party.faults import TimedOut

HEADER = struct.Struct("<QQ")  # groups, width; then groups * width int64 (little endian)


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
    records: int  # this hospital's records (their sum N, opened at start, sizes the integers)

    def __post_init__(self) -> None:
        n = len(self.names)
        if not (len(self.hosts) == len(self.ports) == n) or not 0 <= self.pid < n:
            raise ConfigError("MPC configuration: one host and port per hospital")
        if self.m > 0 and n < 2 * self.m + 1:
            raise ConfigError(
                f"m = {self.m} needs an honest majority: at least {2 * self.m + 1} hospitals, "
                f"the run has {n}"
            )

    def bits(self, total: int) -> int:
        """Bit length of the secure integers for ``total`` records in all: every tested
        quantity fits (r (r - K) <= N², den * r_s and num * r <= max(num, den) * N), with a
        sign bit and slack."""
        n = max(total, self.K, 1).bit_length()
        return max(2 * n, n + max(self.C_num, self.C_den).bit_length()) + 2

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


# --- the daemon's side: one worker per run ------------------------------------------------


class MpcSession:
    """The worker of this hospital for one run: :meth:`check` per candidate, :meth:`close`
    at the run's end (every hospital must ask the same checks in the same order)."""

    def __init__(self, config: MpcConfig, config_path: Path) -> None:
        config.dump(config_path)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fedanon.party.mpc", str(config_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def check(self, groups: IntArray, timeout: float | None = None) -> bool:
        """``groups`` (G, width): this hospital's records (then sensitive values) per group
        the candidate creates; True when every coalition leaves every group LKC-private.
        No answer within ``timeout`` seconds: the worker is killed (the run cannot go on)."""
        g, w = groups.shape
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(HEADER.pack(g, w) + groups.astype("<i8").tobytes())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise ProtocolError("the MPC worker has ended (see the daemon's log)") from None
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            self.kill()
            raise TimedOut(f"the MPC worker gave no answer within {timeout:g}s: killed")
        bit = os.read(fd, 1)  # one byte per check, nothing else: no buffered read
        if bit not in (b"0", b"1"):
            self.kill()
            raise ProtocolError("the MPC worker ended before answering (see the daemon's log)")
        return bit == b"1"

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
    coal = coalitions(n, cfg.m)
    stdin = sys.stdin.buffer
    await rt.start()
    try:
        # N, the records of all hospitals (public: the release has N rows), sizes the integers
        count = rt.SecInt(64)
        total = int(await rt.output(rt.sum(rt.input(count(cfg.records), senders=list(range(n))))))
        secint = rt.SecInt(cfg.bits(total))
        while (head := _read_exact(stdin, HEADER.size)) is not None:
            g, w = HEADER.unpack(head)
            body = _read_exact(stdin, g * w * 8) if g * w else b""
            own = np.frombuffer(body or b"", dtype="<i8").tolist()
            ok = await _check(rt, secint, own, g, w, n, coal, cfg)
            stdout.write(b"1" if ok else b"0")
            stdout.flush()
    finally:
        # the run's end for every hospital (stdin closed): every answer was opened by all, so
        # the connections just close (a transport flushes what it still holds first)
        for peer in rt.parties:
            if peer.pid != rt.pid and peer.protocol is not None:
                peer.protocol.transport.close()
        await asyncio.sleep(0)
    return 0


async def _check(
    rt: Any, secint: Any, own: list[int], g: int, w: int, n: int, coal: list[Any], cfg: MpcConfig
) -> bool:
    if g * w == 0:
        return True
    shared = rt.input([secint(v) for v in own], senders=list(range(n)))
    total = [rt.sum([shared[i][c] for i in range(n)]) for c in range(g * w)]
    tests = []
    for s in coal:
        for grp in range(g):
            base = grp * w
            rest = total[base] - rt.sum([shared[i][base] for i in s])
            tests.append(rest * (rest - cfg.K) < 0)
            if cfg.C_num < cfg.C_den:  # C < 1: the confidence part
                for j in range(1, w):
                    rest_s = total[base + j] - rt.sum([shared[i][base + j] for i in s])
                    tests.append(rest_s * cfg.C_den - rest * cfg.C_num > 0)
    if not tests:
        return True
    failures = rt.sum(tests)
    opened = await rt.output(failures == 0)
    return bool(int(opened))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
