"""Set-valued columns (e.g. a patient's diagnosis codes): cells -> CSR item codes, vectorised.

One reader for every method and every source.  A set cell arrives as

- text: the items joined by the column's separator (a CSV cell, a Parquet or PostgreSQL text
  column), e.g. ``401.9|250.00``; a separator inside a quoted CSV field is the set's separator
  (with ``separator = ","`` the cell must be quoted, else the row has too many fields);
- a list: a Parquet ``list<string>`` column (or ``list<integer>``), a PostgreSQL ``text[]``
  array (see :mod:`fedanon.io.sources.postgres`).

Items are compared after stripping surrounding whitespace.  Every item must be in the
column's vocabulary (the taxonomy's leaves, in leaf order: code ``i`` is ``items[i]``).  The
policies, chosen by the caller's :class:`SetColumnSpec`:

- an empty cell / empty list is the empty set (``empty = "empty_set"``) or refused
  (``"error"``); a whitespace-only cell is empty;
- a NULL (Parquet, PostgreSQL) is refused (``null = "error"``, the relational reader's rule)
  or the empty set (``"empty_set"``); a CSV has no NULL, only empty cells;
- an item listed twice in one cell counts once and the number of such repeats is reported
  (``duplicates = "merge"``), or is refused naming the item (``"error"``);
- an empty item (``a||b``, a trailing separator, a NULL array element), an unknown item, or a
  label of the taxonomy that is not an item (an inner node) is refused, naming the file, the
  physical line (row for Parquet / PostgreSQL), the column and the item, and what is valid.

The result, :class:`SetValues`, is CSR: ``items[indptr[r]:indptr[r + 1]]`` are record r's
item codes, sorted and distinct, in the smallest unsigned dtype that holds the vocabulary.
Work is per batch and per distinct cell (Arrow's split / hash lookups, numpy sorts): no
Python object per row; the per-row arrays can live out of core (:meth:`SetEncoder.to_disk`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.arrays import Codes, IntArray
from fedanon.errors import SpecError
from fedanon.io.batches import Batches
from fedanon.io.columns import smallest_uint
from fedanon.io.spill import Sink, Spill

EMPTY_POLICIES = ("empty_set", "error")
DUPLICATE_POLICIES = ("merge", "error")


@dataclass(frozen=True)
class SetColumnSpec:
    """A plain description of one set-valued column (no spec type: any method builds it).

    ``items``: the vocabulary, code ``i`` = ``items[i]`` (for a taxonomy: its leaves in leaf
    order); ``non_items``: labels that exist but are not items (a taxonomy's inner nodes),
    named as such in errors; ``source``: what messages call the vocabulary (a taxonomy path);
    ``noun``: what an item is called in messages ("code" for diagnosis codes)."""

    name: str
    items: tuple[str, ...]
    separator: str = "|"
    source: str = "the item vocabulary"
    non_items: frozenset[str] = frozenset()
    empty: str = "empty_set"
    null: str = "error"
    duplicates: str = "merge"
    noun: str = "item"
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        def bad(msg: str, value: str | None = None, expected: str | None = None) -> SpecError:
            return SpecError(msg, column=self.name, value=value, expected=expected)

        if not self.name:
            raise SpecError("a set-valued column needs a name")
        if not self.separator or self.separator.strip() != self.separator:
            raise bad(
                "the separator must be non-empty, without surrounding whitespace",
                value=self.separator,
                expected='e.g. separator = "|"',
            )
        for policy, valid in (
            (self.empty, EMPTY_POLICIES),
            (self.null, EMPTY_POLICIES),
            (self.duplicates, DUPLICATE_POLICIES),
        ):
            if policy not in valid:
                raise bad("unknown policy", value=policy, expected=f"one of {list(valid)}")
        if not self.items:
            raise bad(f"the {self.noun} vocabulary is empty", expected=f"{self.source} items")
        index: dict[str, int] = {}
        for i, item in enumerate(self.items):
            if not item or item.strip() != item:
                raise bad(
                    f"{self.noun} of {self.source} is empty or has surrounding whitespace",
                    value=item,
                )
            if self.separator in item:
                raise bad(
                    f"{self.noun} of {self.source} contains the separator",
                    value=item,
                    expected=f"a separator that no {self.noun} contains (not {self.separator!r})",
                )
            if index.setdefault(item, i) != i:
                raise bad(f"{self.noun} listed twice in {self.source}", value=item)
        object.__setattr__(self, "_index", index)

    def code_of(self, item: str) -> int:
        """The code of an item (-1: not an item)."""
        return self._index.get(item, -1)

    def examples(self, k: int = 5) -> str:
        return ", ".join(self.items[:k])


@dataclass(frozen=True)
class SetValues:
    """A set-valued column, CSR: record r's sorted, distinct item codes are
    ``items[indptr[r]:indptr[r + 1]]``; ``repeats``: items dropped as listed twice."""

    indptr: IntArray
    items: Codes
    n_items: int
    repeats: int = 0

    @property
    def n(self) -> int:
        return int(self.indptr.shape[0] - 1)

    def lengths(self) -> IntArray:
        return np.diff(self.indptr)

    def record_of_item(self) -> IntArray:
        """For every entry of ``items``: the record it belongs to."""
        return np.repeat(np.arange(self.n, dtype=np.int64), self.lengths())


def _np(arr: Any, fill: int) -> npt.NDArray[np.int64]:
    """An Arrow integer array as int64 numpy, nulls as ``fill``."""
    return np.asarray(arr.fill_null(fill).to_numpy(zero_copy_only=False), dtype=np.int64)


def _other_separator(spec: SetColumnSpec, item: str) -> str | None:
    """The separator an unknown ``item`` was apparently joined with: one of a few common
    ones (not the column's) that splits it into at least two items, all known (else None)."""
    for sep in (";", ",", "|", " ", "\t", "/", ":"):
        if sep == spec.separator or sep not in item:
            continue
        parts = [p.strip() for p in item.split(sep)]
        if len(parts) > 1 and all(spec.code_of(p) >= 0 for p in parts):
            return sep
    return None


class SetEncoder:
    """Batches of one set-valued column -> :class:`SetValues` (see the module doc)."""

    def __init__(self, spec: SetColumnSpec) -> None:
        import pyarrow as pa

        self.spec = spec
        self.dtype = smallest_uint(max(len(spec.items) - 1, 0))
        self._vocab = pa.array(spec.items, pa.string())
        self._lengths = Sink(np.int32)
        self._items = Sink(self.dtype)
        self._n = 0
        self.repeats = 0

    def to_disk(self, spill: Spill) -> None:
        """From now on keep the per-row arrays in unnamed files (out of core)."""
        self._lengths.to_disk(spill)
        self._items.to_disk(spill)

    def add(self, b: Batches, start: int, arr: Any) -> None:
        """One batch's cells (``start``: the batch's first record in the input)."""
        import pyarrow as pa

        t = arr.type
        vt = t.value_type if pa.types.is_dictionary(t) else t
        if pa.types.is_string(vt) or pa.types.is_large_string(vt):
            lens, items = self._delimited(b, start, arr)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            lens, items = self._listed(b, start, arr)
        else:
            raise b.error(
                start,
                f"column has type {t}",
                column=self.spec.name,
                expected=f"text ({self.spec.noun}s joined by {self.spec.separator!r}) or a "
                "list of text",
            )
        self._lengths.add(lens.astype(np.int32))
        self._items.add(items.astype(self.dtype))
        self._n += int(lens.shape[0])

    def finish(self) -> SetValues:
        lens = self._lengths.finish()
        indptr = np.zeros(lens.shape[0] + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        return SetValues(indptr, self._items.finish(), len(self.spec.items), self.repeats)

    # text cells --------------------------------------------------------------------------

    def _delimited(
        self, b: Batches, start: int, arr: Any
    ) -> tuple[IntArray, npt.NDArray[np.int64]]:
        import pyarrow as pa
        import pyarrow.compute as pc

        if not pa.types.is_dictionary(arr.type):
            arr = pc.dictionary_encode(arr)
        values = arr.dictionary
        if pa.types.is_large_string(values.type):
            values = values.cast(pa.string())
        idx = _np(arr.indices, len(values))  # a NULL row -> one extra, empty cell
        null_row = idx == len(values)
        if len(values) > idx.shape[0]:  # a dictionary wider than the batch (Parquet's is
            used, idx = np.unique(idx, return_inverse=True)  # per row group): its cells only
            values = values.take(pa.array(used[used < len(values)]))  # NULL stays the last
        self._check_nulls(b, start, null_row)
        cells = pc.utf8_trim_whitespace(pa.concat_arrays([values, pa.array([""], pa.string())]))
        empty = np.asarray(pc.equal(cells, "").to_numpy(zero_copy_only=False), dtype=bool)
        self._check_empty(b, start, empty[idx] & ~null_row)
        parts = pc.split_pattern(cells, pattern=self.spec.separator)
        n_parts = _np(pc.list_value_length(parts), 0)
        owner = np.repeat(np.arange(len(cells), dtype=np.int64), n_parts)
        keep = ~empty[owner]
        owner = owner[keep]
        flat = pc.utf8_trim_whitespace(pc.list_flatten(parts)).filter(pa.array(keep))
        codes = self._codes(b, start, flat, owner, idx)
        cell_codes, cell_len, dups = self._distinct(owner, codes, len(cells))
        if self.spec.duplicates == "error":
            self._check_duplicates(b, start, dups[idx], owner, codes, idx)
        self.repeats += int(dups[idx].sum())
        off = np.zeros(len(cells) + 1, dtype=np.int64)
        np.cumsum(cell_len, out=off[1:])
        lens = cell_len[idx]
        rec_off = np.zeros(lens.shape[0] + 1, dtype=np.int64)
        np.cumsum(lens, out=rec_off[1:])
        gather = np.repeat(off[idx] - rec_off[:-1], lens) + np.arange(rec_off[-1])
        return lens, cell_codes[gather]

    # list cells --------------------------------------------------------------------------

    def _listed(self, b: Batches, start: int, arr: Any) -> tuple[IntArray, npt.NDArray[np.int64]]:
        import pyarrow as pa
        import pyarrow.compute as pc

        null_row = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        self._check_nulls(b, start, null_row)
        lens = _np(pc.list_value_length(arr), 0)
        self._check_empty(b, start, (lens == 0) & ~null_row)
        values = arr.flatten()  # the values of valid lists only
        if pa.types.is_dictionary(values.type):
            values = values.dictionary.take(values.indices)
        vt = values.type
        if pa.types.is_integer(vt) or pa.types.is_large_string(vt):
            values = values.cast(pa.string())
        elif not pa.types.is_string(vt):
            raise b.error(
                start,
                f"column has type {arr.type}",
                column=self.spec.name,
                expected=f"a list of text ({self.spec.noun}s of {self.spec.source})",
            )
        flat = pc.utf8_trim_whitespace(values.fill_null(""))
        owner = np.repeat(np.arange(lens.shape[0], dtype=np.int64), lens)
        rows = np.arange(lens.shape[0], dtype=np.int64)
        codes = self._codes(b, start, flat, owner, rows)
        out, out_len, dups = self._distinct(owner, codes, lens.shape[0])
        if self.spec.duplicates == "error":
            self._check_duplicates(b, start, dups, owner, codes, rows)
        self.repeats += int(dups.sum())
        return out_len, out

    # shared steps ------------------------------------------------------------------------

    def _codes(
        self, b: Batches, start: int, flat: Any, owner: IntArray, row_cell: IntArray
    ) -> npt.NDArray[np.int64]:
        """Vocabulary codes of the flat items; an invalid one is refused at the first row
        (``row_cell[r]``: the cell of row r; ``owner[j]``: the cell of item j)."""
        import pyarrow.compute as pc

        codes = _np(pc.index_in(flat, value_set=self._vocab), -1)
        bad = codes < 0
        if bad.any():
            cell_bad = np.zeros(max(int(row_cell.max(initial=0)), int(owner.max())) + 1, bool)
            cell_bad[owner[bad]] = True
            row = int(np.flatnonzero(cell_bad[row_cell])[0])
            j = int(np.flatnonzero(bad & (owner == row_cell[row]))[0])
            raise self._item_error(b, start + row, str(flat[j].as_py()))
        return codes

    def _distinct(
        self, owner: IntArray, codes: npt.NDArray[np.int64], n_cells: int
    ) -> tuple[npt.NDArray[np.int64], IntArray, IntArray]:
        """Per cell: sorted distinct codes (flat), their number, the repeats dropped."""
        v = len(self.spec.items)
        key = np.unique(owner * v + codes)
        cell_len = np.bincount(key // v, minlength=n_cells).astype(np.int64)
        given = np.bincount(owner, minlength=n_cells).astype(np.int64)
        return key % v, cell_len, given - cell_len

    def _item_error(self, b: Batches, record: int, item: str) -> Exception:
        s = self.spec
        if not item:
            return b.error(
                record,
                f"empty {s.noun}",
                column=s.name,
                value=item,
                expected=f"{s.noun}s separated by a single {s.separator!r} (no empty or NULL "
                f"{s.noun})",
            )
        if item in s.non_items:
            return b.error(
                record,
                f"{s.noun} is not a leaf of the hierarchy",
                column=s.name,
                value=item,
                expected=f"a most specific {s.noun} of {s.source}",
            )
        leaf = "a leaf " if s.non_items else "a "
        expected = f"{leaf}{s.noun} of {s.source} (e.g. {s.examples()})"
        other = _other_separator(s, item)
        if other is not None:
            expected += (
                f"; the cell looks like {s.noun}s joined by {other!r}, the column's "
                f"separator is {s.separator!r} (declare separator = {other!r} or rewrite "
                "the cells)"
            )
        return b.error(record, f"unknown {s.noun}", column=s.name, value=item, expected=expected)

    def _check_nulls(self, b: Batches, start: int, null_row: npt.NDArray[np.bool_]) -> None:
        if self.spec.null == "error" and null_row.any():
            raise b.error(
                start + int(np.flatnonzero(null_row)[0]),
                "missing value (NULL)",
                column=self.spec.name,
                expected=f"a set in every row (an empty list or empty text for no "
                f"{self.spec.noun}s)",
            )

    def _check_empty(self, b: Batches, start: int, empty_row: npt.NDArray[np.bool_]) -> None:
        if self.spec.empty == "error" and empty_row.any():
            raise b.error(
                start + int(np.flatnonzero(empty_row)[0]),
                f"empty set of {self.spec.noun}s",
                column=self.spec.name,
                expected=f"at least one {self.spec.noun} in every row",
            )

    def _check_duplicates(
        self,
        b: Batches,
        start: int,
        dups_row: IntArray,
        owner: IntArray,
        codes: npt.NDArray[np.int64],
        row_cell: IntArray,
    ) -> None:
        if not dups_row.any():
            return
        row = int(np.flatnonzero(dups_row)[0])
        mine = np.sort(codes[owner == row_cell[row]])
        twice = int(mine[np.flatnonzero(mine[1:] == mine[:-1])[0]])
        raise b.error(
            start + row,
            f"{self.spec.noun} listed twice in one set",
            column=self.spec.name,
            value=self.spec.items[twice],
            expected=f"each {self.spec.noun} once per row",
        )
