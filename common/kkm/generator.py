"""A synthetic RT-dataset: Adult's demographics plus ICD-9-CM diagnosis codes.

The seed evaluates ArtUC on 208,387 real electronic health records that cannot be shipped.
This generator builds a stand-in with the same shape, deterministically from ``--seed``:

* demographics: rows of the bundled UCI Adult data (``examples/adult/adult.csv.gz``) drawn with
  replacement: ``age``, ``sex``, ``race``, ``native-country``;
* codes: leaves of the bundled ICD-9-CM hierarchy (14,567 codes).  Popularity is Zipf-like:
  a chapter weight (1 / its position in ``CHAPTER_ORDER``, circulatory first) times a Zipf
  weight 1 / rank^1.1 over a seeded ranking of the chapter's codes, so a few hundred codes make
  most of the entries and most codes are rare, as in hospital data;
* 1-15 distinct codes per patient, more with age (mean ~2 at 20, ~9 at 90: a Poisson count
  whose mean grows linearly with age, clipped to 1..15);
* comorbidity: after a patient's first code, each further code comes with probability 0.7
  from the same ICD-9 chapter as the first (Zipf within the chapter), otherwise from all codes.

:func:`constraint_rows` writes utility constraint sets like the seed's Table 6: age bands of a
given width paired with the codes of each chapter, section or 3-digit category.
"""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray
from fedanon.bundled import EXAMPLES
from fedanon.errors import InputError
from fedanon.kkm.hierarchy import Tree, builtin

ADULT = EXAMPLES / "adult" / "adult.csv.gz"  # package data in a wheel (fedanon.bundled)
DEMOGRAPHICS = ("age", "sex", "race", "native-country")
SET_COLUMN = "diagnoses"
ZIPF = 1.1
MAX_CODES = 15
SAME_CHAPTER = 0.8
CHAPTER_ZIPF = 2.0
# chapters from most to least frequent (weight 1 / position): a rough shape, not real statistics
CHAPTER_ORDER = (
    "390-459",  # circulatory
    "240-279",  # endocrine, nutritional, metabolic
    "V01-V91",  # supplementary (health status, history)
    "780-799",  # symptoms, signs, ill-defined
    "460-519",  # respiratory
    "520-579",  # digestive
    "580-629",  # genitourinary
    "290-319",  # mental
    "710-739",  # musculoskeletal
    "800-999",  # injury and poisoning
    "280-289",  # blood
    "001-139",  # infectious and parasitic
    "320-389",  # nervous system and sense organs
    "140-239",  # neoplasms
    "E000-E999",  # external causes
    "680-709",  # skin
    "630-679",  # pregnancy
    "740-759",  # congenital
    "760-779",  # perinatal
)
LEVELS = {"chapter": 1, "section": 2, "3digit": 3}


@dataclass(frozen=True)
class RTData:
    header: tuple[str, ...]
    demographics: dict[str, list[str]]
    codes: list[list[str]]

    @property
    def n(self) -> int:
        return len(self.codes)


def _adult(path: Path) -> dict[str, list[str]]:
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(fh))
    except OSError as exc:
        raise InputError(
            f"cannot read the Adult data: {exc}",
            file=str(path),
            expected="the bundled examples/adult/adult.csv.gz (or --adult PATH)",
        ) from exc
    header = rows[0]
    missing = [c for c in DEMOGRAPHICS if c not in header]
    if missing:
        raise InputError("Adult data lacks a column", file=str(path), column=missing[0])
    idx = [header.index(c) for c in DEMOGRAPHICS]
    body = [r for r in rows[1:] if r]
    return {c: [r[i].strip() for r in body] for c, i in zip(DEMOGRAPHICS, idx, strict=True)}


def generate(n: int, seed: int, adult: Path = ADULT, tree: Tree | None = None) -> RTData:
    if n < 1:
        raise InputError("--n must be >= 1", value=str(n))
    tree = tree or builtin("icd9cm")
    rng = np.random.default_rng(seed)
    demo = _adult(adult)
    pick = rng.integers(0, len(demo["age"]), size=n)
    cols = {c: [v[i] for i in pick.tolist()] for c, v in demo.items()}
    ages = np.asarray([float(a) for a in cols["age"]])
    n_leaves = tree.n_leaves
    chapter, weight = _code_weights(tree, rng)
    glob = np.cumsum(weight / weight.sum())
    by_ch = np.argsort(chapter, kind="stable")  # codes grouped by chapter
    ch_sorted = chapter[by_ch]
    starts = np.searchsorted(ch_sorted, ch_sorted, side="left")
    ends = np.searchsorted(ch_sorted, ch_sorted, side="right")
    cum = np.cumsum(weight[by_ch])
    base = np.where(starts > 0, cum[np.maximum(starts - 1, 0)], 0.0)
    within = (cum - base) / (cum[ends - 1] - base)  # CDF inside each chapter, in by_ch order
    mean = 1.0 + (np.clip(ages, 17, 90) - 17.0) * (8.0 / 73.0)
    count = np.clip(rng.poisson(mean - 1.0) + 1, 1, MAX_CODES)
    draws = MAX_CODES + 5
    u = rng.random((n, draws))
    first = np.minimum(np.searchsorted(glob, u[:, 0]), n_leaves - 1)
    anywhere = np.minimum(np.searchsorted(glob, u), n_leaves - 1)
    ch = chapter[first]
    lo = np.searchsorted(ch_sorted, ch, side="left")
    hi = np.searchsorted(ch_sorted, ch, side="right")
    pos = np.empty((n, draws), dtype=np.int64)
    for j in range(draws):  # inverse CDF inside the first code's chapter
        pos[:, j] = _within(within, lo, hi, u[:, j])
    same = by_ch[pos]
    coin = rng.random((n, draws)) < SAME_CHAPTER
    codes = np.where(coin, same, anywhere)
    codes[:, 0] = first
    labels = [tree.leaf_label(c) for c in range(n_leaves)]
    out: list[list[str]] = []
    for i, row in enumerate(codes.tolist()):
        chosen = list(dict.fromkeys(row))[: int(count[i])]
        out.append([labels[c] for c in chosen])
    return RTData((*DEMOGRAPHICS, SET_COLUMN), cols, out)


def _code_weights(tree: Tree, rng: np.random.Generator) -> tuple[IntArray, npt.NDArray[np.float64]]:
    """Chapter of every code, and its popularity: the chapter's weight (1 / rank in
    ``CHAPTER_ORDER``) times a Zipf weight over a seeded ranking of the codes of the chapter."""
    chapter = tree.anc[:, 1].astype(np.int64)
    labels = [tree.label(int(c)) for c in chapter]
    ch_rank = np.asarray(
        [CHAPTER_ORDER.index(x) + 1 if x in CHAPTER_ORDER else len(CHAPTER_ORDER) for x in labels],
        dtype=np.float64,
    )
    order = np.lexsort((rng.random(chapter.size), chapter))
    rank_in = np.empty(chapter.size, dtype=np.float64)
    starts = np.searchsorted(chapter[order], chapter[order], side="left")
    rank_in[order] = np.arange(chapter.size) - starts + 1.0
    zipf = 1.0 / rank_in**ZIPF
    sums = np.bincount(chapter, weights=zipf)
    return chapter, (1.0 / ch_rank**CHAPTER_ZIPF) * zipf / sums[chapter]


def _within(
    cdf: npt.NDArray[np.float64], lo: IntArray, hi: IntArray, u: npt.NDArray[np.float64]
) -> IntArray:
    """Vectorized inverse CDF on the slices ``cdf[lo[i]:hi[i]]`` (each ends at 1)."""
    # binary search by hand: every row has its own slice
    left, right = lo.copy(), hi - 1
    while True:
        active = left < right
        if not active.any():
            return left
        mid = (left + right) // 2
        go_right = active & (cdf[mid] < u)
        left = np.where(go_right, mid + 1, left)
        right = np.where(active & ~go_right, mid, right)


def rt_columns(data: RTData, sep: str = "|") -> dict[str, list[str]]:
    """The table by column (header order): the demographics, then the codes joined by ``sep``."""
    cols = {c: [str(v) for v in data.demographics[c]] for c in DEMOGRAPHICS}
    cols[data.header[-1]] = [sep.join(codes) for codes in data.codes]
    return cols


def to_csv_text(data: RTData, sep: str = "|") -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(data.header)
    cols = [data.demographics[c] for c in DEMOGRAPHICS]
    for i in range(data.n):
        w.writerow([c[i] for c in cols] + [sep.join(data.codes[i])])
    return buf.getvalue()


def constraint_rows(
    level: str, age_width: int, tree: Tree | None = None, age_range: tuple[int, int] = (17, 90)
) -> list[tuple[tuple[int, int], list[str]]]:
    """A utility constraint set like the seed's Table 6: (age band, code node labels)."""
    if level not in LEVELS:
        raise InputError("unknown constraint level", value=level, expected=" | ".join(LEVELS))
    if age_width < 1:
        raise InputError("--age-width must be >= 1", value=str(age_width))
    tree = tree or builtin("icd9cm")
    depth = LEVELS[level]
    nodes = sorted({int(x) for x in tree.anc[:, depth]})
    labels = [tree.label(x) for x in nodes]
    lo, hi = age_range
    bands = [(a, min(a + age_width - 1, hi)) for a in range(lo, hi + 1, age_width)]
    count = max(len(bands), len(labels))
    return [(bands[i % len(bands)], [labels[i % len(labels)]]) for i in range(count)]


def constraints_toml(rows: list[tuple[tuple[int, int], list[str]]]) -> str:
    out = [
        "# Utility constraints (fedanon generate-rt): an age band and the codes that may be",
        "# generalized together; bands and code sets are paired as in the seed's Table 6.",
    ]
    for (a, b), labels in rows:
        codes = ", ".join(f'"{x}"' for x in labels)
        out += ["", "[[constraint]]", f"age = [{a}, {b}]", f"{SET_COLUMN} = [{codes}]"]
    return "\n".join(out) + "\n"
