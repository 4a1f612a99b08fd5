"""The hospitals' MPC check of m-privacy (party/mpc.py): three (five) MPyC workers over the
federation's mTLS certificates answer exactly what the engine's rule says on the summed
per-hospital counts, and only that bit; secure-array shares travel as integers, never
pickled (party/mpccodec.py)."""

from __future__ import annotations

import importlib.util
import socket
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedanon.errors import ConfigError, ProtocolError
from fedanon.party.mpc import ChecksDiffer, MpcConfig, MpcSession, coalitions, keep_matrix
from fedanon.privacy.mprivacy import violating_groups
from fedanon.security import certs

# never import mpyc here: importing its runtime parses this process's sys.argv
if importlib.util.find_spec("mpyc") is None:
    pytest.skip("mpyc is not installed", allow_module_level=True)

NAMES = ("alice", "bob", "carol")
FIVE = (*NAMES, "dave", "erin")


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    certs.init_ca(d)
    for name in (*FIVE, "mallory"):
        certs.issue(d, name, "party")
    return d


RUN = "0f" * 16
ASKED = b"q" * 32  # the daemons' hash of the question (party.mpcrun.asked_digest)


def sessions(
    pki: Path, tmp: Path, m: int, k: int, c: float, records: int, names: tuple[str, ...] = NAMES,
    certs_of: tuple[str, ...] = NAMES, runs: tuple[str, ...] | None = None,
) -> list[MpcSession]:  # fmt: skip
    frac = Fraction(repr(c)).limit_denominator(10**9)
    ports = tuple(free_ports(len(names)))
    out = []
    for pid, who in enumerate(certs_of):
        cfg = MpcConfig(
            pid, names, ("localhost",) * len(names), ports, str(pki / "ca.pem"),
            str(pki / f"{who}.pem"), str(pki / f"{who}.key"), m, k, frac.numerator,
            frac.denominator, RUN if runs is None else runs[pid],
        )  # fmt: skip
        out.append(MpcSession(cfg, tmp / f"mpc-{pid}.json"))
    for s in out:  # the workers connect first, the records come once "the table is read"
        s.begin(records)
    return out


def ask_all(
    sess: list[MpcSession], per_party: np.ndarray, asked: list[bytes] | None = None
) -> list[bool | str]:
    answers: list[bool | str | None] = [None] * len(sess)

    def one(i: int) -> None:
        try:
            answers[i] = sess[i].check(per_party[i], ASKED if asked is None else asked[i], 60)
        except ProtocolError:
            answers[i] = "worker ended"
        except ChecksDiffer:
            answers[i] = "differ"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(sess))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(a is not None for a in answers)
    return [a if isinstance(a, str) else bool(a) for a in answers]


def _ask_briefly(session: Any, groups: np.ndarray, wait_s: float) -> list[object]:
    """One check asked from a thread, waited for ``wait_s`` seconds: [] (no answer yet),
    [bit] or ["worker ended"]."""
    got: list[object] = []

    def ask() -> None:
        try:
            got.append(session.check(groups, ASKED))
        except ProtocolError:
            got.append("worker ended")

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    t.join(wait_s)
    return got


def test_three_hospitals_open_only_the_rule(pki: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    k, c = 5, 0.5
    cases = [
        np.array([[[8, 1]], [[3, 1]], [[0, 0]]]),  # without alice 3 records remain: fails
        np.array([[[10, 2]], [[6, 3]], [[6, 2]]]),  # every rest >= 5, confidence <= 1/2
        np.array([[[12, 0]], [[8, 6]], [[0, 0]]]),  # without alice: 6 of 8 sensitive: fails
    ]
    for _ in range(3):
        recs = rng.integers(0, 12, size=(3, 4))
        cases.append(np.stack([recs, rng.integers(0, recs + 1)], axis=2))
    sess = sessions(pki, tmp_path, 1, k, c, 200)
    try:
        for groups in cases:
            want = not bool(violating_groups(groups, 1, k, c).any())
            assert ask_all(sess, groups) == [want] * 3
    finally:
        for s in sess:
            s.close()
    assert all(s.proc.returncode == 0 for s in sess)


def test_a_worker_with_another_hospitals_certificate_is_not_admitted(
    pki: Path, tmp_path: Path
) -> None:
    # carol's position held by mallory's certificate: nobody computes with it
    sess = sessions(pki, tmp_path, 1, 5, 1.0, 50, certs_of=("alice", "bob", "mallory"))
    try:
        groups = np.array([[[10]], [[6]], [[6]]])
        # alice never gets an answer without a complete, verified ring
        assert _ask_briefly(sess[0], groups[0], 5) in ([], ["worker ended"])
    finally:
        for s in sess:
            s.proc.kill()
            s.proc.wait()


def test_fewer_than_2m_plus_1_hospitals_is_refused() -> None:
    with pytest.raises(ConfigError, match="honest majority: at least 5 hospitals"):
        MpcConfig(0, NAMES, ("h",) * 3, (1, 2, 3), "ca", "c", "k", 2, 5, 1, 1, RUN)
    with pytest.raises(ConfigError, match="run id"):
        MpcConfig(0, NAMES, ("h",) * 3, (1, 2, 3), "ca", "c", "k", 1, 5, 1, 1, "")


def test_five_hospitals_m2_answer_the_rule_on_random_groups(pki: Path, tmp_path: Path) -> None:
    # the batched check (secure arrays, zero tests per hospital) against the engine's rule:
    # identity and confidence, groups that pass and fail, empty hospitals and empty groups
    rng = np.random.default_rng(22)
    k, c = 5, 0.6
    cases = [np.zeros((5, 2, 2), dtype=np.int64)]  # no record anywhere: passes
    cases.append(np.array([[[8, 0]], [[3, 0]], [[0, 0]], [[0, 0]], [[0, 0]]]))  # {A} leaves 3
    cases.append(np.array([[[9, 0]], [[9, 0]], [[0, 0]], [[0, 0]], [[0, 0]]]))  # 0 or 9: passes
    while len(cases) < 14:
        recs = rng.choice([0, 0, 0, 1, 3, 5, 6, 9, 20], size=(5, int(rng.integers(1, 4))))
        sens = (recs * rng.uniform(0, 0.7, size=recs.shape)).astype(np.int64)
        cases.append(np.stack([recs, sens], axis=2))
    wants = [not bool(violating_groups(g, 2, k, c).any()) for g in cases]
    assert True in wants and False in wants
    sess = sessions(pki, tmp_path, 2, k, c, 300, names=FIVE, certs_of=FIVE)
    try:
        for groups, want in zip(cases, wants, strict=True):
            assert ask_all(sess, groups) == [want] * 5
            ident = groups[:, :, :1]  # C = 1 in effect: the identity part alone
            assert (
                ask_all(sess, np.concatenate([ident, ident * 0], axis=2))
                == [not bool(violating_groups(ident, 2, k, 1.0).any())] * 5
            )
    finally:
        for s in sess:
            s.close()
    assert all(s.proc.returncode == 0 for s in sess)


def test_keep_matrix_marks_the_hospitals_outside_each_coalition() -> None:
    keep = keep_matrix(5, 2)
    assert keep.shape == (15, 5)  # 5 singletons, 10 pairs
    assert sorted(map(tuple, 1 - keep)) == sorted(
        tuple(int(i in s) for i in range(5)) for s in coalitions(5, 2)
    )
    assert keep_matrix(3, 0).shape == (0, 3)


def test_array_shares_travel_as_integers_never_pickled() -> None:
    import pickle

    from fedanon.party.mpccodec import ArrayCodec

    for values in ([], [0, 1, 7], [2**64 - 1, 2**64, 2**66 - 5, 3], [2**511]):
        a = np.array(values, dtype=object)
        back = ArrayCodec.loads(ArrayCodec.dumps(a))
        assert back.dtype == object and [int(v) for v in back] == values
    good = ArrayCodec.dumps(np.array([1, 2], dtype=object))
    for bad in (
        pickle.dumps(np.array([1, 2], dtype=object)),  # a pickle is refused, never loaded
        good[:-1],
        good + b"\0",
        b"FAa1\x09" + good[5:],  # more words than any field element
        b"",
    ):
        with pytest.raises(ProtocolError):
            ArrayCodec.loads(bad)
    with pytest.raises(ProtocolError):
        ArrayCodec.dumps(np.array([-1], dtype=object))
    with pytest.raises(ProtocolError):
        ArrayCodec.dumps(np.array([2**512], dtype=object))


def test_workers_asked_different_questions_share_nothing_and_end(
    pki: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # a leader asking alice about one candidate and bob, carol about another (whose groups
    # the totals show empty): the digests differ, every worker ends before any count is
    # shared, and no bit is opened.  bob and carol hold nothing: the bit would be alice's.
    sess = sessions(pki, tmp_path, 1, 5, 1.0, 50)
    try:
        groups = np.array([[[3]], [[0]], [[0]]])
        assert ask_all(sess, groups) == [False] * 3  # asked the same: alice's 3 < K
        other = b"x" * 32
        assert ask_all(sess, groups, [ASKED, other, other]) == ["differ"] * 3
        for s in sess:
            assert s.proc.wait(10) is not None
    finally:
        for s in sess:
            s.kill()
    err = capfd.readouterr().err
    assert "coalition check 1: alice were asked another question" in err  # bob's, carol's
    assert "coalition check 1: bob, carol were asked another question" in err  # alice's


def test_workers_of_another_run_are_refused_at_the_first_message(
    pki: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # carol's worker belongs to another run (same certificates, same ports): alice's and
    # bob's refuse it, so nothing is computed with it, and the refusal is logged
    sess = sessions(pki, tmp_path, 1, 5, 1.0, 50, runs=(RUN, RUN, "ab" * 16))
    try:
        assert _ask_briefly(sess[0], np.array([[10]]), 4) in ([], ["worker ended"])
    finally:
        for s in sess:
            s.kill()
    err = capfd.readouterr().err
    assert "MPC peer carol belongs to another run: connection closed" in err  # alice's, bob's
    assert "MPC peer alice belongs to another run: connection closed" in err  # carol's
