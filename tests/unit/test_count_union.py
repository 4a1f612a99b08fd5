"""The secure-sum union reproduces the released table exactly (as a multiset)."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import numpy as np
from engine_helpers import anonymize

from fedanon.model.spec import load_spec
from fedanon.union.count_union import count_domain, expand, local_counts


def test_counts_summed_over_parties_expand_to_the_released_table(
    adult_dir: Path, adult_csv: Path, tmp_path: Path
) -> None:
    header, *rows = list(csv.reader(adult_csv.open()))
    parts = []
    for i in range(3):
        p = tmp_path / f"p{i}.csv"
        with p.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows[i:6000:3])
        parts.append(p)
    spec_path = adult_dir / "run.toml"
    out = tmp_path / "released.csv"
    result, parties = anonymize(spec_path, adult_csv, out, parties=parts)
    spec, _ = load_spec(spec_path)
    state = result.decider.state
    domain = count_domain(spec, state)
    assert domain is not None
    total = np.zeros(domain.size, dtype=np.int64)
    for lp in parties:
        replica = count_domain(spec, lp.state)
        assert replica is not None and replica.digest == domain.digest
        total += local_counts(domain, lp.state, lp.tips, lp.table)
    cols = expand(domain, spec, state, total)
    names = list(cols)
    got = Counter(zip(*(cols[n] for n in names), strict=True))
    with out.open() as fh:
        released = list(csv.DictReader(fh))
    want = Counter(tuple(r[n] for n in names) for r in released)
    assert got == want and sum(got.values()) == 6000


def test_free_text_column_falls_back_to_mixnet(table1_dir: Path, tmp_path: Path) -> None:
    result, _ = anonymize(table1_dir / "run.toml", table1_dir / "table1.csv", tmp_path / "o.csv")
    spec, _ = load_spec(table1_dir / "run.toml")
    assert count_domain(spec, result.decider.state) is None  # Surgery has no declared values
