"""Utility of a released table, measured as in the paper (Sec. 6.1).

* CE: error of a decision tree trained on 2/3 of the released records and tested on the other
  1/3; every generalized value is a categorical (one-hot) feature.
* BE: the same tree on the raw data (numeric QIDs as numbers, categorical ones one-hot).
* UE: the same on the raw data with every QID removed.
* DR = sum |T[qid]|^2 / |T|^2 over the groups of identical full-QID tuples of the released table.

Features are every column except the class and identifiers: the QIDs, the sensitive attribute
and any 'other' column (the paper's setting: everything but the class is available to the
analyst).  The same stratified train/test split of row positions is used for CE, BE and UE, so
the released table must list its records in input order (what `fedanon anonymize` writes).

scikit-learn's `DecisionTreeClassifier(criterion="entropy", random_state=0)` stands in for C4.5;
unpruned by default.  C4.5 prunes its trees; `ccp_alpha` > 0 gives a pruned variant
(cost-complexity pruning, sklearn's only post-pruning), which matters on the raw data: an
unpruned tree over-fits the fine-grained numeric QIDs (fnlwgt!) and its BE is pessimistic.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray
from fedanon.errors import DataError, InputError
from fedanon.io.table import read_csv_columns
from fedanon.model.attributes import NOT_RELEASED
from fedanon.model.spec import RunSpec

log = logging.getLogger(__name__)

Columns = Mapping[str, Sequence[str]]
SEED = 0


@dataclass(frozen=True)
class Metrics:
    records: int
    groups: int
    CE: float
    BE: float
    UE: float
    DR: float

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def discernibility_ratio(released: Columns, qids: Sequence[str]) -> tuple[float, int]:
    """DR and the number of equivalence groups (identical values on every QID)."""
    cols = [released[q] for q in qids]
    sizes = Counter(zip(*cols, strict=True))
    n = sum(sizes.values())
    if n == 0:
        return 0.0, 0
    sq = sum(float(s) * float(s) for s in sizes.values())
    return sq / (float(n) * float(n)), len(sizes)


def split_rows(labels: Sequence[str], seed: int = SEED) -> tuple[IntArray, IntArray]:
    """Stratified 2/3 train, 1/3 test split of row positions."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(labels), dtype=np.int64)
    y = np.asarray(labels)
    _, counts = np.unique(y, return_counts=True)
    strat = y if counts.min() >= 2 else None
    train, test = train_test_split(idx, test_size=1 / 3, random_state=seed, stratify=strat)
    return np.sort(train), np.sort(test)


def feature_matrix(
    data: Columns, categorical: Sequence[str], numeric: Sequence[str], n_rows: int
) -> Any:
    """Sparse matrix: numeric columns as floats, categorical ones one-hot (sorted values)."""
    from scipy import sparse

    blocks: list[Any] = []
    for name in numeric:
        try:
            vals = np.asarray([float(v) for v in data[name]], dtype=np.float64)
        except ValueError as exc:
            raise DataError(f"numeric column {name!r} has a non-number: {exc}") from exc
        blocks.append(sparse.csr_matrix(vals.reshape(-1, 1)))
    for name in categorical:
        _, inv = np.unique(np.asarray(data[name], dtype=str), return_inverse=True)
        inv = inv.reshape(-1)
        ones = np.ones(n_rows, dtype=np.float64)
        width = int(inv.max()) + 1 if n_rows else 0
        blocks.append(sparse.csr_matrix((ones, (np.arange(n_rows), inv)), shape=(n_rows, width)))
    if not blocks:  # no feature at all: a constant column, the tree predicts the majority
        return sparse.csr_matrix(np.zeros((n_rows, 1)))
    return sparse.hstack(blocks, format="csr")


def classification_error(
    x: Any, y: npt.NDArray[Any], train: IntArray, test: IntArray, ccp_alpha: float = 0.0
) -> float:
    """Error of an entropy decision tree; `ccp_alpha` > 0 prunes it (cost-complexity)."""
    from sklearn.tree import DecisionTreeClassifier

    clf = DecisionTreeClassifier(criterion="entropy", random_state=SEED, ccp_alpha=ccp_alpha)
    clf.fit(x[train], y[train])
    pred = clf.predict(x[test])
    return float(np.mean(pred != y[test]))


@dataclass(frozen=True)
class Baseline:
    """What does not depend on the anonymization: labels, split, BE and UE."""

    labels: npt.NDArray[Any]
    train: IntArray
    test: IntArray
    BE: float
    UE: float
    ccp_alpha: float = 0.0


def _feature_names(spec: RunSpec) -> tuple[list[str], list[str], list[str]]:
    """(numeric QIDs, categorical QIDs, non-QID features)."""
    num = [a.name for a in spec.qids if a.type == "numeric"]
    cat = [a.name for a in spec.qids if a.type != "numeric"]
    rest = [a.name for a in spec.attributes if a.role in ("sensitive", "other")]
    return num, cat, rest


def baseline(
    spec: RunSpec, original: Columns, seed: int = SEED, ccp_alpha: float = 0.0
) -> Baseline:
    if spec.class_attr is None:
        raise InputError("CE/BE/UE need an attribute with role = 'class'", file=spec.source)
    labels = np.asarray(original[spec.class_attr.name], dtype=str)
    n = len(labels)
    train, test = split_rows(labels.tolist(), seed)
    num, cat, rest = _feature_names(spec)
    x_be = feature_matrix(original, cat + rest, num, n)
    be = classification_error(x_be, labels, train, test, ccp_alpha)
    ue = classification_error(feature_matrix(original, rest, [], n), labels, train, test, ccp_alpha)
    log.debug("baseline: BE=%.4f UE=%.4f on %d rows", be, ue, n)
    return Baseline(labels, train, test, be, ue, ccp_alpha)


def evaluate_tables(
    spec: RunSpec, original: Columns, released: Columns, base: Baseline | None = None
) -> Metrics:
    """Metrics of `released` (rows in the order of `original`)."""
    base = base if base is not None else baseline(spec, original)
    assert spec.class_attr is not None
    n = len(base.labels)
    cls = spec.class_attr.name
    if len(released[cls]) != n:
        raise InputError(
            f"released table has {len(released[cls])} records, the original {n}",
            expected="the released table of this original, rows in input order",
        )
    if not np.array_equal(np.asarray(released[cls], dtype=str), base.labels):
        raise InputError(
            "class column differs between the original and released tables",
            column=cls,
            expected="rows in input order (as `fedanon anonymize` writes them)",
        )
    num, cat, rest = _feature_names(spec)
    x = feature_matrix(released, num + cat + rest, [], n)
    ce = classification_error(x, base.labels, base.train, base.test, base.ccp_alpha)
    dr, groups = discernibility_ratio(released, [a.name for a in spec.qids])
    return Metrics(n, groups, ce, base.BE, base.UE, dr)


def _read(path: Path, needed: Sequence[str]) -> dict[str, list[str]]:
    header, cols = read_csv_columns(path)
    data = {h: [v.strip() for v in c] for h, c in zip(header, cols, strict=True)}
    missing = [c for c in needed if c not in data]
    if missing:
        raise DataError("column missing", file=str(path), column=missing[0])
    return data


def evaluate_files(
    spec: RunSpec, original_path: Path, released_path: Path, ccp_alpha: float = 0.0
) -> Metrics:
    needed = [a.name for a in spec.attributes if a.role not in NOT_RELEASED]
    original = _read(original_path, needed)
    released = _read(released_path, needed)
    return evaluate_tables(spec, original, released, baseline(spec, original, ccp_alpha=ccp_alpha))


def metrics_text(m: Metrics) -> str:
    rows = [
        ("records", f"{m.records}"),
        ("equivalence groups", f"{m.groups}"),
        ("CE  classification error (released)", f"{100 * m.CE:6.2f} %"),
        ("BE  baseline error (raw data)", f"{100 * m.BE:6.2f} %"),
        ("UE  upper-bound error (QIDs removed)", f"{100 * m.UE:6.2f} %"),
        ("CE - BE  cost of anonymization", f"{100 * (m.CE - m.BE):+6.2f} %"),
        ("UE - CE  benefit over removing QIDs", f"{100 * (m.UE - m.CE):+6.2f} %"),
        ("DR  discernibility ratio", f"{m.DR:8.4f}"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
