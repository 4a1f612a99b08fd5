"""m-privacy over daemons, the pieces around the MPC (issue 22 item 2): the hospital's opt-in
and honest majority, the [mpc] port, the leader's refusal before contacting anyone, the
wire form of a check, and a hospital refusing to specialize what passed no check."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.errors import ConfigError, ProtocolError
from fedanon.leader.config import parse_federation_config
from fedanon.leader.mpccheck import check_mpc_parties
from fedanon.model.spec import RunSpec, parse_spec
from fedanon.net.convert import coalition_from_pb, coalition_to_pb
from fedanon.party.config import parse_party_config
from fedanon.party.mpcrun import PORT, MpcRun, asked_digest, check_proposal
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.privacy.mprivacy import CoalitionQuery
from fedanon.security.policy import PartyPolicy, PolicyRefused
from fedanon.security.policytoml import parse_policy, policy_to_toml
from fedanon.tds.state import Update

RING3 = ["a", "b", "c"]


def spec(m: int) -> RunSpec:
    return parse_spec(
        f"[privacy]\nL = 2\nK = 5\nC = 1.0\nm = {m}\n"
        '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
        '[[attribute]]\nname = "zip"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
    )


def policy(allow_mpc: bool) -> PartyPolicy:
    return PartyPolicy(min_K=2, min_L=1, max_C=1.0, release_unchanged=("y",), allow_mpc=allow_mpc)


def test_the_policy_refuses_m_without_allow_mpc_naming_the_line() -> None:
    policy(False).check(spec(0), RING3, "a")  # plain LKC: no MPC, nothing asked
    with pytest.raises(PolicyRefused, match="m = 1 needs allow_mpc = true") as err:
        policy(False).check(spec(1), RING3, "a")
    assert err.value.rule == "allow_mpc"
    policy(True).check(spec(1), RING3, "a")


def test_the_policy_refuses_a_ring_without_an_honest_majority() -> None:
    with pytest.raises(PolicyRefused, match="at least 5 hospitals, the ring has 3") as err:
        policy(True).check(spec(2), RING3, "a")
    assert err.value.rule == "ring"
    policy(True).check(spec(2), [*RING3, "d", "e"], "a")


def test_allow_mpc_round_trips_through_party_toml() -> None:
    text = policy_to_toml(policy(True))
    assert "allow_mpc = true" in text
    import tomllib

    back = parse_policy(tomllib.loads(text)["policy"], "p")
    assert back.allow_mpc is True
    assert parse_policy({"min_K": 2, "min_L": 1, "max_C": 1.0}, "p").allow_mpc is False
    with pytest.raises(ConfigError, match="allow_mpc"):
        PartyPolicy(min_K=2, min_L=1, max_C=1.0, allow_mpc="yes")  # type: ignore[arg-type]


PARTY = """
[party]
name = "a"
listen = "0.0.0.0:7443"
data = "patients.csv"
[tls]
ca = "ca.pem"
cert = "a.pem"
key = "a.key"
"""


def test_party_config_mpc_listen() -> None:
    assert parse_party_config(PARTY).mpc_listen is None
    cfg = parse_party_config(PARTY + '[mpc]\nlisten = "0.0.0.0:7500"\n')
    assert cfg.mpc_listen == "0.0.0.0:7500"
    for bad in ('"0.0.0.0:0"', '"7500"', '"h:port"'):
        with pytest.raises(ConfigError, match=r"\[mpc\] listen must be HOST:PORT"):
            parse_party_config(PARTY + f"[mpc]\nlisten = {bad}\n", "party.toml")
    with pytest.raises(ConfigError, match="unknown key"):
        parse_party_config(PARTY + '[mpc]\nlisten = "h:1"\nport = 2\n', "party.toml")


def test_a_daemon_without_an_mpc_port_refuses_before_reading() -> None:
    cfg = parse_party_config(PARTY)
    addrs = ("h:1", "h:2", "h:3")
    check_proposal(cfg, spec(0), tuple(RING3), ("", "", ""))  # m = 0: nothing needed
    with pytest.raises(PolicyRefused, match=r"\[mpc\] listen in party.toml"):
        check_proposal(cfg, spec(1), tuple(RING3), addrs)
    cfg = parse_party_config(PARTY + '[mpc]\nlisten = "0.0.0.0:7500"\n')
    check_proposal(cfg, spec(1), tuple(RING3), addrs)
    with pytest.raises(ProtocolError, match="no valid MPC address for b"):
        check_proposal(cfg, spec(1), tuple(RING3), ("h:1", "", "h:3"))
    with pytest.raises(PolicyRefused, match="honest majority"):
        check_proposal(cfg, spec(2), tuple(RING3), addrs)


def federation(m_addresses: bool, n: int = 3) -> str:
    parties = "".join(
        f'[[party]]\nname = "h{i}"\naddress = "h{i}:7443"\n'
        + (f'mpc_address = "h{i}:7500"\n' if m_addresses else "")
        for i in range(n)
    )
    return (
        '[run]\nspec = "run.toml"\noutput = "out.csv"\n[tls]\nca = "ca.pem"\n'
        'cert = "l.pem"\nkey = "l.key"\n' + parties
    )


def test_the_leader_refuses_before_contacting_anyone() -> None:
    cfg = parse_federation_config(federation(True), "federation.toml", Path("/srv"))
    assert check_mpc_parties(spec(0), cfg) == {}
    assert check_mpc_parties(spec(1), cfg) == {f"h{i}": f"h{i}:7500" for i in range(3)}
    with pytest.raises(ConfigError, match="honest majority for its MPC: at least 5"):
        check_mpc_parties(spec(2), cfg)
    bare = parse_federation_config(federation(False), "federation.toml")
    assert check_mpc_parties(spec(0), bare) == {}
    with pytest.raises(ConfigError, match="h0 has no mpc_address"):
        check_mpc_parties(spec(1), bare)


def test_coalition_check_on_the_wire() -> None:
    q = CoalitionQuery(check=3, instructions=7, candidate=(1, 4))
    assert coalition_from_pb(coalition_to_pb(q, b"r" * 16)) == q
    root = CoalitionQuery(check=0, instructions=0, candidate=None)  # the generalized table
    assert coalition_from_pb(coalition_to_pb(root, b"r" * 16)) == root
    with pytest.raises(ProtocolError, match="checked first, only"):  # never later
        coalition_from_pb(pb.CoalitionCheckRequest(run_id=b"r" * 16, check=1))
    with pytest.raises(ProtocolError, match="negative"):
        CoalitionQuery(0, 0, (-1, 2))


class _NoWorker:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def begin(self, records: int) -> None:
        self.calls.append(f"begin {records}")

    def close(self, timeout: float) -> None:
        self.calls.append("close")

    def kill(self) -> None:
        self.calls.append("kill")


def test_a_worker_started_before_the_read_ends_with_the_run_or_its_refusal(
    tmp_path: Path,
) -> None:
    # started while the table is read; a run not accepted after all kills it at once (it
    # may still be connecting), an accepted one gets the records and ends gracefully when
    # the run finished; an aborted one is killed at once (its peers may never reach
    # MPyC's shutdown: the Abort must not wait for them)
    refused = MpcRun(spec(1), _NoWorker(), tmp_path / "a")  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="never began"):
        refused.check(None, CoalitionQuery(0, 0, (0, 1)), 0.0)  # type: ignore[arg-type]
    refused.close(finished=True)
    assert refused.session.calls == ["kill"]  # type: ignore[attr-defined]
    accepted = MpcRun(spec(1), _NoWorker(), tmp_path / "b")  # type: ignore[arg-type]
    assert accepted.begin(120) is accepted
    accepted.close(finished=True)
    assert accepted.session.calls == ["begin 120", "close"]  # type: ignore[attr-defined]
    aborted = MpcRun(spec(1), _NoWorker(), tmp_path / "c")  # type: ignore[arg-type]
    aborted.begin(120).close()
    assert aborted.session.calls == ["begin 120", "kill"]  # type: ignore[attr-defined]


def test_a_hospital_specializes_only_what_passed_in_that_state(tmp_path: Path) -> None:
    run = MpcRun(spec(1), _NoWorker(), tmp_path).begin(10)  # type: ignore[arg-type]
    run.passed[4] = (0, 2)  # check in the state after 4 Instructions: (0, 2) passed
    run.admit(3, Update(round=1))  # no specialization (a split, the end): nothing to check
    run.admit(4, Update(round=2, best=(0, 2)))
    with pytest.raises(ProtocolError, match="passed no coalition check"):
        run.admit(4, Update(round=2, best=(1, 2)))  # another candidate than the one checked
    with pytest.raises(ProtocolError, match="passed no coalition check"):
        run.admit(5, Update(round=3, best=(0, 2)))  # not checked in that state
    run.close()
    assert not tmp_path.exists()


def test_one_m_private_run_at_a_time_holds_the_mpc_port(tmp_path: Path) -> None:
    # the port is fixed in party.toml: while a run holds it, another is refused at Prepare
    # (before its worker starts or its table is read), saying nothing about the data; the
    # run's end frees it
    cfg = parse_party_config(PARTY + '[mpc]\nlisten = "0.0.0.0:7500"\n')
    addrs = ("h:1", "h:2", "h:3")
    PORT.take(b"1" * 16)
    try:
        with pytest.raises(PolicyRefused, match="MPC port is in use by another run") as err:
            check_proposal(cfg, spec(1), tuple(RING3), addrs)
        assert err.value.rule == "mpc"
        check_proposal(cfg, spec(0), tuple(RING3), ("", "", ""))  # m = 0 needs no port
        with pytest.raises(PolicyRefused, match="try again after it ends"):
            PORT.take(b"2" * 16)  # a race past check_proposal: launch refuses
        PORT.free(b"2" * 16)  # not the holder: nothing freed
        with pytest.raises(PolicyRefused):
            check_proposal(cfg, spec(1), tuple(RING3), addrs)
    finally:
        MpcRun(spec(1), _NoWorker(), tmp_path, b"1" * 16).close()  # type: ignore[arg-type]
    check_proposal(cfg, spec(1), tuple(RING3), addrs)  # free again
    assert PORT.holder is None


class _State:
    def __init__(self, chain: bytes) -> None:
        self.run_id = b"r" * 16
        self.chain = chain


def test_the_asked_digest_binds_the_check_state_and_candidate() -> None:
    q = CoalitionQuery(check=2, instructions=5, candidate=(1, 4))
    base = asked_digest(_State(b"c" * 32), q)  # type: ignore[arg-type]
    assert base == asked_digest(_State(b"c" * 32), q)  # type: ignore[arg-type]
    others = [
        asked_digest(_State(b"d" * 32), q),  # another chain of Instructions
        asked_digest(_State(b"c" * 32), CoalitionQuery(2, 5, (1, 5))),  # another candidate
        asked_digest(_State(b"c" * 32), CoalitionQuery(3, 5, (1, 4))),  # another check
        asked_digest(_State(b"c" * 32), CoalitionQuery(2, 6, (1, 4))),
    ]
    assert len({base, *others}) == 5
