"""Pairwise-masked secure sum (issue 19): masks cancel, one party's message depends on every
other party's seed, replayed chunks and swapped/dropped/replayed keys are caught."""

from __future__ import annotations

import secrets
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedanon.errors import ProtocolError
from fedanon.security import certs
from fedanon.security.certs import load_private_key
from fedanon.security.keyagree import KeyRejected, PairSeeds, derive_seeds, new_sum_key
from fedanon.security.pairwise import Accumulator, mask, masked_chunks
from fedanon.security.prg import keystream


def _seeds(n: int, rng: np.random.Generator) -> list[PairSeeds]:
    """Symmetric random pair seeds (s_ij = s_ji) for n parties."""
    table = [[None if i == j else b"" for j in range(n)] for i in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            s = rng.bytes(32)
            table[i][j] = table[j][i] = s
    return [PairSeeds(i, tuple(row)) for i, row in enumerate(table)]


def _sum(xs: list[np.ndarray], seeds: list[PairSeeds], t: int, chunk: int) -> np.ndarray:
    size = xs[0].size
    acc = Accumulator(size, [f"p{i}" for i in range(len(xs))], t, chunk, set())
    for i, x in enumerate(xs):
        for seq, data in masked_chunks(x, seeds[i], t, chunk):
            acc.add(i, t, seq, data)
    return acc.result()


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(3, 7),
    size=st.integers(0, 3000),
    chunk=st.integers(1, 600).map(lambda c: 2 * c),
    t=st.integers(0, 2**32),
    seed=st.integers(0, 2**32),
)
def test_masks_cancel(n: int, size: int, chunk: int, t: int, seed: int) -> None:
    rng = np.random.default_rng(seed)  # test data only; the masks come from AES-CTR
    xs = [rng.integers(-(2**40), 2**40, size=size, dtype=np.int64) for _ in range(n)]
    got = _sum(xs, _seeds(n, rng), t, chunk)
    assert np.array_equal(got, np.sum(xs, axis=0, dtype=np.int64) if size else got)
    assert got.size == size


def test_masked_message_is_not_the_statistics() -> None:
    rng = np.random.default_rng(1)
    seeds = _seeds(3, rng)
    x = np.arange(1000, dtype=np.int64)
    data = b"".join(d for _, d in masked_chunks(x, seeds[1], 0, 256))
    y = np.frombuffer(data, dtype="<u8")
    assert not np.array_equal(y, x.view(np.uint64))
    assert len(set(y.tolist())) > 990  # looks uniform: (almost) no repeated word


@pytest.mark.parametrize("n", [3, 5])
def test_message_depends_on_every_other_partys_seed(n: int) -> None:
    """Changing any single pair seed of party i changes the leader's view of i's message:
    a coalition holding every seed but one learns nothing fixed about x_i."""
    rng = np.random.default_rng(7)
    seeds = _seeds(n, rng)
    x = rng.integers(0, 100, size=64, dtype=np.int64)
    for i in range(n):
        base = mask(seeds[i], 3, 0, 64) + x.view(np.uint64)
        for j in range(n):
            if j == i:
                continue
            changed = list(seeds[i].seeds)
            changed[j] = secrets.token_bytes(32)
            other = PairSeeds(i, tuple(changed))
            view = mask(other, 3, 0, 64) + x.view(np.uint64)
            assert not np.array_equal(view, base), (i, j)
            # ... and in every word: no part of the message is fixed by the coalition
            assert np.count_nonzero(view == base) <= 1


def test_keystream_from_offset_and_sum() -> None:
    seed = bytes(range(32))
    whole = keystream(seed, 5, 0, 100)
    assert np.array_equal(keystream(seed, 5, 37, 20), whole[37:57])
    assert np.array_equal(keystream(seed, 5, 38, 20), whole[38:58])
    assert not np.array_equal(keystream(seed, 6, 0, 100), whole)  # the nonce binds the sum


def _chunks(x: np.ndarray, seeds: PairSeeds, t: int) -> list[tuple[int, bytes]]:
    return list(masked_chunks(x, seeds, t, 16))


def test_replayed_chunk_is_rejected() -> None:
    rng = np.random.default_rng(3)
    seeds = _seeds(3, rng)
    x = rng.integers(0, 9, size=40, dtype=np.int64)
    seen: set[bytes] = set()
    names = ["a", "b", "c"]
    acc0 = Accumulator(40, names, 0, 16, seen)
    old = _chunks(x, seeds[0], 0)
    for seq, data in old:
        acc0.add(0, 0, seq, data)
    acc1 = Accumulator(40, names, 1, 16, seen)
    # a chunk of sum 0 announced as sum 0: refused
    with pytest.raises(ProtocolError, match="sum 0 in sum 1"):
        acc1.add(0, 0, 0, old[0][1])
    # the same chunk with its sum number rewritten: refused by its bytes
    with pytest.raises(ProtocolError, match="earlier sum"):
        acc1.add(0, 1, 0, old[0][1])
    new = _chunks(x, seeds[0], 1)
    acc1.add(0, 1, 0, new[0][1])
    with pytest.raises(ProtocolError, match="chunk 0, expected 1"):
        acc1.add(0, 1, 0, new[0][1])  # the same chunk twice
    with pytest.raises(ProtocolError, match="does not fit"):
        acc1.add(1, 1, 0, new[0][1][:8])
    with pytest.raises(ProtocolError, match="incomplete"):
        acc1.result()


# --- key agreement with real federation certificates -------------------------------------

NAMES = ["hospital-a", "hospital-b", "hospital-c"]


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ca")
    certs.init_ca(d)
    for name in NAMES:
        certs.issue(d, name, "party")
    certs.issue(d, "leader", "leader")
    return d


def _key(ca: Path, name: str, run_id: bytes):  # type: ignore[no-untyped-def]
    tls_key = load_private_key((ca / f"{name}.key").read_bytes())
    return new_sum_key(name, run_id, tls_key, (ca / f"{name}.pem").read_bytes())


def test_seeds_agree_pairwise(ca: Path) -> None:
    run_id = secrets.token_bytes(16)
    pairs = [_key(ca, n, run_id) for n in NAMES]
    keys = [s for _, s in pairs]
    ca_pem = (ca / "ca.pem").read_bytes()
    seeds = [derive_seeds(p, keys, NAMES, i, ca_pem, run_id) for i, (p, _) in enumerate(pairs)]
    for i in range(3):
        for j in range(3):
            if i != j:
                assert seeds[i].seeds[j] == seeds[j].seeds[i]
    assert len({seeds[0].seeds[1], seeds[0].seeds[2], seeds[1].seeds[2]}) == 3
    other = secrets.token_bytes(16)  # another run: other seeds even for the same key pairs
    again = derive_seeds(
        pairs[0][0],
        [_key(ca, n, other)[1] if i else keys[0] for i, n in enumerate(NAMES)],
        NAMES,
        0,
        ca_pem,
        other,
    )
    assert again.seeds[1] != seeds[0].seeds[1]


def test_swapped_dropped_replayed_keys_name_their_holder(ca: Path) -> None:
    run_id = secrets.token_bytes(16)
    pairs = [_key(ca, n, run_id) for n in NAMES]
    keys = [s for _, s in pairs]
    ca_pem = (ca / "ca.pem").read_bytes()
    me = pairs[0][0]

    def check(bundle, holder: str) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(KeyRejected) as err:
            derive_seeds(me, bundle, NAMES, 0, ca_pem, run_id)
        assert err.value.holder == holder
        assert holder in str(err.value)

    check([keys[0], keys[2], keys[1]], "hospital-b")  # swapped
    check([keys[0], keys[1]], "hospital-c")  # dropped
    old = _key(ca, "hospital-b", secrets.token_bytes(16))[1]
    check([keys[0], old, keys[2]], "hospital-b")  # replayed from another run
    forged = _key(ca, "hospital-c", run_id)[1]  # the leader's own key pair in b's place:
    from dataclasses import replace

    check([keys[0], replace(forged, name="hospital-b"), keys[2]], "hospital-b")
    lead = _key(ca, "leader", run_id)[1]
    check([keys[0], replace(lead, name="hospital-b"), keys[2]], "hospital-b")
    check([keys[1], keys[1], keys[2]], "hospital-a")  # this party's own slot replaced


def test_a_pairwise_run_refuses_relay_and_collect() -> None:
    """Hospitals never connect to each other in a pairwise run: no predecessor may Relay,
    nobody Collects along a ring."""
    from fedanon.party.pairsum import PairState
    from fedanon.party.run import PartyRun, Peer
    from fedanon.tds.state import Phase

    ring = tuple(Peer(f"h{i}", f"127.0.0.1:{i + 1}") for i in range(3))
    run = PartyRun(b"r" * 16, "h2", None, None, ring, 2, "leader")  # type: ignore[arg-type]
    assert run.predecessor == ("h1", "party")  # a ring run
    run.pair = PairState(None, None)  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="pairwise"):
        _ = run.predecessor
    with pytest.raises(ProtocolError, match="ring run"):
        run.collected(0, Phase.COUNTS, 0.0, lambda: True)


def test_a_low_order_key_names_its_holder_at_any_position(ca: Path) -> None:
    """A hospital that signs a low-order X25519 point (all zeros) as its key is named by
    the honest hospital's refusal, whichever of the two sits lower in the ring."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    from fedanon.security.keyagree import _key_message
    from fedanon.security.mixnet import SignedKey

    run_id = secrets.token_bytes(16)
    ca_pem = (ca / "ca.pem").read_bytes()
    pairs = [_key(ca, n, run_id) for n in NAMES]
    for bad in range(3):
        tls = load_private_key((ca / f"{NAMES[bad]}.key").read_bytes())
        sig = tls.sign(_key_message(run_id, NAMES[bad], bytes(32)), ec.ECDSA(hashes.SHA256()))
        low = SignedKey(NAMES[bad], bytes(32), sig, (ca / f"{NAMES[bad]}.pem").read_bytes())
        keys = [low if i == bad else s for i, (_, s) in enumerate(pairs)]
        for me in (i for i in range(3) if i != bad):
            with pytest.raises(KeyRejected) as err:
                derive_seeds(pairs[me][0], keys, NAMES, me, ca_pem, run_id)
            assert err.value.holder == NAMES[bad]


def test_sum_masks_are_bound_to_the_state_and_the_order() -> None:
    """The masks of one sum cancel only when every party applied the same instructions and
    answers the same order: a party one decision ahead (or asked another order under the
    same sum number) makes the total uniformly random, never its own statistics."""
    from fedanon.security.keyagree import CHAIN_START, chain_applied, sum_seeds

    n, size = 3, 64
    base = _seeds(n, np.random.default_rng(11))
    stats = [np.arange(size, dtype=np.int64) * (i + 1) for i in range(n)]
    order, other = b"order-1", b"order-2"
    ahead = chain_applied(CHAIN_START, b"decision 1")

    def total(chains: list[bytes], orders: list[bytes]) -> np.ndarray:
        out = np.zeros(size, dtype=np.uint64)
        for i in range(n):
            s = sum_seeds(base[i], chains[i], orders[i])
            words = np.concatenate(
                [np.frombuffer(d, dtype="<u8") for _, d in masked_chunks(stats[i], s, 5, 16)]
            )
            np.add(out, words, out=out)
        return out.view(np.int64)

    want = np.sum(stats, axis=0)
    assert np.array_equal(total([CHAIN_START] * n, [order] * n), want)
    assert np.array_equal(total([ahead] * n, [order] * n), want)
    for bad in range(n):
        chains = [ahead if i == bad else CHAIN_START for i in range(n)]
        desync = total(chains, [order] * n)
        assert np.abs(desync - want).min() > 1 << 32  # random words, not statistics
        orders = [other if i == bad else order for i in range(n)]
        assert np.abs(total([CHAIN_START] * n, orders) - want).min() > 1 << 32


def test_a_sum_longer_than_a_party_computes_is_refused_before_allocating() -> None:
    """A union sketch layout inflated by a hostile leader (terabytes of cells) is refused
    when its statistics are asked, before anything is allocated."""
    from fedanon.net.rpc import MAX_VECTOR_LEN
    from fedanon.party.run import PartyRun, Peer
    from fedanon.tds.state import Phase

    ring = tuple(Peer(f"h{i}", f"127.0.0.1:{i + 1}") for i in range(3))
    run = PartyRun(b"r" * 16, "h2", None, None, ring, 2, "leader")  # type: ignore[arg-type]
    for size in (MAX_VECTOR_LEN + 1, 1 << 60, -1):
        with pytest.raises(ProtocolError, match="elements"):
            run.statistics(Phase.UNION_SKETCH, 9, size, bytes(32))


def test_a_run_id_is_never_prepared_twice() -> None:
    """A run id comes once: after its run ended, a Prepare with the same id is refused (an
    earlier run's signed pairwise keys would otherwise verify again)."""
    from fedanon.party.runs import RunRegistry

    reg = RunRegistry("h0", 60.0)
    with reg.loading(b"a" * 16):
        pass  # the run was prepared (and dropped)
    with pytest.raises(ProtocolError, match="used before"), reg.loading(b"a" * 16):
        pass
    with reg.loading(b"b" * 16):  # a new id is fine
        pass


def test_one_states_statistics_are_computed_once() -> None:
    """The same statistics of one state under two sums (ring or pairwise) would let a leader
    that keeps the other hospitals in step subtract one hospital's change: refused; another
    phase, size or layout of the same state, or the next state, is computed."""
    from fedanon.party.run import PartyRun, Peer
    from fedanon.security.keyagree import chain_applied
    from fedanon.tds.state import Phase

    class Counting:
        def stats(self, phase, round_, size, digest):  # type: ignore[no-untyped-def]
            return np.zeros(size, dtype=np.int64)

    ring = tuple(Peer(f"h{i}", f"127.0.0.1:{i + 1}") for i in range(3))
    run = PartyRun(b"r" * 16, "h2", None, Counting(), ring, 2, "leader")  # type: ignore[arg-type]
    run.statistics(Phase.COUNTS, 0, 8, b"x")
    with pytest.raises(ProtocolError, match="already sent"):
        run.statistics(Phase.COUNTS, 1, 8, b"x")  # another round number changes nothing
    run.statistics(Phase.SPLIT, 0, 8, b"x")
    run.statistics(Phase.COUNTS, 0, 9, b"x")
    run.statistics(Phase.COUNTS, 0, 8, b"y")
    run.chain = chain_applied(run.chain, b"decision")
    run.statistics(Phase.COUNTS, 1, 8, b"x")
