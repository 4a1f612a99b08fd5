"""A party's side of a round at the floor: the Relay is stored and acknowledged, the run's
worker adds and forwards in order once the Instructions it depends on are applied, the last
party answers Collect as soon as the sum exists, and a failure is recorded, never sent back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import pytest

from fedanon.errors import ProtocolError
from fedanon.io.table import Schema, build_schema, encode_table
from fedanon.ledger.transcript import update_bytes
from fedanon.model.spec import load_spec
from fedanon.party.faults import Failure, PeerFailed, TimedOut, UnknownRun
from fedanon.party.relay import RelayWorker, Vector
from fedanon.party.run import PartyRun, Peer
from fedanon.security.keyagree import CHAIN_START, chain_applied
from fedanon.security.securesum import draw_mask, unmask
from fedanon.tds.decide import Decider
from fedanon.tds.state import Phase, Update
from fedanon.union.localparty import LocalParty

RING = (Peer("a", "-"), Peer("b", "-"), Peer("c", "-"))


def _schema(table1_dir: Path) -> tuple[Schema, Path]:
    spec, reader = load_spec(table1_dir / "run.toml")
    return build_schema(spec, reader), table1_dir / "table1.csv"


def _run(table1_dir: Path, position: int) -> PartyRun:
    schema, data = _schema(table1_dir)
    party = LocalParty(schema, encode_table(schema, data))
    return PartyRun(b"r" * 16, RING[position].name, schema.spec, party, RING, position, "leader")


def _start(run: PartyRun, forward: Callable[[Vector], None]) -> Callable[[], RelayWorker]:
    return lambda: RelayWorker("test", lambda v: run.process(v, forward))


def _refused(run: PartyRun, vec: Vector, box: list[Vector]) -> str:
    """Hand ``vec`` to the run; the failure it records (waited for, bounded)."""
    run.receive(vec, _start(run, box.append))
    end = time.monotonic() + 5
    while run.status().failure is None and time.monotonic() < end:
        time.sleep(0.01)
    failure = run.status().failure
    assert failure is not None
    return failure.detail


def _chain(*updates: Update) -> bytes:
    """The chain of the leader's Instructions (what a ring vector carries)."""
    chain = CHAIN_START
    for u in updates:
        chain = chain_applied(chain, update_bytes(u, False))
    return chain


def _vector(
    run: PartyRun, instructions: int, state: object = None, after: tuple[Update, ...] = ()
) -> Vector:
    st = run.party.state if state is None else state
    lay = st.count_layout()  # type: ignore[attr-defined]
    return Vector(
        st.round,  # type: ignore[attr-defined]
        Phase.COUNTS,
        lay.digest,
        instructions,
        draw_mask(lay.size),
        time.monotonic() + 30,
        _chain(*after),
    )


def _first_update(table1_dir: Path) -> tuple[Update, Decider]:
    """The leader's decision of round 0 over this party's table alone, and the leader."""
    schema, data = _schema(table1_dir)
    party = LocalParty(schema, encode_table(schema, data))
    decider = Decider(schema.spec, schema.new_trees(), len(party.table.class_labels))
    lay = decider.state.count_layout()
    update = decider.on_counts(party.stats(Phase.COUNTS, 0, lay.size, lay.digest))
    assert update.best is not None
    decider.apply(update)
    return update, decider


def _sent(box: list[Vector], n: int, within: float = 5.0) -> list[Vector]:
    end = time.monotonic() + within
    while len(box) < n and time.monotonic() < end:
        time.sleep(0.01)
    return box


def test_a_vector_waits_for_the_instruction_it_depends_on(table1_dir: Path) -> None:
    run = _run(table1_dir, 1)
    update, leader = _first_update(table1_dir)
    box: list[Vector] = []
    start = _start(run, box.append)
    # round 1's vector comes (from the predecessor) before round 0's Instruction (from the
    # leader): stored and acknowledged at once, added only after the Instruction
    vec = _vector(run, 1, leader.state, (update,))
    mask = vec.data.copy()  # the party may add into the vector it received
    t0 = time.monotonic()
    run.receive(vec, start)
    assert time.monotonic() - t0 < 0.5
    time.sleep(0.3)
    assert box == [] and run.status().received == 1 and run.status().done == 0
    assert run.instruct(0, update, time.monotonic() + 5)
    [out] = _sent(box, 1)
    own = run.party.stats(Phase.COUNTS, 1, vec.data.size, vec.layout_hash)
    assert np.array_equal(unmask(out.data, mask), own)
    assert (out.round, out.instructions, out.layout_hash) == (1, 1, vec.layout_hash)
    assert run.status().done == 1 and run.status().failure is None


def test_repeats_are_acknowledged_and_never_added_twice(table1_dir: Path) -> None:
    run = _run(table1_dir, 1)
    box: list[Vector] = []
    vec = _vector(run, 0)
    run.receive(vec, _start(run, box.append))
    run.receive(vec, _start(run, box.append))
    time.sleep(0.3)
    assert len(_sent(box, 1)) == 1
    other = Vector(vec.round, vec.phase, b"x" * 32, 0, vec.data, vec.deadline, vec.chain)
    with pytest.raises(ProtocolError, match="does not match"):
        run.receive(other, _start(run, box.append))


def test_instructions_apply_in_order_and_once(table1_dir: Path) -> None:
    run = _run(table1_dir, 0)
    update, _ = _first_update(table1_dir)
    with pytest.raises(TimedOut):  # number 1 before number 0: waits, bounded
        run.instruct(1, Update(round=1, end=True), time.monotonic() + 0.3)
    assert run.instruct(0, update, time.monotonic() + 5)
    assert not run.instruct(0, update, time.monotonic() + 5)  # a repeat is a no-op
    assert run.party.state.round == 1 and run.status().instructions == 1


def test_collect_is_answered_when_the_sum_exists(table1_dir: Path) -> None:
    run = _run(table1_dir, 2)  # the last party
    vec = _vector(run, 0)
    mask = vec.data.copy()
    got: list[tuple[bytes, np.ndarray]] = []
    waiter = threading.Thread(
        target=lambda: got.append(
            run.collected(0, Phase.COUNTS, time.monotonic() + 10, lambda: True)
        )
    )
    waiter.start()  # the leader's Collect arrives before the vector does
    time.sleep(0.2)
    assert not got
    run.receive(vec, _start(run, lambda v: pytest.fail("the last party forwards nothing")))
    waiter.join(5)
    [(digest, total)] = got
    own = run.party.stats(Phase.COUNTS, 0, vec.data.size, vec.layout_hash)
    assert digest == vec.layout_hash and np.array_equal(unmask(total, mask), own)


def test_a_failure_is_recorded_for_status_and_refuses_what_follows(table1_dir: Path) -> None:
    run = _run(table1_dir, 1)
    gone = Failure("c", "Relay", "unreachable", grpc.StatusCode.UNAVAILABLE, "relay to c failed")

    def forward(_v: Vector) -> None:
        raise PeerFailed(gone)

    run.receive(_vector(run, 0), _start(run, forward))
    end = time.monotonic() + 5
    while run.status().failure is None and time.monotonic() < end:
        time.sleep(0.01)
    assert run.status().failure == gone
    with pytest.raises(PeerFailed):
        run.receive(_vector(run, 0, None), _start(run, forward))


def test_the_last_party_reports_its_own_failure_to_collect(table1_dir: Path) -> None:
    run = _run(table1_dir, 2)
    vec = _vector(run, 0)
    bad = Vector(vec.round, vec.phase, b"y" * 32, 0, vec.data, vec.deadline, vec.chain)
    run.receive(bad, _start(run, lambda v: None))
    with pytest.raises(PeerFailed) as err:
        run.collected(0, Phase.COUNTS, time.monotonic() + 5, lambda: True)
    f = err.value.failure
    assert (f.party, f.kind) == ("c", "protocol") and "layout" in f.detail


def test_closing_the_run_ends_every_wait(table1_dir: Path) -> None:
    run = _run(table1_dir, 2)
    threading.Timer(0.2, run.close).start()
    t0 = time.monotonic()
    with pytest.raises(UnknownRun):
        run.collected(0, Phase.COUNTS, time.monotonic() + 30, lambda: True)
    assert time.monotonic() - t0 < 2.0
    with pytest.raises(UnknownRun):
        run.receive(_vector(run, 0), _start(run, lambda v: None))


def test_status_answers_while_the_worker_holds_the_run(table1_dir: Path) -> None:
    """A party busy with large statistics (the run's lock held) still answers Status: the
    leader's probe would otherwise name a slow party as failed."""
    run = _run(table1_dir, 1)
    with run.lock:
        t0 = time.monotonic()
        got = []
        probe = threading.Thread(target=lambda: got.append(run.status()))
        probe.start()
        probe.join(2.0)
        assert got and time.monotonic() - t0 < 2.0


def test_statistics_computed_ahead_are_the_ones_added(table1_dir: Path) -> None:
    """After an Instruction the party computes the next count statistics before the vector
    comes; the vector then carries exactly what an independent replica computes, once."""
    run = _run(table1_dir, 1)
    update, leader = _first_update(table1_dir)
    assert run.instruct(0, update, time.monotonic() + 5)
    assert run.ahead is not None and run.ahead[0][0] == 1  # round 1, under way
    replica = _run(table1_dir, 1).party  # no computation ahead: applied by hand
    replica.apply(update)
    vec = _vector(run, 1, leader.state, (update,))
    mask = vec.data.copy()
    box: list[Vector] = []
    run.receive(vec, _start(run, box.append))
    [out] = _sent(box, 1)
    own = replica.stats(Phase.COUNTS, 1, vec.data.size, vec.layout_hash)
    assert np.array_equal(unmask(out.data, mask), own)
    assert run.ahead_used == 1 and run.ahead is None


def test_a_vector_of_another_layout_is_refused_not_added(table1_dir: Path) -> None:
    run = _run(table1_dir, 1)
    update, leader = _first_update(table1_dir)
    assert run.instruct(0, update, time.monotonic() + 5)
    vec = _vector(run, 1, leader.state, (update,))
    bad = Vector(vec.round, vec.phase, b"y" * 32, 1, vec.data, vec.deadline, vec.chain)
    box: list[Vector] = []
    assert "layout differs" in _refused(run, bad, box)
    assert box == [] and run.ahead_used == 0


def test_a_carried_decision_starts_nothing_ahead(table1_dir: Path) -> None:
    """A decision carried in a pairwise Contribute is applied right before its statistics are
    computed in the same call: no background computation (no thread per sum and party)."""
    run = _run(table1_dir, 1)
    update, _ = _first_update(table1_dir)
    assert run.instruct(0, update, time.monotonic() + 5, ahead=False)
    assert run.ahead is None and run.instructions == 1


def test_a_vector_computed_after_another_decision_is_refused_not_added(table1_dir: Path) -> None:
    """A leader that gives this hospital one decision and the ring another (a split point
    moved) would read this hospital's statistics off the ring sum it masks itself: the
    vector carries the chain of the leader's Instructions and the party refuses a chain
    that is not its own (attack review R1)."""
    run = _run(table1_dir, 1)
    update, leader = _first_update(table1_dir)
    assert run.instruct(0, update, time.monotonic() + 5)
    other = Update(round=update.round, end=True)  # what the leader told the others
    bad = _vector(run, 1, leader.state, (other,))
    box: list[Vector] = []
    assert "other instructions" in _refused(run, bad, box)
    assert box == []
    good = _vector(run, 1, leader.state, (update,))
    assert good.chain == run.chain


def test_a_vector_of_a_hospital_handed_another_spec_is_refused(table1_dir: Path) -> None:
    """The chain starts from the run id and the run hash of the spec each side accepted: a
    leader that handed this hospital another spec (L, taxonomies) than the ring's gets a
    refusal, not statistics of two different generalizations (second review, R3)."""
    from fedanon.security.keyagree import chain_start

    run = _run(table1_dir, 0)
    run.chain = chain_start(b"r" * 16, b"the spec this hospital accepted")
    vec = _vector(run, 0)
    theirs = chain_start(b"r" * 16, b"the spec the others were given")
    bad = Vector(vec.round, vec.phase, vec.layout_hash, 0, vec.data, vec.deadline, theirs)
    box: list[Vector] = []
    assert "other instructions" in _refused(run, bad, box)
    assert box == []
    assert chain_start(b"r" * 16, b"a") != chain_start(b"s" * 16, b"a")
