"""`fedanon evaluate` of a DiffGen release: a table that is not row-aligned with the original.

The released table (the noisy count table with its ``count`` column, or its ``--expand``ed
form, one row per counted record) is read back with the spec's taxonomies: the distinct
values of each predictor column are the released cut (checked: every value known, the cut
values cover every raw value exactly once).  A classifier is trained on the release, one row
per group x class value weighted by its count, and tested on a separate test CSV whose
records are generalized through that cut: CA.  BA is the same classifier trained on the raw
training CSV (numbers as numbers, the rest one-hot), LA the majority class of the training
CSV; both are measured on the same test records.  ``classifier = "j48"``: C4.5 (Weka's J48,
``fedanon.evaluation.j48``) for CA and BA instead of sklearn's entropy tree.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray
from fedanon.dp.evaluate import j48_on_codes, make_classifier, one_hot
from fedanon.dp.release import COUNT
from fedanon.dp.spec import DPSpec
from fedanon.errors import DataError, InputError
from fedanon.evaluation.evaluate import feature_matrix
from fedanon.evaluation.j48 import CLASSIFIERS, j48_predict, nominal_codes, raw_table, require_j48
from fedanon.io.table import Schema, build_schema, encode_table, read_csv_columns
from fedanon.model.tree import AttrTree

_NUM = r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_INTERVAL = re.compile(rf"^\[({_NUM})-({_NUM})\)$")


@dataclass(frozen=True)
class ReleaseMetrics:
    released_rows: int
    released_records: int  # sum of the counts (rows of the expanded table)
    test_records: int
    CA: float
    BA: float
    LA: float

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _read_release(path: Path, needed: list[str]) -> tuple[dict[str, npt.NDArray[Any]], bool]:
    """Columns of a released CSV (leading ``#`` comment lines skipped), and whether it has
    a count column."""
    import pandas as pd

    with path.open(encoding="utf-8") as fh:
        skip = 0
        for line in fh:
            if not line.startswith("#"):
                break
            skip += 1
    try:
        df = pd.read_csv(path, skiprows=skip, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read the released table: {exc}", file=str(path)) from exc
    cols = {str(c).strip(): df[c].str.strip().to_numpy(dtype=object) for c in df.columns}
    for name in needed:
        if name not in cols:
            raise DataError("column missing from the released table", file=str(path), column=name)
    return cols, COUNT in cols


def _node_bins(tree: AttrTree, label: str, path: Path) -> tuple[int, int]:
    """Leaf range [lo, hi) of a released value of ``tree``."""
    if not tree.dynamic:
        try:
            node = tree.labels.index(label)
        except ValueError:
            raise DataError(
                "value is not in the taxonomy",
                file=str(path),
                column=tree.name,
                value=label,
                expected="a value of the spec's taxonomy for this attribute",
            ) from None
        return tree.leaf_lo[node], tree.leaf_hi[node]
    m = _INTERVAL.match(label)
    if m is None:
        raise DataError(
            "not an interval", file=str(path), column=tree.name, value=label, expected="[lo-hi)"
        )
    lo_x, hi_x = float(m.group(1)), float(m.group(2))
    d0, d1 = tree.domain
    lo = round((lo_x - d0) / tree.step)
    hi = tree.n_leaves if hi_x >= d1 else round((hi_x - d0) / tree.step)
    if not (0 <= lo < hi <= tree.n_leaves) or abs(d0 + lo * tree.step - lo_x) > 1e-6 * tree.step:
        raise DataError(
            "interval outside the spec's domain or off its step grid",
            file=str(path),
            column=tree.name,
            value=label,
            expected=f"[lo-hi) within [{d0:g}, {d1:g}) on steps of {tree.step:g}",
        )
    return lo, hi


def released_cut(tree: AttrTree, values: npt.NDArray[Any], path: Path) -> tuple[IntArray, IntArray]:
    """(cut position of every released row's value, cut position of every leaf)."""
    labels, inverse = np.unique(values.astype(str), return_inverse=True)
    leaf = np.full(tree.n_leaves, -1, dtype=np.int64)
    ranges = [_node_bins(tree, str(lab), path) for lab in labels]
    for i in sorted(range(len(labels)), key=lambda k: ranges[k]):
        lo, hi = ranges[i]
        if np.any(leaf[lo:hi] >= 0):
            raise DataError(
                "released values overlap: not a cut of the taxonomy",
                file=str(path),
                column=tree.name,
                value=str(labels[i]),
            )
        leaf[lo:hi] = i
    if np.any(leaf < 0):
        raise DataError(
            "released values do not cover every value: not a cut of the taxonomy",
            file=str(path),
            column=tree.name,
        )
    return inverse.reshape(-1).astype(np.int64), leaf


def _class_codes(spec: DPSpec, values: npt.NDArray[Any], path: Path) -> IntArray:
    index = {v: i for i, v in enumerate(spec.class_values)}
    bad = [v for v in np.unique(values.astype(str)) if v not in index]
    if bad:
        raise DataError(
            "unknown class value",
            file=str(path),
            column=spec.class_name,
            value=str(bad[0]),
            expected=" | ".join(spec.class_values),
        )
    return np.asarray([index[v] for v in values], dtype=np.int64)


def _counts(values: npt.NDArray[Any], path: Path) -> npt.NDArray[np.float64]:
    try:
        counts = values.astype(np.int64)
    except ValueError:
        raise DataError(
            "count is not an integer", file=str(path), column=COUNT, expected="integers >= 0"
        ) from None
    if np.any(counts < 0):
        raise DataError("negative count", file=str(path), column=COUNT, expected="integers >= 0")
    return counts.astype(np.float64)


def _raw_baselines(
    spec: DPSpec, train: Path, test: Path, classifier: str = "tree"
) -> tuple[float, float]:
    """(BA, LA) on the raw training and test CSVs."""
    names = [a.name for a in spec.predictors] + [spec.class_name]
    tables = []
    for path in (train, test):
        header, cols = read_csv_columns(path)
        data = {h: [v.strip() for v in c] for h, c in zip(header, cols, strict=True)}
        for name in names:
            if name not in data:
                raise DataError("column missing", file=str(path), column=name)
        tables.append(data)
    n_train = len(tables[0][spec.class_name])
    both = {k: tables[0][k] + tables[1][k] for k in names}
    n = len(both[spec.class_name])
    num = [a.name for a in spec.predictors if a.type == "numeric"]
    cat = [a.name for a in spec.predictors if a.type != "numeric"]
    y = np.asarray(both[spec.class_name], dtype=str)
    if classifier == "j48":
        attrs, raw = raw_table(both, cat, num)
        class_values, yc = nominal_codes(both[spec.class_name])
        pred = j48_predict(
            attrs,
            [c[:n_train] for c in raw],
            yc[:n_train],
            [c[n_train:] for c in raw],
            len(class_values),
        )
        ba = float(np.mean(pred == yc[n_train:]))
    else:
        x = feature_matrix(both, cat, num, n)
        clf = make_classifier().fit(x[:n_train], y[:n_train])
        ba = float(np.mean(clf.predict(x[n_train:]) == y[n_train:]))
    labels, counts = np.unique(y[:n_train], return_counts=True)
    la = float(np.mean(y[n_train:] == labels[int(np.argmax(counts))]))
    return ba, la


def evaluate_release(
    one: Any, released: Path, train: Path, test: Path, classifier: str = "tree"
) -> ReleaseMetrics:
    """``one``: the parsed :class:`fedanon.Spec` of the release (DiffGen's view)."""
    if classifier not in CLASSIFIERS:
        raise InputError("unknown classifier", value=classifier, expected=" | ".join(CLASSIFIERS))
    if classifier == "j48":
        require_j48()
    spec, reader = DPSpec.of(one.view), one.taxonomy_reader()
    schema: Schema = build_schema(spec.run, reader)
    trees = schema.new_trees()
    cols, has_count = _read_release(released, [t.name for t in trees] + [spec.class_name])
    n_rows = len(cols[spec.class_name])
    test_table = encode_table(schema, test)
    codes = np.empty((n_rows, len(trees)), dtype=np.int64)
    test_codes = np.empty((test_table.n_rows, len(trees)), dtype=np.int64)
    widths = []
    for a, tree in enumerate(trees):
        row_pos, leaf_pos = released_cut(tree, cols[tree.name], released)
        codes[:, a] = row_pos
        test_codes[:, a] = leaf_pos[test_table.qid_leaves[a]]
        widths.append(int(leaf_pos.max()) + 1)
    y = _class_codes(spec, cols[spec.class_name], released)
    w = _counts(cols[COUNT], released) if has_count else np.ones(n_rows, dtype=np.float64)
    keep = np.flatnonzero(w > 0)
    test_cls = test_table.cls.astype(np.int64)
    if keep.size == 0:
        raise InputError("the released table counts no record", file=str(released))
    if classifier == "j48":
        names = [t.name for t in trees]
        n_class = len(spec.class_values)
        pred = j48_on_codes(names, widths, codes[keep], y[keep], w[keep], test_codes, n_class)
    else:
        clf = make_classifier()
        clf.fit(one_hot(codes[keep], widths), y[keep], sample_weight=w[keep])
        pred = clf.predict(one_hot(test_codes, widths))
    ca = float(np.mean(pred == test_cls))
    ba, la = _raw_baselines(spec, train, test, classifier)
    return ReleaseMetrics(n_rows, int(w.sum()), int(test_table.n_rows), ca, ba, la)


def release_metrics_text(m: ReleaseMetrics) -> str:
    rows = [
        ("released rows", f"{m.released_rows}"),
        ("records counted in the release", f"{m.released_records}"),
        ("test records", f"{m.test_records}"),
        ("CA  accuracy, trained on the release", f"{100 * m.CA:6.2f} %"),
        ("BA  accuracy, trained on the raw data", f"{100 * m.BA:6.2f} %"),
        ("LA  majority class of the raw data", f"{100 * m.LA:6.2f} %"),
    ]
    return "\n".join(f"{k:<40} {v}" for k, v in rows)
