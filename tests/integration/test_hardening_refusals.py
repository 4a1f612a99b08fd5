"""Issue 24 against real daemons with real mTLS: a leader with a valid certificate probing
the hospitals.

* Item 1: the leader's whole output (exit code, stdout, stderr, files) for a refused spec is
  byte-identical for two tables that differ in one record's value -- before, the refusal named
  the line of the first record that did not fit, so ``domain = [17, 40)`` told whether line
  2's age was below 40, and dropping one ``values`` entry named the first record holding it.
* Item 2: the hospital's sensitive column cannot be moved to ``other`` nor bound for a rare
  value only.
* Item 11: a CA-signed leader certificate a hospital does not authorize: exit 2 naming the
  authorization failure and the hospital (before: exit 1, ``_InactiveRpcError`` in the log).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import policy_daemons

from fedanon.leader.federate import Daemon
from fedanon.security import certs
from fedanon.security.policytoml import parse_policy

pytestmark = pytest.mark.slow

NAMES = ("hospital-a", "hospital-b", "hospital-c")
HEADER = "name,age,sex,marital,y\n"
MARITAL = ("Divorced", "Married", "Never-married", "Widowed")
POLICY = parse_policy(
    {
        "min_K": 2,
        "min_L": 1,
        "max_C": 0.5,
        "release_unchanged": ["marital", "y"],
        "identifiers": ["name"],
        "sensitive_column": "marital",
        "sensitive_values": ["Widowed"],
    },
    "party.toml",
)
FITS = [  # ages in [17, 40), every marital value but Divorced
    "Ann,23,F,Married,n",
    "Bob,31,M,Never-married,y",
    "Cid,27,M,Widowed,n",
    "Dee,35,F,Married,y",
    "Eve,19,F,Never-married,n",
    "Fay,38,F,Married,y",
]


def _spec(
    tmp: Path,
    name: str,
    hi: int = 100,
    values: tuple[str, ...] = MARITAL,
    marital: str = "sensitive",
    sens: str = '["Widowed"]',
) -> Path:
    (tmp / "sex.txt").write_text("ANY\n  F\n  M\n")
    vals = ", ".join(f'"{v}"' for v in values)
    privacy = "[privacy]\nL = 2\nK = 2\nC = 0.5\n"
    if marital == "sensitive":
        privacy += f"sensitive_values = {sens}\n"
    path = tmp / name
    path.write_text(
        privacy + '[[attribute]]\nname = "name"\nrole = "identifier"\n'
        f'[[attribute]]\nname = "age"\nrole = "qid"\ntype = "numeric"\ndomain = [17, {hi}]\n'
        "step = 1\n"
        '[[attribute]]\nname = "sex"\nrole = "qid"\ntype = "categorical"\ntaxonomy = "sex.txt"\n'
        f'[[attribute]]\nname = "marital"\nrole = "{marital}"\nvalues = [{vals}]\n'
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
    )
    return path


def _write(path: Path, rows: list[str]) -> None:
    """A new file (new inode and mtime): the daemon reads it again at the next Prepare."""
    tmp = path.with_suffix(".new")
    tmp.write_text(HEADER + "\n".join(rows) + "\n")
    os.replace(tmp, path)


def _conf(ds: list[Daemon], work: Path, spec: Path, leader: str = "leader") -> Path:
    certdir = work / "certs"
    ring = "".join(f'[[party]]\nname = "{d.name}"\naddress = "127.0.0.1:{d.port}"\n' for d in ds)
    conf = work / f"federation-{leader}-{spec.stem}.toml"
    conf.write_text(
        f'[run]\nspec = "{spec}"\noutput = "{work / "released.csv"}"\n'
        f'report = "{work / "report.json"}"\ndeadline_seconds = 60\n\n'
        f'[leader]\nname = "{leader}"\n\n'
        f'[tls]\nca = "{certdir / "ca.pem"}"\ncert = "{certdir / (leader + ".pem")}"\n'
        f'key = "{certdir / (leader + ".key")}"\n\n{ring}'
    )
    return conf


def _leader(conf: Path) -> tuple[int, str, str, bool, bool]:
    """Everything the leader shows or writes."""
    proc = subprocess.run(
        [sys.executable, "-m", "fedanon.cli", "leader", "run", "--config", str(conf)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    out = conf.parent / "released.csv"
    return (
        proc.returncode,
        proc.stdout,
        proc.stderr,
        out.exists(),
        (conf.parent / "report.json").exists(),
    )


def test_refusals_tell_the_leader_nothing_about_a_record(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    data = {n: tmp_path / f"{n}.csv" for n in NAMES}
    for n in NAMES:
        _write(data[n], FITS)
    with policy_daemons([(n, data[n]) for n in NAMES], work, dict.fromkeys(NAMES, POLICY)) as ds:
        a_log = work / "hospital-a.log"
        # control: the tables fit a wide spec, and the run releases
        ok = _leader(_conf(ds, work, _spec(tmp_path, "ok.toml")))
        assert ok[0] == 0 and ok[3], ok[2]
        (work / "released.csv").unlink()
        (work / "report.json").unlink()

        # probe 1: domain = [17, 40) -- is hospital-a's line-2 age below 40?  A later record
        # (age 75) never fits, so both tables are refused; only where differs.
        probe = _conf(ds, work, _spec(tmp_path, "probe-age.toml", hi=40))
        seen = []
        for age in ("39", "40"):
            _write(data["hospital-a"], [f"Gus,{age},M,Married,n", *FITS, "Hal,75,M,Married,y"])
            seen.append(_leader(probe))
        assert seen[0] == seen[1], seen
        code, out, err, released, report = seen[0]
        assert (code, out, released, report) == (2, "", False, False), seen[0]
        assert err == (
            "fedanon: error: party hospital-a rejected the run during prepare: hospital-a's "
            "data does not fit the spec (the hospital's own log says why)\n"
        ), err
        log = a_log.read_text()
        assert "line 2, column 'age'" in log and "line 9, column 'age'" in log  # kept locally

        # probe 2: values without Divorced -- which record is divorced?
        probe = _conf(ds, work, _spec(tmp_path, "probe-marital.toml", values=MARITAL[1:]))
        seen = []
        for where in (0, 3):  # line 2 or line 5
            rows = list(FITS)
            rows[where] = rows[where].replace("Married", "Divorced")
            _write(data["hospital-a"], rows)
            seen.append(_leader(probe))
        assert seen[0] == seen[1], seen
        assert seen[0][0] == 2 and "hospital-a's data does not fit the spec" in seen[0][2]
        for text in (a_log.read_text(), *(o for s in seen for o in s[1:3])):
            assert "Divorced" not in text and "Gus" not in text  # never a record value

        # item 2: the hospital's sensitive column moved to 'other', or C bound for a rare
        # value other than the hospital's own: refused naming the policy line
        other = _leader(_conf(ds, work, _spec(tmp_path, "other.toml", marital="other")))
        assert other[0] == 2 and other[3] is False
        assert (
            "refuses: sensitive_column = 'marital' but the spec declares it role = 'other'"
            in other[2]
        )
        rare = _leader(_conf(ds, work, _spec(tmp_path, "rare.toml", sens='["Never-married"]')))
        assert rare[0] == 2
        assert "lack 'Widowed' of this hospital's sensitive_values = ['Widowed']" in rare[2]

        # item 11: a leader certificate from the federation CA that no hospital authorizes
        certs.issue(work / "certs", "rogue", "leader")
        rogue = _leader(_conf(ds, work, _spec(tmp_path, "ok.toml"), leader="rogue"))
        assert rogue[0] == 2 and rogue[3] is False, rogue
        last = rogue[2].strip().splitlines()[-1]
        assert last.startswith("fedanon: error: authorization failed: hospital-"), last
        assert "does not authorize this leader (rogue may not call" in last
        assert "_InactiveRpcError" not in rogue[2] and "Traceback" not in rogue[2]
