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
from fedanon.io.spill import Sink, Spill, budget_from_env, choose, converted, parse_budget
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
    sens: Codes  # 0 (not a sensitive value) or 1..|S|, in the smallest type holding |S|
    kept: dict[str, Column]  # class, sensitive and 'other' columns, unchanged
    class_labels: tuple[str, ...]
    kept_codes: dict[str, Codes]  # kept columns with declared values: index into values
    spill: Spill | None = None  # per-row codes in memory-mapped files (a table over budget)
    provider: Column | None = None  # role = "provider": whose record (read, never released)

    @property
    def n_rows(self) -> int:
        return int(self.cls.shape[0])


def read_csv_columns(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and plain string columns (for tools that want lists)."""
    header, cols = read_columns(path)
    return header, [cols[h].strings().tolist() for h in header]


def encode_table(
    schema: Schema,
    source: DataSource,
    progress: RowsRead | None = None,
    memory_budget: str | None = None,
    *,
    federated: bool = False,
) -> EncodedTable:
    """Read ``source`` (CSV, Parquet or PostgreSQL) batch by batch into codes; identifier
    columns are never read.  ``progress`` is told the number of records read after each
    batch.  ``memory_budget`` ("4GB", "auto", "off"; None: FEDANON_MEMORY_BUDGET, else
    "auto"): a table whose rows need more is kept out of core (:mod:`fedanon.io.spill`).
    ``federated``: a hospital's table, which needs no provider column (the hospital is the
    provider; one declared is read if present)."""
    budget = budget_from_env() if memory_budget is None else parse_budget(memory_budget)
    spec = schema.spec
    include = [a.name for a in spec.attributes if a.role != "identifier"]
    prov = spec.provider_attr
    optional = (prov.name,) if federated and prov is not None else ()
    b = open_batches(source, [a.name for a in spec.attributes], include, optional)
    if progress is None:  # a daemon loading its table says how far it got, in its log
        progress = Progress(to_log(log, f"loading {b.source}")).rows
    try:
        return _encode(schema, b, progress, budget)
    finally:
        b.close()


def _encode(
    schema: Schema, b: Batches, progress: RowsRead | None, budget: int | None
) -> EncodedTable:
    spec = schema.spec
    trees = schema.new_trees()
    leaf_dtype = smallest_uint(max(t.n_leaves for t in trees) - 1)
    qid_enc = [_qid_encoder(a, schema, trees[i], leaf_dtype) for i, a in enumerate(spec.qids)]
    kept_attrs = [a for a in spec.attributes if a.role in ("class", "sensitive", "other")]
    kept_enc = {a.name: KeptEncoder(a.name) for a in kept_attrs}
    prov = (
        spec.provider_attr if spec.provider_attr and spec.provider_attr.name in b.header else None
    )
    prov_enc = KeptEncoder(prov.name) if prov is not None else None
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
    # codes 0..|S|: 256 sensitive values need uint16 (in uint8 code 256 would wrap to 0, "not
    # sensitive", and C would bind nothing for that value)
    sens_dtype = smallest_uint(len(spec.privacy.sensitive_values))
    if spec.sensitive_attr is not None:
        table = {v: i + 1 for i, v in enumerate(spec.privacy.sensitive_values)}
        sens_enc = LookupEncoder(spec.sensitive_attr.name, table, sens_dtype, "", missing=0)
    leaves = [Sink(leaf_dtype) for _ in spec.qids]
    kept_codes = {name: Sink(np.int32) for name in declared}
    sens = Sink(sens_dtype)
    spill: Spill | None = None
    n = 0
    for batch in b.batches:
        cols = batch.columns
        for i, a in enumerate(spec.qids):
            leaves[i].add(qid_enc[i].add(b, batch.start, cols[a.name]))
        for name, enc in declared.items():
            kept_codes[name].add(enc.add(b, batch.start, cols[name]))
        if sens_enc is not None and spec.sensitive_attr is not None:
            sens.add(sens_enc.add(b, batch.start, cols[spec.sensitive_attr.name]))
        for name, kenc in kept_enc.items():
            kenc.add(b, batch.start, cols[name])
        if prov_enc is not None and prov is not None:
            prov_enc.add(b, batch.start, cols[prov.name])
        n += batch.rows
        if spill is None and (spill := choose(n, budget)) is not None:
            log.info("table over the memory budget at %d rows: codes kept out of core", n)
            for sink in (*leaves, *kept_codes.values(), sens):
                sink.to_disk(spill)
            for kenc in (*kept_enc.values(), *([prov_enc] if prov_enc else [])):
                kenc.to_disk(spill)
        if progress is not None:
            progress(n)
    shape = (len(spec.qids), n)
    qid_leaves = np.empty(shape, leaf_dtype) if spill is None else spill.array(shape, leaf_dtype)
    for i, sink in enumerate(leaves):  # each QID's batches are freed once they are joined
        sink.finish_into(qid_leaves[i], spill.chunk_rows if spill is not None else n)
    kept = {name: enc.finish() for name, enc in kept_enc.items()}
    kcodes = {name: sink.finish() for name, sink in kept_codes.items()}
    class_labels: tuple[str, ...] = ("",)
    cls: Codes = _zeros(spill, n)
    if spec.class_attr is not None:
        name = spec.class_attr.name
        if schema.class_labels is not None:
            class_labels = schema.class_labels
            cls = converted(spill, kcodes[name], smallest_uint(len(class_labels) - 1))
        else:
            col = kept[name]
            class_labels = tuple(sorted(set(col.values)))
            rank = {v: i for i, v in enumerate(class_labels)}
            dtype = smallest_uint(len(class_labels) - 1)
            lut = np.asarray([rank[v] for v in col.values], dtype=dtype)
            cls = converted(spill, col.codes, dtype, lut)
    sens_codes = sens.finish() if sens_enc is not None else _zeros(spill, n)
    provider = prov_enc.finish() if prov_enc is not None else None
    return EncodedTable(
        b.source,
        tuple(b.header),
        qid_leaves,
        cls,
        sens_codes,
        kept,
        class_labels,
        kcodes,
        spill,
        provider,
    )


def _zeros(spill: Spill | None, n: int) -> Codes:
    return np.zeros(n, dtype=np.uint8) if spill is None else spill.array((n,), np.uint8)


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
