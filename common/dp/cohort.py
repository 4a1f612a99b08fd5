"""A synthetic patient cohort for DiffGen over diagnosis codes (issue 21; the generating model
is written in docs/dp-diagnosis-codes.md, "Evaluation").

Per patient: sex (Male / Female, 1:1), age uniform in [18, 90), a number of ICD-9-CM codes
k ~ min(Poisson(2.5), 10) (k = 0: no codes), each code's top-level node drawn from
``PREVALENCE`` and the code uniform among that node's leaves (repeats merge).  The binary
outcome ``deceased`` is Y with probability sigmoid(z),

    z = -2.6 + 0.05 (age - 54) + 0.3 [male] + sum over distinct top-level nodes present of
        ``LOG_ODDS`` (+2.6 neoplasms 140-239, +1.6 circulatory 390-459, +1.0 respiratory
        460-519, +0.8 genitourinary 580-629, -0.8 injury 800-999),

so the outcome depends on the demographics *and* on which chapters the codes fall in.

``python -m fedanon.dp.cohort --rows N --seed S --out DIR`` writes ``DIR/cohort.csv``,
``DIR/cohort.toml`` (a DP spec: sex, age, diagnoses, deceased) and ``DIR/sex.txt``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from fedanon.model.builtins import builtin_taxonomy

# top-level ICD-9-CM nodes: relative prevalence of a code, log-odds added when present
PREVALENCE = {
    "001-139": 4, "140-239": 6, "240-279": 10, "280-289": 4, "290-319": 6, "320-389": 5,
    "390-459": 16, "460-519": 8, "520-579": 7, "580-629": 6, "630-679": 1, "680-709": 2,
    "710-739": 5, "740-759": 1, "760-779": 1, "780-799": 7, "800-999": 6, "V01-V91": 8,
    "E000-E999": 3,
}  # fmt: skip
LOG_ODDS = {"140-239": 2.6, "390-459": 1.6, "460-519": 1.0, "580-629": 0.8, "800-999": -0.8}
SPEC = """[privacy]
model = "dp"
epsilon = {epsilon}
specializations = {h}

[utility]
score = "max"

[[attribute]]
name = "sex"
role = "qid"
type = "categorical"
taxonomy = "sex.txt"

[[attribute]]
name = "age"
role = "qid"
type = "numeric"
domain = [18, 90]

[[attribute]]
name = "diagnoses"
role = "qid"
type = "set"
taxonomy = "builtin:icd9cm"
separator = "|"

[[attribute]]
name = "deceased"
role = "class"
values = ["N", "Y"]
"""


def generate(rows: int, seed: int) -> tuple[list[str], list[list[str]]]:
    """(header, rows as strings) of a cohort of ``rows`` patients."""
    tax = builtin_taxonomy("icd9cm")
    g = np.random.default_rng(seed)
    tops = list(tax.children[0])
    labels = [tax.labels[t] for t in tops]
    p = np.asarray([PREVALENCE.get(lab, 1) for lab in labels], dtype=np.float64)
    p /= p.sum()
    lo = np.asarray([tax.leaf_lo[t] for t in tops])
    hi = np.asarray([tax.leaf_hi[t] for t in tops])
    beta = np.asarray([LOG_ODDS.get(lab, 0.0) for lab in labels])
    male = g.random(rows) < 0.5
    age = g.integers(18, 90, rows)
    k = np.minimum(g.poisson(2.5, rows), 10)
    row = np.repeat(np.arange(rows), k)
    top = g.choice(len(tops), size=row.size, p=p)
    leaf = lo[top] + (g.random(row.size) * (hi[top] - lo[top])).astype(np.int64)
    present = np.zeros((rows, len(tops)), dtype=bool)
    present[row, top] = True
    z = -2.6 + 0.05 * (age - 54) + 0.3 * male + present.astype(np.float64) @ beta
    y = g.random(rows) < 1 / (1 + np.exp(-z))
    leaf_label = np.asarray(tax.labels, dtype=object)[tax.leaf_nodes]
    starts = np.r_[0, np.cumsum(k)]
    out = []
    for r in range(rows):
        codes = sorted(set(leaf_label[leaf[starts[r] : starts[r + 1]]].tolist()))
        out.append(
            ["Male" if male[r] else "Female", str(age[r]), "|".join(codes), "Y" if y[r] else "N"]
        )
    return ["sex", "age", "diagnoses", "deceased"], out


def write(out: Path, rows: int, seed: int, epsilon: float = 1.0, h: int = 10) -> Path:
    """Write the cohort, its spec and the sex taxonomy into ``out``; returns the CSV."""
    import csv
    from typing import IO, Any

    from fedanon.io.fsutil import Pending, atomic_write_all, output_error

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a denied or read-only location, a file in the way: exit 2
        raise output_error(out, exc) from exc
    header, data = generate(rows, seed)
    path = out / "cohort.csv"

    def table(fh: IO[Any]) -> None:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(data)

    # the three files or none (a full disk left half a cohort.csv and a traceback)
    atomic_write_all(
        [
            Pending(path, table),
            Pending(out / "cohort.toml", lambda fh: fh.write(SPEC.format(epsilon=epsilon, h=h))),
            Pending(out / "sex.txt", lambda fh: fh.write("Any\n  Male\n  Female\n")),
        ]
    )
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fedanon.dp.cohort", description=__doc__)
    ap.add_argument("--rows", type=int, default=30_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    print(write(args.out, args.rows, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
