"""Acceptance: hospitals stay in control.  Three daemons with their own [policy]; a leader
sending K below a hospital's min_K, a spec releasing a column the hospitals did not allow,
and a (patched) leader proposing a ring of one are all refused at Prepare: exit 2 naming the
hospital and the policy line, not one byte of statistics sent, no output."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    EXAMPLES,
    accepted_runs,
    policy_daemons,
    read_rows,
    table1_spec,
    write_rows,
)

import fedanon.leader.opening
from fedanon.errors import InputError
from fedanon.leader.federate import Daemon, federation_config
from fedanon.leader.links import PartyRejected
from fedanon.leader.run import run_federation
from fedanon.net.convert import secure_sum_to_pb
from fedanon.pb.fedanon.v1 import party_pb2 as pb
from fedanon.security.policy import PartyPolicy

pytestmark = pytest.mark.slow

NAMES = ("hospital-a", "hospital-b", "hospital-c")
UNCHANGED = ("Transfuse", "Surgery")


def _policies() -> dict[str, PartyPolicy]:
    relaxed = PartyPolicy(min_K=2, min_L=1, max_C=1.0, release_unchanged=UNCHANGED)
    strict = PartyPolicy(
        min_K=10,
        min_L=2,
        max_C=0.5,
        release_unchanged=UNCHANGED,
        sensitive_column="Surgery",  # max_C < 1: the column and values it bounds
        sensitive_values=("Transgender",),  # held by a record of hospital-b's slice
    )
    return {"hospital-a": relaxed, "hospital-b": strict, "hospital-c": relaxed}


def _split(tmp: Path) -> list[tuple[str, Path]]:
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    out = []
    for i, name in enumerate(NAMES):
        write_rows(tmp / f"{name}.csv", header, rows[i::3])
        out.append((name, tmp / f"{name}.csv"))
    return out


def _conf(ds: list[Daemon], work: Path, spec: Path, out: Path) -> Path:
    certdir = work / "certs"
    ring = "".join(f'[[party]]\nname = "{d.name}"\naddress = "127.0.0.1:{d.port}"\n' for d in ds)
    conf = work / "federation.toml"
    conf.write_text(
        f'[run]\nspec = "{spec}"\noutput = "{out}"\ndeadline_seconds = 120\n\n'
        f'[tls]\nca = "{certdir / "ca.pem"}"\ncert = "{certdir / "leader.pem"}"\n'
        f'key = "{certdir / "leader.key"}"\n\n{ring}'
    )
    return conf


def _logs(work: Path) -> dict[str, str]:
    return {n: (work / f"{n}.log").read_text() for n in NAMES}


def _stats_lines(text: str) -> list[int]:
    """Bytes of statistics per ended run, from the daemon's 'run X aborted/finished' lines."""
    return [int(m) for m in re.findall(r"run \w+ \w+: (\d+) bytes of statistics sent", text)]


def _no_statistics_moved(work: Path) -> None:
    for name, text in _logs(work).items():
        assert "/fedanon.v1.Party/Relay" not in text, name  # no relay was even attempted
        assert "/fedanon.v1.Party/Collect" not in text, name
        assert all(n == 0 for n in _stats_lines(text)), (name, _stats_lines(text))


def test_policies_refuse_at_prepare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = table1_spec(tmp_path)
    work = tmp_path / "w"
    work.mkdir()
    out = tmp_path / "released.csv"
    with policy_daemons(_split(tmp_path), work, _policies()) as ds:
        # 1. K = 2 < hospital-b's min_K = 10: `fedanon leader run` exits 2 naming it
        cmd = [sys.executable, "-m", "fedanon.cli", "leader", "run"]
        proc = subprocess.run(
            [*cmd, "--config", str(_conf(ds, work, spec, out))],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last == "fedanon: error: hospital-b refuses: K = 2 < min_K = 10", last
        assert not out.exists()
        logs = _logs(work)
        assert "refused by policy: K = 2 < min_K = 10" in logs["hospital-b"]
        assert not accepted_runs(logs["hospital-b"])
        for other in ("hospital-a", "hospital-c"):  # they had accepted; the leader aborted
            assert accepted_runs(logs[other]) and "aborted by the leader" in logs[other], other
        _no_statistics_moved(work)

        # 2. a spec releasing the identifier column unchanged: nobody allows that
        leaky = tmp_path / "leaky.toml"
        leaky.write_text(
            spec.read_text()
            .replace("K = 2", "K = 10")
            .replace('name = "ID"\nrole = "identifier"', 'name = "ID"\nrole = "other"')
        )
        cfg = federation_config(ds, work, leaky, out, None)
        with pytest.raises(PartyRejected) as err:
            run_federation(cfg)
        assert err.value.exit_code == 2 and err.value.rule == "release_unchanged"
        # every hospital refuses; the leader names the first in ring order, whoever answered first
        assert str(err.value).startswith("hospital-a refuses: column 'ID' would be released")
        assert not out.exists()
        _no_statistics_moved(work)

        # 3. a patched leader proposes every hospital a ring of one (itself)
        # (summed as the leader asked: secure_sum passes, the ring rule is what refuses)
        def ring_of_one(
            run_id: bytes,
            spec_text: str,
            files: Any,
            links: Any,
            i: int,
            secure_sum: str,
            mpc: Any = None,
        ) -> Any:
            me = pb.PartyRef(name=links[i].name, address=links[i].address)
            return pb.PrepareRequest(
                run_id=run_id,
                spec_toml=spec_text,
                files=files,
                ring=[me],
                ring_position=0,
                secure_sum=secure_sum_to_pb(secure_sum),
            )

        good = tmp_path / "k10.toml"
        good.write_text(spec.read_text().replace("K = 2", "K = 10"))
        with monkeypatch.context() as m:
            m.setattr(fedanon.leader.opening, "_prepare_request", ring_of_one)
            with pytest.raises(InputError) as err1:
                run_federation(federation_config(ds, work, good, out, None))
        assert err1.value.exit_code == 2
        assert re.fullmatch(
            r"hospital-[abc] refuses: ring of 1 < min_parties = 3", str(err1.value)
        ), err1.value
        assert not out.exists()
        _no_statistics_moved(work)
        logs = _logs(work)
        assert any("refused by policy: ring of 1 < min_parties = 3" in t for t in logs.values())
        assert not any("ring=1" in t for t in logs.values())  # nobody accepted it

        # control: the same daemons run an acceptable spec, and then statistics do move
        rep = run_federation(federation_config(ds, work, good, out, None))
        assert out.exists() and rep.records == 11
    logs = _logs(work)
    _, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    for name, text in logs.items():
        # hospital-b accepted only the control run (the others may also have accepted the
        # K = 2 run before the leader cancelled it: it was aborted without statistics)
        accepted = accepted_runs(text)
        assert len(accepted) == 1 if name == "hospital-b" else len(accepted) in (1, 2)
        line = accepted[-1]
        for field in ("leader=leader", "ring=3", "L=2", "K=10", "C=0.5", "score=infogain"):
            assert field in line, (field, line)
        assert "qids=[Job,Sex,Age]" in line and "unchanged=[Transfuse,Surgery]" in line
        assert re.search(r"spec=[0-9a-f]{16}", line)
        assert _stats_lines(text)[-1] > 0  # the control run sent statistics
        # what C bounds: the spec's sensitive values (the spec's, not a record's)
        # (hospital-b's policy names Transgender: its own values first; the others count
        # the spec's)
        of = "" if name == "hospital-b" else "1 of the spec: "
        binds = f"binds=[C=0.5 on Surgery: {of}Transgender]"
        assert binds in line, line
        text = text.replace(binds, "")
        for value in {r[1] for r in rows} | {"Transgender", "Urology"}:
            assert value not in text, (name, value)  # never a record value in a log


def test_federate_daemons_refuse_the_raw_record_spec_of_the_issue(tmp_path: Path) -> None:
    """K = 1, L = 1, C = 1, one QID, every other column 'other': before, `fedanon federate`
    released every raw record with exit 0.  Its daemons now carry a policy (K >= 2)."""
    table1_spec(tmp_path)  # the taxonomies
    spec = tmp_path / "raw.toml"
    others = "".join(
        f'[[attribute]]\nname = "{c}"\nrole = "other"\n' for c in ("ID", "Sex", "Age", "Surgery")
    )
    spec.write_text(
        "[privacy]\nL = 1\nK = 1\nC = 1\n"
        '[[attribute]]\nname = "Job"\nrole = "qid"\ntype = "categorical"\ntaxonomy = "job.txt"\n'
        '[[attribute]]\nname = "Transfuse"\nrole = "class"\nvalues = ["N", "Y"]\n' + others
    )
    args = [a for n, p in _split(tmp_path) for a in ("--party", f"{n}={p}")]
    out = tmp_path / "out.csv"
    cmd = [sys.executable, "-m", "fedanon.cli", "federate", "--spec", str(spec), *args]
    proc = subprocess.run([*cmd, "--output", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert re.search(r"hospital-[abc] refuses: K = 1 < min_K = 2", proc.stderr), proc.stderr
    assert not out.exists()
