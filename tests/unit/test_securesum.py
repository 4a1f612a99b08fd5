"""Ring secure sum: exactness, wrap-around, uniformity of what a party sees, idempotent replay."""

from __future__ import annotations

import time

import numpy as np
import pytest

from fedanon.io.table import build_schema, encode_table
from fedanon.model.spec import load_spec
from fedanon.party.relay import Vector
from fedanon.party.run import PartyRun, Peer
from fedanon.security.securesum import add_share, draw_mask, unmask
from fedanon.tds.state import Phase
from fedanon.union.localparty import LocalParty


def test_result_equals_plain_sum() -> None:
    rng = np.random.default_rng(1)
    parts = [rng.integers(-(10**6), 10**6, size=257, dtype=np.int64) for _ in range(4)]
    mask = draw_mask(257)
    v = mask
    for p in parts:
        v = add_share(v, p)
    assert np.array_equal(unmask(v, mask), sum(parts))


def test_wraps_mod_2_64() -> None:
    big = np.array([2**63 - 1, -(2**63), -1], dtype=np.int64)
    mask = np.array([2**64 - 1, 2**64 - 1, 0], dtype=np.uint64)
    v = add_share(add_share(mask, big), np.array([1, -1, 1], dtype=np.int64))
    # (2^63 - 1) + 1 and -2^63 - 1 overflow int64 and wrap exactly like two's complement
    assert unmask(v, mask).tolist() == [-(2**63), 2**63 - 1, 0]
    assert v.dtype == np.uint64


def test_empty_and_fresh_masks() -> None:
    assert draw_mask(0).size == 0
    assert not np.array_equal(draw_mask(8), draw_mask(8))


def test_masked_vector_is_uniform() -> None:
    """Byte values and top bits of masked all-zero-stats vectors are uniform (chi-square)."""
    counts = np.zeros(256, dtype=np.int64)
    top = np.zeros(16, dtype=np.int64)
    stats = np.arange(512, dtype=np.int64)  # very non-uniform statistics
    for _ in range(200):
        v = add_share(draw_mask(512), stats)
        counts += np.bincount(v.view(np.uint8), minlength=256)
        top += np.bincount((v >> np.uint64(60)).astype(np.int64), minlength=16)
    for obs in (counts, top):
        exp = obs.sum() / obs.size
        chi2 = float(((obs - exp) ** 2 / exp).sum())
        dof = obs.size - 1
        assert chi2 < dof + 6 * np.sqrt(2 * dof), chi2  # ~6 sigma: fails ~never by chance


@pytest.fixture()
def party_run(examples_dir) -> PartyRun:  # type: ignore[no-untyped-def]
    spec, reader = load_spec(examples_dir / "adult" / "run.toml")
    schema = build_schema(spec, reader)
    table = encode_table(schema, examples_dir / "adult" / "adult.csv.gz")
    ring = (Peer("a", "-"), Peer("b", "-"), Peer("c", "-"))
    return PartyRun(b"r" * 16, "b", spec, LocalParty(schema, table), ring, 1, "leader")


def test_replay_is_not_re_masked(party_run: PartyRun) -> None:
    st = party_run.party.state
    layout = st.count_layout()
    mask = draw_mask(layout.size)
    sent: list[np.ndarray] = []
    vector = Vector(st.round, Phase.COUNTS, layout.digest, 0, mask.copy(), time.monotonic() + 30)

    def forward(v: Vector) -> None:
        sent.append(v.data.copy())

    party_run.relay(vector, forward)
    party_run.relay(vector, forward)
    assert len(sent) == 2 and np.array_equal(sent[0], sent[1])
    own = party_run.party.stats(Phase.COUNTS, st.round, layout.size, layout.digest)
    assert np.array_equal(unmask(sent[0], mask), own)  # added exactly once
    from fedanon.errors import ProtocolError

    with pytest.raises(ProtocolError):  # a "retry" with another layout is refused
        party_run.relay(
            Vector(st.round, Phase.COUNTS, b"other", 0, mask, time.monotonic() + 30), forward
        )
