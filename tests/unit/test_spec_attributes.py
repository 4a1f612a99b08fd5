"""One attribute model for every spec (issue 18 item 2): roles identifier | qid | class |
sensitive | other, types numeric | categorical | set; a set-valued QID is role = "qid",
type = "set"; the old role = "set" still reads, with a warning naming the new spelling; one
BOM-safe sniffer."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from fedanon.errors import SpecError
from fedanon.kkm.spec import is_kkm_spec, load_kkm_spec, parse_kkm_spec
from fedanon.model.peek import spec_model, text_model
from fedanon.model.spec import parse_spec

HERE = Path(__file__).resolve().parent
FIG1 = HERE / "kkm_fig1"
TABLE1 = HERE.parents[1] / "examples" / "table1"
OLD = 'role = "set"'
NEW = 'role = "qid"\ntype = "set"'


def test_new_spelling_reads_as_the_old_one_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = (FIG1 / "run.toml").read_text()
    assert OLD in text
    with caplog.at_level(logging.WARNING):
        new = parse_kkm_spec(text.replace(OLD, NEW), "new.toml")
    assert not caplog.records
    with caplog.at_level(logging.WARNING):
        old = parse_kkm_spec(text, "old.toml")
    assert new.attributes == old.attributes and new.set_attr == old.set_attr
    assert new.set_attr.role == "qid" and new.set_attr.type == "set"
    assert [a.name for a in new.qids] == [a.name for a in old.qids]
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert 'role = "set" is deprecated' in warned
    assert 'role = "qid" with type = "set"' in warned and "old.toml" in warned


def test_an_unknown_type_names_the_valid_ones() -> None:
    kkm = (FIG1 / "run.toml").read_text().replace('type = "numeric"', 'type = "sett"', 1)
    with pytest.raises(SpecError) as exc:
        parse_kkm_spec(kkm, "k.toml")
    assert "numeric | categorical | set" in str(exc.value)
    lkc = (TABLE1 / "run.toml").read_text().replace('type = "categorical"', 'type = "sett"', 1)
    with pytest.raises(SpecError) as exc:
        parse_spec(lkc, "l.toml")
    assert "numeric | categorical | set" in str(exc.value)


def test_a_set_valued_qid_is_refused_by_the_lkc_engine_naming_why() -> None:
    text = (TABLE1 / "run.toml").read_text()
    text += '\n[[attribute]]\nname = "codes"\nrole = "qid"\ntype = "set"\nseparator = "|"\n'
    with pytest.raises(SpecError) as exc:
        parse_spec(text, "l.toml")
    msg = str(exc.value)
    assert "set-valued qid" in msg and "l.toml" in msg and "(k, k^m)" in msg
    assert "model = 'dp'" in msg  # DiffGen reads set-valued QIDs too (dp-diagnosis-codes.md)


def test_role_set_with_another_type_is_refused() -> None:
    text = (FIG1 / "run.toml").read_text().replace(OLD, OLD + '\ntype = "categorical"')
    with pytest.raises(SpecError, match='role = "set" takes no other type'):
        parse_kkm_spec(text, "k.toml")


def test_the_one_sniffer_skips_a_bom(tmp_path: Path) -> None:
    for f in FIG1.iterdir():
        shutil.copy(f, tmp_path / f.name)
    spec = tmp_path / "run.toml"
    text = (FIG1 / "run.toml").read_text()
    spec.write_text("\ufeff" + text, encoding="utf-8")
    assert spec.read_bytes().startswith(b"\xef\xbb\xbf")
    assert spec_model(spec) == "kkm" and is_kkm_spec(spec)
    assert text_model("\ufeff" + text) == "kkm"
    assert parse_kkm_spec("\ufeff" + text, "bom.toml").privacy.k == 2
    loaded, _ = load_kkm_spec(spec)
    assert loaded.privacy.m == 2
