"""The item taxonomy of a set-valued predictor, binary-decomposed (docs/dp-diagnosis-codes.md).

Every taxonomy node with more than two children gets a balanced binary tree of *group* nodes
between it and its children (children in taxonomy order, halved recursively), so that each
specialization of a set-valued value has at most two children and at most three
combinations ({L}, {R}, {L, R}) per partition.  A group is named by its first and last member
joined by ``..``.  The decomposition depends on the taxonomy alone.

Leaves keep the taxonomy's leaf order, so the reader's item codes
(:class:`fedanon.io.setvalued.SetColumnSpec` with the leaves as items) index them directly;
every node covers the contiguous leaf codes ``[leaf_lo, leaf_hi)``.
"""

from __future__ import annotations

import numpy as np

from fedanon.arrays import IntArray
from fedanon.errors import SpecError
from fedanon.io.setvalued import SetColumnSpec
from fedanon.model.taxonomy import Taxonomy

GROUP_JOIN = ".."


class SetTree:
    """Binary-decomposed item taxonomy; node ids in pre-order (root = 0)."""

    def __init__(self, name: str, tax: Taxonomy, separator: str = "|") -> None:
        self.name = name
        self.separator = separator
        self.source = tax.source
        self.labels: list[str] = []
        self.parent: list[int] = []
        self.real: list[bool] = []
        self.children: list[list[int]] = []
        lo: list[int] = []
        hi: list[int] = []
        t_lo, t_hi = tax.leaf_lo, tax.leaf_hi

        def add(label: str, parent: int, real: bool, span: tuple[int, int]) -> int:
            self.labels.append(label)
            self.parent.append(parent)
            self.real.append(real)
            self.children.append([])
            lo.append(span[0])
            hi.append(span[1])
            if parent >= 0:
                self.children[parent].append(len(self.labels) - 1)
            return len(self.labels) - 1

        def real_node(t: int, parent: int) -> None:
            me = add(tax.labels[t], parent, True, (int(t_lo[t]), int(t_hi[t])))
            members(list(tax.children[t]), me)

        def members(kids: list[int], parent: int) -> None:
            if len(kids) <= 2:
                for k in kids:
                    real_node(k, parent)
                return
            half = (len(kids) + 1) // 2
            for part in (kids[:half], kids[half:]):
                if len(part) == 1:
                    real_node(part[0], parent)
                    continue
                label = tax.labels[part[0]] + GROUP_JOIN + tax.labels[part[-1]]
                span = (int(t_lo[part[0]]), int(t_hi[part[-1]]))
                members(part, add(label, parent, False, span))

        real_node(0, -1)
        self.leaf_lo = np.asarray(lo, dtype=np.int64)
        self.leaf_hi = np.asarray(hi, dtype=np.int64)
        n = len(self.labels)
        self.n_leaves = tax.n_leaves
        self.nchild = np.asarray([len(c) for c in self.children], dtype=np.int64)
        depth = np.zeros(n, dtype=np.int64)
        for i in range(1, n):
            depth[i] = depth[self.parent[i]] + 1
        self.depth = depth
        anc = np.full((int(depth.max()) + 2, self.n_leaves), -1, dtype=np.int64)
        for i in range(n):
            anc[depth[i], lo[i] : hi[i]] = i
        self._anc = anc
        is_leaf = self.nchild == 0
        self.leaf_node = np.flatnonzero(is_leaf)  # leaf code -> node id (pre-order)
        self._check_labels()

    def _check_labels(self) -> None:
        seen: set[str] = set()
        for lab in self.labels:
            if lab in seen:
                raise SpecError(
                    f"{self.name}: a group of the binary decomposition has the label of a "
                    "taxonomy node",
                    file=self.source,
                    value=lab,
                    expected=f"taxonomy labels without {GROUP_JOIN!r}",
                )
            seen.add(lab)
            if self.separator in lab:
                raise SpecError(
                    f"{self.name}: a released value would contain the column's separator",
                    file=self.source,
                    value=lab,
                    expected=f"a separator that no taxonomy label contains (not "
                    f"{self.separator!r})",
                )

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def n_groups(self) -> int:
        return len(self.labels) - int(sum(self.real))

    def child_slot(self, node: int, leaves: IntArray) -> IntArray:
        """0 or 1: which child of ``node`` covers each leaf (all under ``node``)."""
        child = self._anc[self.depth[node] + 1, leaves]
        return np.asarray(child != self.children[node][0], dtype=np.int64)

    def n_combos(self, node: int) -> int:
        """Candidate combinations of a specialization of ``node``: 3 ({L}, {R}, {L, R}) or 1."""
        return 3 if len(self.children[node]) == 2 else 1

    def combo_children(self, node: int, combo: int) -> tuple[int, ...]:
        """The children in combination ``combo`` (0: {L}, 1: {R}, 2: {L, R})."""
        kids = self.children[node]
        if len(kids) == 1:
            return (kids[0],)
        return ((kids[0],), (kids[1],), (kids[0], kids[1]))[combo]

    def order_key(self, node: int) -> tuple[int, int]:
        return int(self.leaf_lo[node]), int(self.depth[node])

    def cell(self, nodes: frozenset[int]) -> str:
        """A partition's released set value: its cut nodes joined by the separator."""
        return self.separator.join(self.labels[x] for x in sorted(nodes, key=self.order_key))

    def column_spec(self, separator: str | None = None) -> SetColumnSpec:
        """The reader's descriptor: the leaves (in leaf order) are the items."""
        leaves = tuple(self.labels[int(x)] for x in self.leaf_node)
        inner = frozenset(self.labels[i] for i in range(len(self)) if self.real[i]) - set(leaves)
        return SetColumnSpec(
            self.name,
            leaves,
            separator or self.separator,
            source=self.source,
            non_items=inner,
            noun="code",
        )
