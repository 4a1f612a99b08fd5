"""What a kkm spec plus the files it names define, before any record is read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fedanon.kkm.constraints import Constraints, no_constraints, parse_constraints
from fedanon.kkm.hierarchy import Tree, load_tree
from fedanon.kkm.spec import KkmSpec


@dataclass(frozen=True)
class KkmSchema:
    spec: KkmSpec
    trees: dict[str, Tree]  # categorical qids by name
    items: Tree  # the code hierarchy of the set attribute
    constraints: Constraints


def build_kkm_schema(spec: KkmSpec, reader: Callable[[str], bytes]) -> KkmSchema:
    trees: dict[str, Tree] = {}
    for a in spec.qids:
        if a.type == "categorical":
            assert a.taxonomy is not None
            trees[a.name] = load_tree(a.taxonomy, reader)
    assert spec.set_attr.taxonomy is not None
    items = load_tree(spec.set_attr.taxonomy, reader)
    ref = spec.privacy.constraints
    if ref is None:
        cons = no_constraints(spec.qids, items.n_leaves)
    else:
        cons = parse_constraints(reader(ref), ref, spec.qids, trees, spec.set_attr, items)
    return KkmSchema(spec, trees, items, cons)
