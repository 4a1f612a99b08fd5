"""A Contribute cut by a transient network failure is asked again (issue 19): the party
answers a repeat of its last order with the same bytes (never a second vector under the
same mask), the leader skips the chunks it already added, and nothing else is retried."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import grpc
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import x25519

from fedanon.errors import FedanonError, ProtocolError
from fedanon.leader import pairwise as lp
from fedanon.leader.links import Link, Traffic
from fedanon.net import rpc
from fedanon.net.meta import MD_KIND, MD_PARTY
from fedanon.party import pairsum
from fedanon.party.run import PartyRun
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.security.keyagree import PairSeeds
from fedanon.security.mixnet import SignedKey
from fedanon.security.pairwise import Accumulator, SumOrder, masked_chunks
from fedanon.tds.state import Phase

RUN_ID = bytes(range(16))
CHUNK = 8  # words per chunk in the Accumulator tests


def _seeds(n: int, rng: np.random.Generator) -> list[PairSeeds]:
    table: list[list[bytes | None]] = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            table[i][j] = table[j][i] = rng.bytes(32)
    return [PairSeeds(i, tuple(row)) for i, row in enumerate(table)]


# ---------------------------------------------------------------- the party: same bytes
class _Run(PartyRun):
    """A party run whose statistics are fresh random numbers on every computation: only a
    cached answer can make a repeat give the same bytes."""

    def statistics(self, phase: Phase, round_: int, size: int, digest: bytes) -> Any:
        self.computed = getattr(self, "computed", 0) + 1
        return np.random.default_rng().integers(0, 1000, size=size, dtype=np.int64)


def _party(seeds: PairSeeds) -> _Run:
    run = _Run(RUN_ID, "p1", cast(Any, None), cast(Any, None), (), 1, "leader")
    signed = SignedKey("p1", b"k", b"s", b"c")
    run.pair = pairsum.PairState(x25519.X25519PrivateKey.generate(), signed, seeds=seeds)
    return run


def _bytes(run: PartyRun, order: SumOrder) -> bytes:
    chunks = pairsum.contribute(run, order, CHUNK, 1e18, lambda: True)
    return b"".join(d for _, d in chunks)


def test_a_repeated_order_gets_the_same_bytes_and_nothing_else_is_answered() -> None:
    run = _party(_seeds(3, np.random.default_rng(1))[1])
    order = SumOrder(0, 0, Phase.COUNTS, b"d" * 32, 40, 0)
    first = _bytes(run, order)
    assert _bytes(run, order) == first  # a retry: the cached statistics, the same masks
    assert run.computed == 1
    with pytest.raises(ProtocolError, match="retry that differs"):  # another x under t = 0
        _bytes(run, SumOrder(0, 0, Phase.COUNTS, b"e" * 32, 40, 0))
    nxt = _bytes(run, SumOrder(1, 1, Phase.COUNTS, b"d" * 32, 40, 0))
    assert nxt != first and run.computed == 2
    with pytest.raises(ProtocolError, match="next sum here is 2"):  # an older sum: refused
        _bytes(run, order)


# ------------------------------------------------------------ the leader's accumulator
def test_a_restarted_stream_skips_what_was_added_and_must_repeat_it() -> None:
    rng = np.random.default_rng(2)
    seeds = _seeds(3, rng)
    xs = [rng.integers(-(2**40), 2**40, size=30, dtype=np.int64) for _ in range(3)]
    chunks = [list(masked_chunks(x, s, 4, CHUNK)) for x, s in zip(xs, seeds, strict=True)]
    acc = Accumulator(30, ["a", "b", "c"], 4, CHUNK, set())
    for seq, data in chunks[0][:2]:  # the stream is cut after two chunks
        acc.add(0, 4, seq, data)
    acc.restart(0)
    for i in range(3):
        for seq, data in chunks[i]:
            acc.add(i, 4, seq, data)
    assert np.array_equal(acc.result(), np.sum(xs, axis=0))

    acc = Accumulator(30, ["a", "b", "c"], 4, CHUNK, set())
    acc.add(0, 4, *chunks[0][0])
    with pytest.raises(ProtocolError, match="a masked chunk repeated"):  # no restart: replay
        acc.add(0, 4, 1, chunks[0][0][1])
    acc.restart(0)
    other = bytes(len(chunks[0][0][1]))
    with pytest.raises(ProtocolError, match="retried chunk 0 differs"):
        acc.add(0, 4, 0, other)


# -------------------------------------------------------------- the leader, end to end
class _Unavailable(grpc.RpcError):
    def __init__(self, metadata: tuple[Any, ...] = ()) -> None:
        self._md = metadata

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "connection reset"

    def trailing_metadata(self) -> tuple[Any, ...]:
        return self._md


class _Md:
    def __init__(self, key: str, value: str) -> None:
        self.key, self.value = key, value


class _Stub:
    """A party answering Contribute with its masked vector; ``cuts`` times it drops the
    stream after the first chunk (``reported``: with the party's failure metadata)."""

    def __init__(self, x: np.ndarray, seeds: PairSeeds, cuts: int, reported: bool) -> None:
        self.x, self.seeds, self.cuts, self.reported = x, seeds, cuts, reported
        self.calls = 0

    def PairKeys(self, req: pb.PairKeysRequest, timeout: float) -> pb.Ack:
        return pb.Ack(ok=True)

    def Contribute(self, req: pb.ContributeRequest, timeout: float) -> Iterator[pb.VectorChunk]:
        self.calls += 1
        pieces = masked_chunks(self.x, self.seeds, req.sum, lp.CHUNK_WORDS)
        stream = rpc.masked_stream(
            pieces,
            run_id=RUN_ID,
            round=req.round,
            phase=req.phase,
            layout_hash=req.layout_hash,
            total_len=req.total_len,
            sum_no=req.sum,
        )
        for k, chunk in enumerate(stream):
            if k == 1 and self.cuts:
                self.cuts -= 1
                md = (_Md(MD_PARTY, "p1"), _Md(MD_KIND, "protocol")) if self.reported else ()
                raise _Unavailable(md)
            yield chunk


def _federation(cuts: int, reported: bool = False) -> tuple[Any, list[_Stub], list[np.ndarray]]:
    rng = np.random.default_rng(3)
    seeds = _seeds(3, rng)
    size = 2 * lp.CHUNK_WORDS + 100  # three chunks
    xs = [rng.integers(-(2**40), 2**40, size=size, dtype=np.int64) for _ in range(3)]
    stubs = [
        _Stub(x, s, cuts if i == 1 else 0, reported)
        for i, (x, s) in enumerate(zip(xs, seeds, strict=True))
    ]
    names = frozenset(f"p{i}" for i in range(3))
    links = [
        Link(f"p{i}", "x", cast(Any, None), cast(Any, st), names) for i, st in enumerate(stubs)
    ]
    keys = {f"p{i}": pb.SignedKey(name=f"p{i}") for i in range(3)}
    pool = ThreadPoolExecutor(8)
    fed = lp.PairwiseFederation(RUN_ID, links, Traffic(), rpc.Deadline(30), pool, keys, probe_s=60)
    return fed, stubs, xs


def test_a_cut_contribute_is_asked_again_and_the_sum_is_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lp, "RETRY_PAUSE_S", 0.0)
    fed, stubs, xs = _federation(cuts=1)
    total = fed.sum(Phase.COUNTS, 0, xs[0].size, b"d" * 32)
    assert np.array_equal(total, np.sum(xs, axis=0))
    assert [s.calls for s in stubs] == [1, 2, 1]


@pytest.mark.parametrize(("cuts", "reported"), [(2, False), (1, True)])
def test_no_second_retry_and_no_retry_of_a_reported_failure(
    monkeypatch: pytest.MonkeyPatch, cuts: int, reported: bool
) -> None:
    monkeypatch.setattr(lp, "RETRY_PAUSE_S", 0.0)
    monkeypatch.setattr(lp.RingFederation, "_wait", _plain_wait)
    fed, stubs, xs = _federation(cuts=cuts, reported=reported)
    with pytest.raises(FedanonError):
        fed.sum(Phase.COUNTS, 0, xs[0].size, b"d" * 32)
    assert stubs[1].calls == (2 if not reported else 1)


def _plain_wait(self: Any, calls: Any, label: str, step: str) -> None:
    """Wait without the Status probe (the fake parties have no Status)."""
    for c in calls:
        c.future.exception()  # until done
        failed = c.failure()
        if failed is not None:
            raise failed


@pytest.mark.parametrize(("instructions", "waited"), [(0, "the keys"), (3, "instruction 2")])
def test_a_contribute_before_the_keys_names_what_it_waited_for(
    instructions: int, waited: str
) -> None:
    # the first sum (no instruction before it) said 'the keys and instruction -1'
    import time

    from fedanon.party.faults import TimedOut

    run = _party(_seeds(3, np.random.default_rng(2))[1])
    run.pair = pairsum.PairState(x25519.X25519PrivateKey.generate(), run.pair.signed)
    order = SumOrder(0, 0, Phase.COUNTS, b"d" * 32, 40, instructions)
    with pytest.raises(TimedOut) as err:
        list(pairsum.contribute(run, order, CHUNK, time.monotonic() + 0.05, lambda: True))
    assert f"{waited} did not come" in str(err.value) and "-1" not in str(err.value)
