"""Helpers of the DP tests: a small synthetic case, in-process federations (plain and with
ring masks mod 2^64), and an independent generalizer that recomputes true group counts from
the raw rows and the released cut (it does not use fedanon's trees or TIPS)."""

from __future__ import annotations

import csv
import functools
import itertools
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fedanon.dp.randomness import RandomSource
from fedanon.dp.run import DPRun, anonymize_tables
from fedanon.dp.spec import DPSpec, load_dp_spec
from fedanon.evaluation.experiments import subset
from fedanon.io.table import EncodedTable, Schema, build_schema, encode_table
from fedanon.security.securesum import add_share, draw_mask, unmask
from fedanon.tds.engine import LocalFederation
from fedanon.tds.state import Phase

SMALL_TAXONOMY = """ANY_Job
  Blue
    Janitor
    Mover
    Carpenter
  White
    Lawyer
    Doctor
  Other
    Artist
    Dancer
"""
SMALL_SPEC = """[privacy]
model = "dp"
epsilon = {epsilon}
specializations = {h}

[utility]
score = "{score}"

[[attribute]]
name = "Id"
role = "identifier"

[[attribute]]
name = "Job"
role = "qid"
type = "categorical"
taxonomy = "job.txt"

[[attribute]]
name = "Age"
role = "qid"
type = "numeric"
domain = [0, 100]
step = 10

[[attribute]]
name = "Sex"
role = "qid"
type = "categorical"
taxonomy = "sex.txt"

[[attribute]]
name = "Note"
role = "other"

[[attribute]]
name = "Class"
role = "class"
values = ["N", "Y", "Z"]
"""


def small_case(
    tmp: Path,
    *,
    rows: int = 400,
    epsilon: str = "1.0",
    h: int = 3,
    score: str = "max",
    seed: int = 0,
) -> tuple[Path, Path]:
    """A spec and a CSV: Job has a whole branch (Other) and most ages hold no record."""
    (tmp / "job.txt").write_text(SMALL_TAXONOMY)
    (tmp / "sex.txt").write_text("ANY_Sex\n  F\n  M\n")
    spec = tmp / "dp.toml"
    spec.write_text(SMALL_SPEC.format(epsilon=epsilon, h=h, score=score))
    rng = random.Random(seed)
    data = tmp / "data.csv"
    with data.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Id", "Job", "Age", "Sex", "Note", "Class"])
        for i in range(rows):
            job = rng.choice(["Janitor", "Mover", "Carpenter", "Lawyer", "Doctor"])
            age = rng.choice([23, 27, 31, 45, 47])
            sex = rng.choice("FM")
            cls = "Y" if (job in ("Lawyer", "Doctor")) ^ (rng.random() < 0.1) else "N"
            w.writerow([i, job, age, sex, "secret", cls])
    return spec, data


def load(spec_path: Path, data: Path) -> tuple[DPSpec, Schema, EncodedTable]:
    spec, reader = load_dp_spec(spec_path)
    schema = build_schema(spec.run, reader)
    return spec, schema, encode_table(schema, data)


def split_table(table: EncodedTable, parties: int, seed: int = 0) -> list[EncodedTable]:
    """Rows dealt to ``parties`` parties at random (fixed seed), input order kept inside."""
    owner = np.random.default_rng(seed).integers(0, parties, size=table.n_rows)
    return [subset(table, np.flatnonzero(owner == p).astype(np.int64)) for p in range(parties)]


class RingFederation(LocalFederation):
    """The ring secure sum, in process: a fresh mask mod 2^64, every party adds its share,
    the leader removes the mask (what leader/ring.py does over gRPC)."""

    def sum(self, phase: Phase, round_: int, size: int, digest: bytes) -> np.ndarray:
        mask = draw_mask(size)
        masked = mask.copy()
        for p in self.parties:
            masked = add_share(masked, p.stats(phase, round_, size, digest))
        return unmask(masked, mask).astype(np.int64)


def run(spec: DPSpec, schema: Schema, tables: Sequence[EncodedTable], seed: int) -> DPRun:
    return anonymize_tables(spec, schema, tables, RandomSource(seed))


def read_release(path: Path) -> tuple[list[str], list[list[str]], list[str]]:
    """(header, rows, comment lines) of a released CSV, read with the csv module."""
    lines = path.read_text(encoding="utf-8").splitlines()
    comments = [x for x in lines if x.startswith("#")]
    body = [x for x in lines if not x.startswith("#")]
    rows = list(csv.reader(body))
    return rows[0], rows[1:], comments


def taxonomy_parents(text: str) -> dict[str, str | None]:
    """Parent of every label: native indented format, or ARX CSV (leaf;level1;...;root)."""
    parents: dict[str, str | None] = {}
    lines = [x for x in text.splitlines() if x.strip() and not x.lstrip().startswith("#")]
    if all(";" in x for x in lines):
        for line in lines:
            chain = [c.strip() for c in line.split(";")]
            for child, parent in itertools.pairwise(chain):
                parents[child] = parent
            parents.setdefault(chain[-1], None)
        return parents
    stack: list[tuple[int, str]] = []
    for line in lines:
        depth = (len(line) - len(line.lstrip(" "))) // 2
        label = line.strip()
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[label] = stack[-1][1] if stack else None
        stack.append((depth, label))
    return parents


def generalize_value(value: str, cut: Sequence[str], parents: dict[str, str | None] | None) -> str:
    """The cut value covering a raw value: an ancestor (or itself) in the taxonomy, or for
    numbers (``parents`` None) the cut interval '[lo-hi)' containing it."""
    if parents is None:
        x = float(value)
        for label in cut:
            lo, hi = label[1:-1].split("-")
            if float(lo) <= x < float(hi):
                return label
        raise AssertionError(f"{value} in no interval of {cut}")
    node: str | None = value
    while node is not None:
        if node in cut:
            return node
        node = parents[node]
    raise AssertionError(f"{value} has no ancestor in {cut}")


def true_counts(
    data: Path,
    predictors: Sequence[str],
    cls: str,
    cut: dict[str, list[str]],
    taxonomies: dict[str, str | None],
) -> Counter[tuple[str, ...]]:
    """Exact count of every (generalized predictors..., class) from the raw CSV (.gz ok)."""
    parents = {p: None if t is None else taxonomy_parents(t) for p, t in taxonomies.items()}
    header, columns = _raw_columns(data)
    generalized = []
    for p in predictors:
        col = columns[header.index(p)]
        label = {v: generalize_value(v.strip(), cut[p], parents[p]) for v in set(col)}
        generalized.append([label[v] for v in col])
    classes = [v.strip() for v in columns[header.index(cls)]]
    return Counter(zip(*generalized, classes, strict=True))


@functools.cache
def _raw_columns(data: Path) -> tuple[list[str], list[tuple[str, ...]]]:
    import gzip
    import io

    raw = gzip.decompress(data.read_bytes()) if data.suffix == ".gz" else data.read_bytes()
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8"))))
    body = [r for r in rows[1:] if r]
    return [h.strip() for h in rows[0]], list(zip(*body, strict=True))
