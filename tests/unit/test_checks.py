"""The class-values check of a federated run: one function (fedanon.model.checks), made by the
leader before it contacts anyone and by each party on the proposed spec."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from fedanon.errors import SpecError
from fedanon.io.sources import parse_source
from fedanon.model.checks import check_class_values
from fedanon.model.spec import load_spec
from fedanon.party.config import PartyConfig
from fedanon.party.prepare import Proposal, prepare_run
from fedanon.party.run import Peer

RING = ("hospital-a", "hospital-b", "hospital-c")


def _table1_without_class_values(table1_dir: Path, tmp: Path) -> Path:
    for f in ("job.txt", "sex.txt", "age.txt"):
        shutil.copy(table1_dir / f, tmp / f)
    spec = tmp / "run.toml"
    text = (table1_dir / "run.toml").read_text()
    spec.write_text(re.sub(r'values = \["N", "Y"\].*\n', "", text))
    return spec


def test_declared_labels_or_no_class_pass(table1_dir: Path, tmp_path: Path) -> None:
    check_class_values(load_spec(table1_dir / "run.toml")[0])
    spec = tmp_path / "run.toml"
    text = (table1_dir / "run.toml").read_text().replace('role = "class"', 'role = "other"')
    text = text.replace('"infogain"', '"discernibility"')
    spec.write_text(text)
    for f in ("job.txt", "sex.txt", "age.txt"):
        shutil.copy(table1_dir / f, tmp_path / f)
    assert load_spec(spec)[0].class_attr is None
    check_class_values(load_spec(spec)[0])


def test_missing_labels_are_a_spec_error(table1_dir: Path, tmp_path: Path) -> None:
    spec = _table1_without_class_values(table1_dir, tmp_path)
    with pytest.raises(SpecError, match="'Transfuse' needs its labels") as err:
        check_class_values(load_spec(spec)[0])
    assert err.value.exit_code == 2 and str(spec) in str(err.value)


def test_a_party_refuses_the_proposal_before_reading_its_table(
    table1_dir: Path, tmp_path: Path
) -> None:
    spec = _table1_without_class_values(table1_dir, tmp_path)
    missing = tmp_path / "never-read.csv"
    cfg = PartyConfig(
        name="hospital-b",
        listen="127.0.0.1:0",
        data=parse_source(str(missing), None, None, tmp_path),
        ca=tmp_path / "ca.pem",
        cert=tmp_path / "b.pem",
        key=tmp_path / "b.key",
        spec=spec,  # pinned: no [policy] needed
        policy=None,
    )
    files = {f: (tmp_path / f).read_bytes() for f in ("job.txt", "sex.txt", "age.txt")}
    ring = tuple(Peer(n, f"{n}:1") for n in RING)
    proposal = Proposal(b"r" * 16, spec.read_text(), files, ring, 1)
    with pytest.raises(SpecError, match="'Transfuse' needs its labels"):
        prepare_run(cfg, proposal)
