"""Several specializations in one round (README, "Several specializations in one round"):
the released table and the specialization sequence are those of one specialization per
round -- centralized, in-process federation, and the old sequence -- and the rule fires."""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

import numpy as np
import pytest
from checker import check_released
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fedanon.errors import PrivacyError
from fedanon.io.release import output_columns, write_table
from fedanon.io.table import build_schema, encode_table
from fedanon.model.spec import load_spec
from fedanon.tds.decide import Decider
from fedanon.tds.engine import LocalFederation, RunResult, run
from fedanon.tds.state import Phase
from fedanon.union.localparty import LocalParty

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ADULT = EXAMPLES / "adult"
SPECS = [
    (EXAMPLES / "table1" / "run.toml", EXAMPLES / "table1" / "table1.csv"),
    (ADULT / "run.toml", ADULT / "adult.csv.gz"),
    (ADULT / "run-kanon.toml", ADULT / "adult.csv.gz"),
    (ADULT / "run-discernibility.toml", ADULT / "adult.csv.gz"),
    (EXAMPLES.parent / "bench" / "specs" / "adult-kanon-l1.toml", ADULT / "adult.csv.gz"),
]


def _run(
    spec_path: Path, data: list[Path], out: Path, batch: bool
) -> tuple[RunResult, list[LocalParty]]:
    """In-process run over the tables ``data`` (one: centralized); the released table goes
    to ``out`` (parties' rows in order)."""
    spec, reader = load_spec(spec_path)
    schema = build_schema(spec, reader)
    tables = [encode_table(schema, p) for p in data]
    parties = [LocalParty(schema, t) for t in tables]
    dec = Decider(spec, schema.new_trees(), len(tables[0].class_labels), batch=batch)
    result = run(dec, LocalFederation(parties))
    dec.verify()
    cols = output_columns(spec, tables[0].columns)
    merged: dict[str, list[str]] = {c: [] for c in cols}
    for lp in parties:
        part = lp.released_columns()
        for c in cols:
            merged[c].extend(part[c])
    write_table(out, cols, merged)
    return result, parties


def _seq(result: RunResult) -> list[tuple[str, str, tuple[str, ...], float]]:
    return [(s.attribute, s.value, s.children, s.score) for s in result.specializations]


def _split(src: Path, root: Path, n: int) -> list[Path]:
    with src.open(newline="") if src.suffix != ".gz" else _gz(src) as fh:
        rows = list(csv.reader(fh))
    paths = [root / f"p{i}.csv" for i in range(n)]
    for i, p in enumerate(paths):
        with p.open("w", newline="") as fh:
            csv.writer(fh).writerows([rows[0], *rows[1 + i :: n]])
    return paths


def _gz(src: Path):  # type: ignore[no-untyped-def]
    import gzip

    return gzip.open(src, "rt", newline="")


def _rows(path: Path) -> list[tuple[str, ...]]:
    with path.open(newline="") as fh:
        return sorted(tuple(r) for r in csv.reader(fh))


@pytest.mark.parametrize(("spec", "data"), SPECS, ids=lambda p: p.stem)
def test_same_release_and_sequence_as_one_per_round(spec: Path, data: Path, tmp_path: Path) -> None:
    old, _ = _run(spec, [data], tmp_path / "old.csv", batch=False)
    new, _ = _run(spec, [data], tmp_path / "new.csv", batch=True)
    assert (tmp_path / "new.csv").read_bytes() == (tmp_path / "old.csv").read_bytes()
    assert _seq(new) == _seq(old)
    assert old.count_sums == len(old.specializations) + 1  # one per round, then the end
    # the rounds each specialization was decided in: non-decreasing, one sum per round
    rounds = [s.decided_in for s in new.specializations]
    assert rounds == sorted(rounds) and new.count_sums == (rounds[-1] + 2 if rounds else 1)
    fed, _ = _run(spec, _split(data, tmp_path, 3), tmp_path / "fed.csv", batch=True)
    assert _rows(tmp_path / "fed.csv") == _rows(tmp_path / "old.csv")
    assert _seq(fed) == _seq(old)
    assert [s.decided_in for s in fed.specializations] == rounds
    check = check_released(spec, tmp_path / "new.csv")
    assert check.ok, check.first_violation


@pytest.mark.parametrize("name", ["run-kanon", "adult-kanon-l1"])
def test_the_rule_fires(name: str, tmp_path: Path) -> None:
    spec = dict((p.stem, p) for p, _ in SPECS)[name]
    result, _ = _run(spec, [ADULT / "adult.csv.gz"], tmp_path / "r.csv", batch=True)
    assert result.count_sums - 1 < len(result.specializations)  # rounds < specializations
    rounds = [s.decided_in for s in result.specializations]
    assert len(set(rounds)) < len(rounds)


def test_off_for_other_scores() -> None:
    spec, reader = load_spec(ADULT / "run-discernibility.toml")
    schema = build_schema(spec, reader)
    assert not Decider(spec, schema.new_trees(), 2).batch
    spec, reader = load_spec(ADULT / "run-kanon.toml")
    assert Decider(spec, build_schema(spec, reader).new_trees(), 2).batch


def test_a_party_refuses_a_mismatched_segmented_vector(tmp_path: Path) -> None:
    """A COUNTS vector asked with the one-segment layout after a chained update is refused
    (leader and parties must agree on the segments)."""
    spec, reader = load_spec(ADULT / "run-kanon.toml")
    schema = build_schema(spec, reader)
    table = encode_table(schema, ADULT / "adult.csv.gz")
    lp = LocalParty(schema, table)
    dec = Decider(spec, schema.new_trees(), len(table.class_labels))
    chained = False
    while not chained:
        size, digest = dec.count_key()
        upds = dec.decide(lp.stats(Phase.COUNTS, dec.state.round, size, digest))
        assert not upds[-1].end
        for i, u in enumerate(upds):
            lp.apply(u)
            dec.apply(u)
            if i + 1 < len(upds):
                lp.keep_segment()
                dec.keep_segment()
                chained = True
    lay = lp.state.count_layout()
    assert lp.counts_key() == dec.count_key() != (lay.size, lay.digest)
    with pytest.raises(Exception, match="layout differs"):
        lp.stats(Phase.COUNTS, lp.state.round, lay.size, lay.digest)


def _taxonomy(prefix: str, shape: list[int]) -> tuple[str, list[str]]:
    lines, leaves = [f"ANY_{prefix}"], []
    for i, width in enumerate(shape):
        lines.append(f"  {prefix}{i}")
        if width:
            for j in range(width):
                lines.append(f"    {prefix}{i}_{j}")
                leaves.append(f"{prefix}{i}_{j}")
        else:
            leaves.append(f"{prefix}{i}")
    return "\n".join(lines) + "\n", leaves


@st.composite
def _tables(draw: st.DrawFn) -> tuple[str, list[list[str]]]:
    """A spec (as text, taxonomies included) and rows: several categorical QIDs with small
    taxonomies, maybe a numeric one, L, K, C varied; the class often nearly pure per value
    so that scores tie or vanish (the tie rule and zero bounds are exercised)."""
    n_cat = draw(st.integers(2, 4))
    taxes = [
        _taxonomy(f"q{c}", draw(st.lists(st.integers(0, 3), min_size=2, max_size=4)))
        for c in range(n_cat)
    ]
    numeric = draw(st.booleans())
    L = draw(st.integers(1, n_cat + int(numeric)))
    K = draw(st.integers(1, 5))
    C = draw(st.sampled_from([0.5, 0.8, 1.0]))
    fields = [st.sampled_from(leaves) for _, leaves in taxes]
    if numeric:
        fields.append(st.integers(0, 39).map(str))
    fields += [st.sampled_from("ny"), st.sampled_from(["u", "t", "s"])]
    pattern = st.tuples(st.tuples(*fields), st.integers(1, 4))
    body = [list(v) for v, t in draw(st.lists(pattern, min_size=3, max_size=40)) for _ in range(t)]
    attrs = []
    for c in range(n_cat):
        attrs.append(
            f'[[attribute]]\nname = "q{c}"\nrole = "qid"\ntype = "categorical"\n'
            f'taxonomy = "q{c}.txt"\n'
        )
    if numeric:
        attrs.append(
            '[[attribute]]\nname = "num"\nrole = "qid"\ntype = "numeric"\n'
            "domain = [0, 40]\nstep = 2\n"
        )
    attrs.append('[[attribute]]\nname = "cls"\nrole = "class"\nvalues = ["n", "y"]\n')
    attrs.append('[[attribute]]\nname = "sens"\nrole = "sensitive"\n')
    text = (
        f'[privacy]\nL = {L}\nK = {K}\nC = {C}\nsensitive_values = ["s"]\n'
        'allow_absent_sensitive = true\n[utility]\nscore = "infogain"\n' + "\n".join(attrs)
    )
    header = [*(f"q{c}" for c in range(n_cat)), *(["num"] if numeric else []), "cls", "sens"]
    files = "\n".join(f"#FILE q{c}.txt\n{t}" for c, (t, _) in enumerate(taxes))
    return text + "\n#FILES\n" + files, [header, *body]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_tables())
def test_random_tables_same_as_one_per_round(case: tuple[str, list[list[str]]]) -> None:
    text, rows = case
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        spec_text, _, files = text.partition("\n#FILES\n")
        for chunk in files.split("#FILE ")[1:]:
            name, _, body = chunk.partition("\n")
            (root / name).write_text(body)
        spec = root / "run.toml"
        spec.write_text(spec_text)
        data = root / "data.csv"
        with data.open("w", newline="") as fh:
            csv.writer(fh).writerows(rows)
        try:
            old, _ = _run(spec, [data], root / "old.csv", batch=False)
        except PrivacyError:
            return
        new, _ = _run(spec, [data], root / "new.csv", batch=True)
        assert (root / "new.csv").read_bytes() == (root / "old.csv").read_bytes()
        assert _seq(new) == _seq(old)
        fed, _ = _run(spec, _split(data, root, 3), root / "fed.csv", batch=True)
        assert _rows(root / "fed.csv") == _rows(root / "old.csv")
        assert _seq(fed) == _seq(old)
        check = check_released(spec, root / "new.csv")
        assert check.ok, check.first_violation
        assert new.count_sums <= old.count_sums
        event(f"several in one round: {new.count_sums < old.count_sums}")
        assert np.all(np.diff([s.decided_in for s in new.specializations]) >= 0)
