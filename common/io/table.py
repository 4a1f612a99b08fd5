"""An input table (CSV, Parquet, PostgreSQL) -> integer-coded numpy columns, validated
against the run spec.

Every QID value becomes a leaf code of its tree; class values become class codes; the
sensitive column becomes 0 (not a sensitive value) or 1..|S| (position in sensitive_values).
Columns that are released unchanged stay dictionary-encoded.  Codes use the smallest integer
type that holds them; identifier columns are never read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.arrays import Codes
from fedanon.errors import DataError
from fedanon.io.columns import Column, smallest_uint
from fedanon.io.csvread import read_columns
from fedanon.io.encoders import KeptEncoder, LookupEncoder, NumericEncoder
from fedanon.io.progress import Progress, to_log
from fedanon.io.sources import Batches, DataSource, RowsRead, open_batches
from fedanon.model.spec import AttributeSpec, RunSpec
from fedanon.model.taxonomy import Taxonomy, interval_leaves, parse_taxonomy
from fedanon.model.tree import AttrTree

log = logging.getLogger(__name__)

__all__ = ["Column", "EncodedTable", "Schema", "build_schema", "encode_table", "read_columns"]


@dataclass(frozen=True)
class Schema:
    """What a spec plus its taxonomy files define, before any data is read."""

    spec: RunSpec
    taxonomies: dict[str, Taxonomy]  # by attribute name (categorical and static numeric)
    files: dict[str, str]  # taxonomy texts by relative path, for hashing / shipping
    class_labels: tuple[str, ...] | None

    def new_trees(self) -> list[AttrTree]:
        trees = []
        for a in self.spec.qids:
            if a.dynamic:
                assert a.domain is not None
                trees.append(AttrTree.numeric(a.name, a.domain, a.bin_step))
            else:
                trees.append(AttrTree.from_taxonomy(a.name, self.taxonomies[a.name]))
        return trees


def build_schema(spec: RunSpec, reader: Callable[[str], str]) -> Schema:
    taxes: dict[str, Taxonomy] = {}
    files: dict[str, str] = {}
    for a in spec.qids:
        if a.taxonomy is None:
            continue
        text = reader(a.taxonomy)
        files[a.taxonomy] = text
        tax = parse_taxonomy(text, a.taxonomy)
        if a.type == "numeric":
            lo, hi = interval_leaves(tax)
            assert a.domain is not None
            if lo.min() < a.domain[0] or hi.max() > a.domain[1]:
                raise DataError(
                    f"attribute {a.name!r}: taxonomy intervals leave the declared domain",
                    file=a.taxonomy,
                    expected=f"inside [{a.domain[0]}, {a.domain[1]})",
                )
        taxes[a.name] = tax
    labels = spec.class_attr.values if spec.class_attr is not None else None
    return Schema(spec, taxes, files, labels)


@dataclass(frozen=True)
class EncodedTable:
    """A party's table as codes in the smallest integer types: leaf codes (n_qids, n_rows),
    class and sensitive codes; columns released unchanged stay dictionary-encoded."""

    source: str
    columns: tuple[str, ...]
    qid_leaves: Codes  # shape (n_qids, n_rows): uint8 / uint16 / int32
    cls: Codes  # class code per row (0 when there is no class column)
    sens: Codes  # 0 (not a sensitive value) or 1..|S|
    kept: dict[str, Column]  # class, sensitive and 'other' columns, unchanged
    class_labels: tuple[str, ...]
    kept_codes: dict[str, Codes]  # kept columns with declared values: index into values

    @property
    def n_rows(self) -> int:
        return int(self.cls.shape[0])


def read_csv_columns(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and plain string columns (for tools that want lists)."""
    header, cols = read_columns(path)
    return header, [cols[h].strings().tolist() for h in header]


def encode_table(
    schema: Schema, source: DataSource, progress: RowsRead | None = None
) -> EncodedTable:
    """Read ``source`` (CSV, Parquet or PostgreSQL) batch by batch into codes; identifier
    columns are never read.  ``progress`` is told the number of records read after each
    batch."""
    spec = schema.spec
    include = [a.name for a in spec.attributes if a.role != "identifier"]
    b = open_batches(source, [a.name for a in spec.attributes], include)
    if progress is None:  # a daemon loading its table says how far it got, in its log
        progress = Progress(to_log(log, f"loading {b.source}")).rows
    try:
        return _encode(schema, b, progress)
    finally:
        b.close()


def _encode(schema: Schema, b: Batches, progress: RowsRead | None) -> EncodedTable:
    spec = schema.spec
    trees = schema.new_trees()
    leaf_dtype = smallest_uint(max(t.n_leaves for t in trees) - 1)
    qid_enc = [_qid_encoder(a, schema, trees[i], leaf_dtype) for i, a in enumerate(spec.qids)]
    kept_attrs = [a for a in spec.attributes if a.role in ("class", "sensitive", "other")]
    kept_enc = {a.name: KeptEncoder(a.name) for a in kept_attrs}
    declared = {
        a.name: LookupEncoder(
            a.name,
            {v: i for i, v in enumerate(a.values)},
            np.int32,
            f"one of the declared values {list(a.values)}",
        )
        for a in kept_attrs
        if a.values is not None
    }
    sens_enc = None
    if spec.sensitive_attr is not None:
        table = {v: i + 1 for i, v in enumerate(spec.privacy.sensitive_values)}
        sens_enc = LookupEncoder(spec.sensitive_attr.name, table, np.uint8, "", missing=0)
    leaves: list[list[Codes]] = [[] for _ in spec.qids]
    kept_codes: dict[str, list[Codes]] = {name: [] for name in declared}
    sens: list[Codes] = []
    n = 0
    for batch in b.batches:
        cols = batch.columns
        for i, a in enumerate(spec.qids):
            leaves[i].append(qid_enc[i].add(b, batch.start, cols[a.name]))
        for name, enc in declared.items():
            kept_codes[name].append(enc.add(b, batch.start, cols[name]))
        if sens_enc is not None and spec.sensitive_attr is not None:
            sens.append(sens_enc.add(b, batch.start, cols[spec.sensitive_attr.name]))
        for name, kenc in kept_enc.items():
            kenc.add(b, batch.start, cols[name])
        n += batch.rows
        if progress is not None:
            progress(n)
    qid_leaves = np.empty((len(spec.qids), n), dtype=leaf_dtype)
    for i, parts in enumerate(leaves):
        if parts:
            np.concatenate(parts, out=qid_leaves[i])
        parts.clear()  # each QID's batches are freed as soon as they are joined
    kept = {name: enc.finish() for name, enc in kept_enc.items()}
    kcodes = {name: _join(parts, np.int32) for name, parts in kept_codes.items()}
    class_labels: tuple[str, ...] = ("",)
    cls: Codes = np.zeros(n, dtype=np.uint8)
    if spec.class_attr is not None:
        name = spec.class_attr.name
        if schema.class_labels is not None:
            class_labels = schema.class_labels
            cls = kcodes[name].astype(smallest_uint(len(class_labels) - 1))
        else:
            col = kept[name]
            class_labels = tuple(sorted(set(col.values)))
            rank = {v: i for i, v in enumerate(class_labels)}
            dtype = smallest_uint(len(class_labels) - 1)
            lut = np.asarray([rank[v] for v in col.values], dtype=dtype)
            cls = lut[col.codes]
    sens_codes = _join(sens, np.uint8) if sens_enc is not None else np.zeros(n, dtype=np.uint8)
    return EncodedTable(
        b.source, tuple(b.header), qid_leaves, cls, sens_codes, kept, class_labels, kcodes
    )


def _join(parts: list[Codes], dtype: Any) -> Codes:
    out = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    parts.clear()
    return out


def _qid_encoder(
    a: AttributeSpec, schema: Schema, tree: AttrTree, dtype: Any
) -> LookupEncoder | NumericEncoder:
    if a.type == "categorical":
        tax = schema.taxonomies[a.name]
        index = tax.leaf_index()
        sample = ", ".join(list(index)[:5])
        return LookupEncoder(
            a.name, index, dtype, f"a leaf of taxonomy {a.taxonomy} (e.g. {sample})"
        )
    return NumericEncoder(a, tree, None if a.dynamic else schema.taxonomies[a.name], dtype)
