"""Distributed == centralized through the sketch union (real daemons, real mTLS).

Specs whose released columns declare no values: Table I, Adult with the full table
released, random tables with hostile free text, and parties holding identical records.
Every report must say which union ran, its bytes and its seconds.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, Pool, random_table, read_rows, table1_spec

pytestmark = pytest.mark.slow

HOSTILE = [
    "",
    "a,b",
    'say "hi", then ""quit""',
    "two\nlines",
    "cr\r\nlf",
    "Zürich – ünïcødé ✓ 東京",
    " leading and trailing ",
    "x" * 1500,
    "\u00e9" * 700,  # 1400 bytes of UTF-8
]


def _check_union(rep: dict[str, Any], method: str) -> dict[str, Any]:
    union = rep["federation"]["union"]
    assert union["method"] == method, union
    assert union["seconds"] >= 0 and union["bytes"]["sent"] > 0 and union["bytes"]["received"] > 0
    assert rep["federation"]["bytes_by_step"]["union"] == union["bytes"]
    return dict(union)


@pytest.mark.parametrize("method", ["auto", "sketch", "mixnet"])
def test_table1(pool: Pool, tmp_path: Path, method: str) -> None:
    header, rows = read_rows(EXAMPLES / "table1" / "table1.csv")
    rep = pool.compare(table1_spec(tmp_path), header, rows, 3, seed=2, tmp=tmp_path, union=method)
    union = _check_union(rep, "sketch" if method == "auto" else method)
    if union["method"] == "sketch":
        assert union["sums"] == 1 + union["attempts"] and union["attempts"] >= 1


def adult_full_spec(tmp: Path) -> Path:
    """examples/adult/run-kanon.toml with the numeric columns released raw (the full table)."""
    text = (EXAMPLES / "adult" / "run-kanon.toml").read_text(encoding="utf-8")
    text = text.replace('role = "identifier"', 'role = "other"')
    text = text.replace('taxonomy = "taxonomies/', f'taxonomy = "{EXAMPLES / "adult"}/taxonomies/')
    path = tmp / "adult-full.toml"
    path.write_text(text, encoding="utf-8")
    return path


def adult_free_spec(tmp: Path) -> Path:
    """examples/adult/run.toml without declared marital-status values."""
    text = (EXAMPLES / "adult" / "run.toml").read_text(encoding="utf-8")
    start = text.index("values = [", text.index('name = "marital-status"'))
    end = text.index("]", start) + 1
    text = text[:start] + text[end:]
    text = text.replace('taxonomy = "taxonomies/', f'taxonomy = "{EXAMPLES / "adult"}/taxonomies/')
    path = tmp / "adult-free.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("which", "n_rows", "n_parties", "seed"),
    [("full", 4000, 3, 31), ("full", 2500, 5, 32), ("free", 3000, 4, 33)],
)
def test_adult(
    pool: Pool, tmp_path: Path, which: str, n_rows: int, n_parties: int, seed: int
) -> None:
    header, rows = read_rows(EXAMPLES / "adult" / "adult.csv.gz")
    rows = random.Random(seed).sample(rows, n_rows)
    spec = adult_full_spec(tmp_path) if which == "full" else adult_free_spec(tmp_path)
    rep = pool.compare(spec, header, rows, n_parties, seed, tmp_path)
    union = _check_union(rep, "sketch")
    # the union vector is a few times the records' bytes, not tens of times
    released = (tmp_path / "fed.csv").stat().st_size
    assert union["vector_bytes"] < 8 * released, (union, released)


@pytest.mark.parametrize("seed", [41, 42, 43])
def test_random_tables_with_free_text(pool: Pool, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    spec, header, rows = random_table(rng, rng.randint(200, 500), tmp_path)
    s = header.index("s")
    for r in rows:
        if r[s] != "hiv":  # the sensitive value keeps its share; the rest become free text
            r[s] = rng.choice(HOSTILE) if rng.random() < 0.8 else f"{rng.random():.6f}"
    rep = pool.compare(spec, header, rows, rng.randint(3, 5), seed, tmp_path)
    _check_union(rep, "sketch")
    released = (tmp_path / "fed.csv").read_text(encoding="utf-8")
    assert "x" * 1500 in released and "東京" in released


def test_many_parties_hold_identical_records(pool: Pool, tmp_path: Path) -> None:
    """Every party holds the same records (and some twice): one cell per distinct record,
    multiplicities add up."""
    rng = random.Random(51)
    spec, header, base = random_table(rng, 120, tmp_path)
    s = header.index("s")
    for r in base:
        if r[s] != "hiv":
            r[s] = rng.choice(HOSTILE)
    parts = [base + base[:10] for _ in range(5)]
    rows = [r for p in parts for r in p]
    rep = pool.compare(spec, header, rows, 5, 51, tmp_path, parts=parts)
    _check_union(rep, "sketch")
    assert rep["records"] == 5 * 130


@pytest.mark.parametrize("secure_sum", ["pairwise", "ring"])
def test_a_union_summed_in_parts(
    pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secure_sum: str
) -> None:
    """A large union is summed in parts (fedanon.union.parts), here made small: the daemons
    sketch every part they are asked for, the leader peels each while the next is summed,
    and the release is byte for byte the one-sketch release (the centralized one's rows)."""
    from fedanon.leader import union as lu
    from fedanon.union import parts

    monkeypatch.setattr(lu, "DISTINCT_PER_GROUP", 10**6)  # never the small first sketch
    header, rows = read_rows(EXAMPLES / "adult" / "adult.csv.gz")
    rows = random.Random(61).sample(rows, 4000)
    spec = adult_full_spec(tmp_path)
    releases = []
    for part_records in (700, 10**9):
        monkeypatch.setattr(parts, "PART_RECORDS", part_records)
        rep = pool.compare(spec, header, rows, 3, 61, tmp_path, secure_sum=secure_sum)
        union = _check_union(rep, "sketch")
        assert union["sums"] == 1 + union["attempts"] and union["attempts"] >= union["parts"]
        releases.append((union["parts"], (tmp_path / "fed.csv").read_bytes()))
    (split, one), (unsplit, whole) = releases
    assert split >= 4 and unsplit == 1
    assert one == whole
