"""Classification accuracy of a DiffGen release, as in the seed's evaluation.

The training part of the data is sanitized; the classifier is trained on the released noisy
table and tested on the test records generalized through the released cut.  Training uses the
released table with one row per group x class value weighted by its noisy count: for a
decision tree this is the expanded table (one row per counted record) -- same weighted
impurities, same splits -- without materializing millions of rows when the noise is large.
Every generalized value is a one-hot feature, as in ``fedanon.evaluation.evaluate``.
``classifier = "j48"`` uses the seed's classifier instead, C4.5 (Weka's J48, its default
pruning, ``fedanon.evaluation.j48``): every generalized value a nominal attribute (as the
seed authors wrote the intervals for ``c45``), the noisy counts as instance weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.arrays import IntArray
from fedanon.dp.decider import DPDecider, NoisyCounts
from fedanon.model.tree import AttrTree


def make_classifier() -> Any:
    """The classifier of CA and BA: an entropy decision tree (CART standing in for C4.5),
    pre-pruned with ``min_impurity_decrease = PRUNED_ALPHA`` (the project's pruning)."""
    from sklearn.tree import DecisionTreeClassifier

    from fedanon.evaluation.experiments import PRUNED_ALPHA

    return DecisionTreeClassifier(
        criterion="entropy", random_state=0, min_impurity_decrease=PRUNED_ALPHA
    )


def _cut_positions(tree: AttrTree, in_cut: npt.NDArray[np.bool_]) -> tuple[IntArray, IntArray]:
    """(feature position of every node in the cut or -1, cut position of every leaf)."""
    nodes = sorted((int(x) for x in np.flatnonzero(in_cut)), key=tree.order_key)
    pos = np.full(len(tree), -1, dtype=np.int64)
    leaf = np.full(tree.n_leaves, -1, dtype=np.int64)
    for i, x in enumerate(nodes):
        pos[x] = i
        leaf[tree.leaf_lo[x] : tree.leaf_hi[x]] = i
    return pos, leaf


def one_hot(codes: IntArray, widths: list[int]) -> Any:
    """Sparse one-hot matrix of (rows, attributes) codes, attribute blocks side by side."""
    from scipy import sparse

    n, m = codes.shape
    offsets = np.concatenate(([0], np.cumsum(widths)[:-1])).astype(np.int64)
    cols = (codes + offsets[None, :]).reshape(-1)
    data = np.ones(n * m, dtype=np.float32)
    indptr = np.arange(0, n * m + 1, m, dtype=np.int64)
    return sparse.csr_matrix((data, cols, indptr), shape=(n, int(sum(widths))))


def training_codes(
    decider: DPDecider, counts: NoisyCounts
) -> tuple[IntArray, list[int], IntArray, npt.NDArray[np.float64]]:
    """Cut positions (rows, predictors), cut sizes, class codes and weights (noisy counts)
    of the non-zero released rows."""
    st = decider.state
    n_groups, n_class = counts.counts.shape
    codes = np.empty((n_groups, st.m), dtype=np.int64)
    widths = []
    for a, tree in enumerate(st.trees):
        pos, _ = _cut_positions(tree, st.in_cut[a])
        codes[:, a] = pos[counts.nodes[:, a]]
        widths.append(int(np.count_nonzero(st.in_cut[a])))
    flat = counts.counts.reshape(-1)
    keep = np.flatnonzero(flat > 0)
    group, cls = keep // n_class, keep % n_class
    return codes[group], widths, cls.astype(np.int64), flat[keep].astype(np.float64)


def training_set(
    decider: DPDecider, counts: NoisyCounts
) -> tuple[Any, IntArray, npt.NDArray[np.float64]]:
    """Features (one-hot), class codes and weights (noisy counts) of the non-zero released
    rows."""
    codes, widths, cls, w = training_codes(decider, counts)
    return one_hot(codes, widths), cls, w


def generalized_codes(decider: DPDecider, leaves: IntArray) -> tuple[IntArray, list[int]]:
    """Cut positions (rows, predictors) of records (``leaves``: (predictors, rows) leaf
    codes) generalized to the released cut, and the cut sizes."""
    st = decider.state
    codes = np.empty((leaves.shape[1], st.m), dtype=np.int64)
    widths = []
    for a, tree in enumerate(st.trees):
        _, leaf = _cut_positions(tree, st.in_cut[a])
        codes[:, a] = leaf[leaves[a]]
        widths.append(int(np.count_nonzero(st.in_cut[a])))
    return codes, widths


def generalize(decider: DPDecider, leaves: IntArray) -> Any:
    """One-hot features of records generalized to the released cut."""
    return one_hot(*generalized_codes(decider, leaves))


def j48_on_codes(
    names: list[str],
    widths: list[int],
    codes: IntArray,
    cls: IntArray,
    weights: npt.NDArray[np.float64],
    test_codes: IntArray,
    n_class: int,
    labels: list[tuple[str, ...]] | None = None,
) -> IntArray:
    """C4.5 (Weka J48) predictions: every predictor a nominal attribute over its cut
    (``labels`` per predictor, default v0, v1, ...), training rows weighted."""
    from fedanon.evaluation.j48 import Attribute, j48_predict

    if labels is None:
        labels = [tuple(f"v{i}" for i in range(w)) for w in widths]
    attrs = [Attribute(n, lab) for n, lab in zip(names, labels, strict=True)]
    train = [codes[:, a] for a in range(codes.shape[1])]
    test = [test_codes[:, a] for a in range(test_codes.shape[1])]
    return j48_predict(attrs, train, cls, test, n_class, weights)


def accuracy(
    decider: DPDecider,
    counts: NoisyCounts,
    test_leaves: IntArray,
    test_cls: IntArray,
    make_classifier: Any,
    classifier: str = "tree",
) -> float:
    """Accuracy on the generalized test records of a classifier trained on the release:
    ``classifier`` "tree" (``make_classifier()``, one-hot features) or "j48" (C4.5, Weka)."""
    codes, widths, y, w = training_codes(decider, counts)
    xt, _ = generalized_codes(decider, test_leaves)
    if y.size == 0:  # every noisy count is 0: nothing to learn from
        return float(np.mean(test_cls == 0))
    if classifier == "j48":
        names = [t.name for t in decider.state.trees]
        n_class = int(counts.counts.shape[1])
        pred = j48_on_codes(names, widths, codes, y, w, xt, n_class)
        return float(np.mean(pred == test_cls))
    clf = make_classifier()
    clf.fit(one_hot(codes, widths), y, sample_weight=w)
    return float(np.mean(clf.predict(one_hot(xt, widths)) == test_cls))
