"""Issue 24 attack, finding 4: a record too long for the mix-net's pad is a data refusal.

The leader chooses the pad size; the plain InputError told it "a released record needs 73
bytes but the pad size is 63" and named the hospital, so it could link record lengths to
hospitals -- the ownership the mix-net exists to hide.  Now the leader hears the fixed
sentence (the same for any record); the size stays in the hospital's log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fedanon.errors import DataError
from fedanon.io.sources import parse_source
from fedanon.party.config import PartyConfig
from fedanon.party.faults import classify, data_refusal
from fedanon.party.prepare import Proposal, prepare_run
from fedanon.party.run import Peer
from fedanon.security import certs, mixnet
from fedanon.security.policy import PartyPolicy

RING = ("hospital-a", "hospital-b", "hospital-c")
SPEC = (
    "[privacy]\nL = 1\nK = 1\nC = 1.0\n"
    '[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [0, 100]\n'
    '[[attribute]]\nname = "note"\nrole = "other"\n'
    '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
)


def _batch_failure(tmp: Path, note: str, caplog: pytest.LogCaptureFixture) -> tuple[str, str]:
    """(what the leader is told, what the hospital logs) when UnionBatch cannot pad a record."""
    pki = tmp / "pki"
    certs.init_ca(pki)
    names = [*RING, "leader"]
    issued = {n: certs.issue(pki, n, "leader" if n == "leader" else "party") for n in names}
    data = tmp / "b.csv"
    data.write_text(f"age,note,y\n30,short,n\n40,{note},y\n")
    cfg = PartyConfig(
        name="hospital-b",
        listen="127.0.0.1:0",
        data=parse_source(str(data), None, None, tmp),
        ca=pki / "ca.pem",
        cert=issued["hospital-b"].cert,
        key=issued["hospital-b"].key,
        policy=PartyPolicy(min_K=1, min_L=1, max_C=1.0, release_unchanged=("note", "y")),
        keep_table=False,
    )
    ring = tuple(Peer(n, f"{n}:1") for n in RING)
    run, _ = prepare_run(cfg, Proposal(b"r" * 16, SPEC, {}, ring, 1))
    keys = []
    for n in names:
        key = certs.load_private_key(issued[n].key)
        pem = issued[n].cert.read_bytes()
        if n == "hospital-b":
            keys.append(run.union_key(key, pem))  # type: ignore[arg-type]
        else:
            public = mixnet.generate_keypair()[1]
            keys.append(mixnet.sign_public_key(n, public, run.run_id, key, pem))  # type: ignore[arg-type]
    caplog.clear()
    with caplog.at_level(logging.ERROR), pytest.raises(DataError) as err:
        run.union_batch(keys, (pki / "ca.pem").read_bytes(), 40)
    f = classify(err.value, "hospital-b", "UnionBatch")
    assert (f.kind, f.party) == ("input", "hospital-b")
    return f.detail, caplog.text


def test_a_record_longer_than_the_pad_is_an_opaque_refusal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sent, logged = _batch_failure(tmp_path / "a", "x" * 30, caplog)
    assert sent == data_refusal("hospital-b")  # no size, no pad, nothing of the record
    assert "pad" in logged and "needs" in logged and "x" * 30 not in logged
    sent2, _ = _batch_failure(tmp_path / "b", "y" * 60, caplog)
    assert sent2 == sent  # the same answer whatever the record's length
