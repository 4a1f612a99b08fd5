"""Per-column encoders: a batch of input cells -> small integer codes, checked against the spec.

Each distinct value of a batch is looked up once (a leaf of the taxonomy, a bin of the numeric
domain, a declared value); rows get the code of their value by one numpy take.  An invalid
value is reported at the first row holding it, through :meth:`Batches.error` (file and
physical line for a CSV, row for Parquet and PostgreSQL).  Typed columns (Parquet,
PostgreSQL) are checked like CSV cells: a number for a numeric QID, text or an integer for a
categorical one, and no NULLs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.arrays import Codes, Int32Array
from fedanon.io.batches import Batches
from fedanon.io.columns import Column, DictBuilder, stripped_dictionary
from fedanon.io.spill import Spill
from fedanon.model.spec import AttributeSpec
from fedanon.model.taxonomy import Taxonomy, interval_leaves
from fedanon.model.tree import AttrTree, as_written, bin_edge

# a number as a CSV writes it: ASCII digits, optional sign, point and exponent (what Arrow's
# cast reads; the same-table check matches the same pattern, fedanon.io.sametable); a
# non-finite spelling is read too (then refused as outside the domain)
CSV_NUMBER = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
_DECIMAL = re.compile(CSV_NUMBER + r"\Z")
_NON_FINITE = frozenset(s + w for s in ("", "+", "-") for w in ("inf", "infinity", "nan"))


def check_nulls(b: Batches, start: int, name: str, arr: Any) -> None:
    if arr.null_count:
        import pyarrow.compute as pc

        first = int(pc.index(pc.is_null(arr), True).as_py())
        raise b.error(
            start + first,
            "missing value (NULL)",
            column=name,
            expected=(
                "a value in every row (fill the file's NULLs; from PostgreSQL, filter or "
                "COALESCE them in the query)"
            ),
        )


def is_number_type(arr: Any) -> bool:
    import pyarrow as pa

    t = arr.type
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t))


def csv_number(text: str) -> float | None:
    """A (stripped) cell as a number the way a CSV writes one -- ASCII digits, optional sign,
    point and exponent, or a non-finite spelling -- else None (not Python's wider ``float``
    syntax: ``3_4``, full-width or other scripts' digits)."""
    if _DECIMAL.match(text) is None and text.lower() not in _NON_FINITE:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def typed_numbers(arr: Any) -> npt.NDArray[np.float64]:
    """A number-typed column as the numbers its text says, as the same-table check and a CSV
    copy read them: a float32 44.6 is 44.6 (not 44.599998), a decimal 58.3 is 58.3 (Arrow's
    cast gives 58.300000000000004); an integer beyond 2**53 rounds (the checked cast raised)."""
    import pyarrow as pa

    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_float64(t)):
        arr = arr.cast(pa.string())  # float32, float16, decimal: its shortest text
    return np.asarray(arr.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False))


def text_of(b: Batches, start: int, name: str, arr: Any) -> tuple[Any, Int32Array]:
    """(distinct stripped texts, row index) of a text or integer column."""
    import pyarrow as pa

    check_nulls(b, start, name, arr)
    t = arr.type.value_type if pa.types.is_dictionary(arr.type) else arr.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)):
        raise b.error(
            start,
            f"column has type {t}",
            column=name,
            expected="text or integers (cast it in the query, or write it as text)",
        )
    return stripped_dictionary(arr)


def exact(x: float) -> str:
    """A domain bound as written, never rounded: 1490400 (``:g`` said 1.4904e+06), 0.1."""
    f = float(x)
    return str(int(f)) if f.is_integer() and abs(f) < 1e18 else repr(f)


@functools.lru_cache(maxsize=64)
def bin_edges(lo: float, step: float, n_bins: int) -> npt.NDArray[np.float64]:
    """The inner edges ``lo + i*step`` (i = 1 .. n_bins-1) of a dynamic numeric QID's bins,
    each the float nearest the decimal the spec means and the label shows: 7 * 0.1 is 0.7,
    where ``(0.7 - 0) / 0.1`` is 6.999999999999999 and put the cell 0.7 in ``[0.6-0.7)``."""
    d_lo, d_step = as_written(lo), as_written(step)
    digits = max(0, -int(d_lo.as_tuple().exponent), -int(d_step.as_tuple().exponent))
    scale = 10**digits
    first, stride = int(d_lo * scale), int(d_step * scale)  # exact: the decimals' digits
    if digits <= 22 and max(abs(first), abs(first + n_bins * stride)) < 1 << 53:
        # (first + i*stride) / 10^digits: exact integers, one correctly rounded division --
        # the float nearest the decimal edge, as float(bin_edge(...)), without a Python loop
        i = np.arange(1, n_bins, dtype=np.int64)
        edges = (first + i * stride).astype(np.float64) / float(scale)
    else:  # more digits than a double holds exactly: edge by edge (at most MAX_BINS)
        edges = np.array([float(bin_edge(lo, step, i)) for i in range(1, n_bins)])
    edges.flags.writeable = False  # cached: shared by every encoder of this domain
    return edges


def first_row(idx: Int32Array, bad_entries: npt.NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(bad_entries[idx])[0])


class LookupEncoder:
    """Cells that must be one of a fixed set of strings (taxonomy leaves, declared values)."""

    def __init__(
        self, name: str, table: Mapping[str, int], dtype: Any, expected: str, missing: int = -1
    ) -> None:
        self.name, self.table, self.dtype, self.expected = name, table, dtype, expected
        self.missing = missing  # code of an unknown value; -1: an error
        top = max([*table.values(), missing], default=0)
        if top > np.iinfo(dtype).max:  # astype would wrap the code silently: a bug, refused
            raise ValueError(f"column {name!r}: code {top} does not fit {np.dtype(dtype).name}")

    def add(self, b: Batches, start: int, arr: Any) -> Codes:
        values, idx = text_of(b, start, self.name, arr)
        texts = values.to_pylist()
        codes = np.fromiter(
            (self.table.get(v, self.missing) for v in texts), dtype=np.int64, count=len(texts)
        )
        bad = codes < 0
        if bad.any():
            row = first_row(idx, bad)
            raise b.error(
                start + row,
                "value not allowed",
                column=self.name,
                value=texts[int(idx[row])],
                expected=self.expected,
            )
        return codes.astype(self.dtype)[idx]


class NumericEncoder:
    """A numeric QID: a number inside the domain, mapped to a bin (dynamic splits) or to the
    leaf interval of its taxonomy."""

    def __init__(self, a: AttributeSpec, tree: AttrTree, tax: Taxonomy | None, dtype: Any):
        assert a.domain is not None
        self.a, self.tree, self.tax, self.dtype = a, tree, tax, dtype
        self.lo, self.hi = a.domain
        if tax is not None:
            llo, lhi = interval_leaves(tax)
            self.srt = np.argsort(llo, kind="stable")
            self.llo, self.lhi = llo, lhi

    def add(self, b: Batches, start: int, arr: Any) -> Codes:
        name = self.a.name
        if is_number_type(arr):
            check_nulls(b, start, name, arr)
            nums = typed_numbers(arr)
            idx: Int32Array | None = None
            texts: list[str] | None = None
        else:
            values, idx = text_of(b, start, name, arr)
            nums, texts = self._parse(b, start, values, idx)
        leaf, why = self._leaves(nums)
        if why is not None:
            bad = leaf < 0
            row = first_row(idx, bad) if idx is not None else int(np.flatnonzero(bad)[0])
            entry = int(idx[row]) if idx is not None else row
            value = texts[entry] if texts is not None else f"{nums[entry]:g}"
            raise b.error(
                start + row, why[0], column=name, value=value, expected=self._expected(why[1])
            )
        codes = leaf.astype(self.dtype)
        return codes[idx] if idx is not None else codes

    def _parse(
        self, b: Batches, start: int, values: Any, idx: Int32Array
    ) -> tuple[npt.NDArray[np.float64], list[str]]:
        import pyarrow as pa

        texts: list[str] = values.to_pylist()
        try:
            return values.cast(pa.float64()).to_numpy(zero_copy_only=False), texts
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        nums = np.empty(len(texts), dtype=np.float64)
        bad = np.zeros(len(texts), dtype=bool)
        for i, v in enumerate(texts):  # once per distinct value, not per row
            number = csv_number(v)
            if number is None:
                bad[i] = True
            else:
                nums[i] = number
        if bad.any():
            row = first_row(idx, bad)
            raise b.error(
                start + row,
                "not a number",
                column=self.a.name,
                value=texts[int(idx[row])],
                expected=f"a number in [{exact(self.lo)}, {exact(self.hi)})",
            )
        return nums, texts

    def _leaves(
        self, vals: npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.int64], tuple[str, str] | None]:
        out = np.full(vals.shape, -1, dtype=np.int64)
        inside = np.isfinite(vals) & (vals >= self.lo) & (vals < self.hi)
        if not inside.all():
            out[inside] = 0
            return out, ("number outside the declared domain", "domain")
        if self.tax is None:
            edges = bin_edges(self.lo, self.a.bin_step, self.tree.n_leaves)
            return np.searchsorted(edges, vals, side="right").astype(np.int64), None
        pos = np.searchsorted(self.llo[self.srt], vals, side="right") - 1
        ok = pos >= 0
        leaf = self.srt[np.maximum(pos, 0)]
        ok &= vals < self.lhi[leaf]
        if not ok.all():
            out[ok] = leaf[ok]
            return out, ("number in no leaf interval of the taxonomy", "leaf")
        return np.asarray(leaf, dtype=np.int64), None

    def _expected(self, kind: str) -> str:
        if kind == "leaf":
            return f"a value inside a leaf of {self.a.taxonomy}"
        return f"a number in [{exact(self.lo)}, {exact(self.hi)})"


class KeptEncoder:
    """A column released unchanged: its distinct values, folded over the batches."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.builder = DictBuilder()

    def add(self, b: Batches, start: int, arr: Any) -> None:
        self.builder.add(*text_of(b, start, self.name, arr))

    def to_disk(self, spill: Spill) -> None:
        self.builder.to_disk(spill)

    def finish(self) -> Column:
        return self.builder.finish()
