"""Dictionary-encoded text columns: distinct values once, small integer codes per row.

Batches of Arrow arrays (see :mod:`fedanon.io.batches`) are folded into one
:class:`Column` per input column; cells are compared after stripping surrounding whitespace,
as a CSV written by hand needs.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from fedanon.arrays import Codes
from fedanon.io.spill import Sink, Spill, converted

if TYPE_CHECKING:
    from fedanon.io.batches import Batches


_POOL_SET = False
_POOL_LOCK = threading.Lock()  # one set-up, also when a thread warms the writer up


def use_system_allocator() -> None:
    """Arrow set up for this process, before any Arrow work: it allocates through the C
    library's malloc (its default pool, mimalloc, keeps freed batches for reuse, which added
    ~80 MB to the peak of a run that reads and writes in batches), and it does not load
    pandas (see :func:`_arrow_without_pandas`)."""
    global _POOL_SET
    with _POOL_LOCK:
        if not _POOL_SET:
            import pyarrow as pa

            pa.set_memory_pool(pa.system_memory_pool())
            _arrow_without_pandas(pa)
            _POOL_SET = True


def _arrow_without_pandas(pa: Any) -> None:
    """pyarrow imports pandas on its first conversion of any Python object or numpy array
    (a scalar, ``pa.array``, ``to_numpy``) to ask whether the object is a pandas one: ~0.3 s
    of CPU and ~60 MB per process that never uses pandas (the CLI, a party daemon).  When
    pandas is not loaded yet, that first question is asked with pandas unimportable, so
    pyarrow records it as absent; pyarrow still imports it when asked for pandas objects
    (``to_pandas``).  A process that loads pandas itself before reading (the library API,
    fedanon.api) is left alone.  Unlike :func:`fedanon.pandasgate.without_pandas` (federation
    processes) nothing stays refused: the CLI's user code may import pandas later."""
    from fedanon.pandasgate import NoPandas

    if "pandas" in sys.modules:
        return
    finder = NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.scalar(0)
    except ImportError:  # a pyarrow that insists: it will import pandas later, as before
        pass
    finally:
        sys.meta_path.remove(finder)


def smallest_uint(max_value: int) -> type[np.unsignedinteger[Any]] | type[np.int32]:
    """The smallest integer dtype holding 0..max_value (codes, leaf ids)."""
    if max_value < 1 << 8:
        return np.uint8
    if max_value < 1 << 16:
        return np.uint16
    if max_value < 1 << 31:
        return np.int32
    raise ValueError(f"{max_value + 1} codes do not fit int32")  # never wrapped


class Column:
    """One column, dictionary-encoded: ``values[codes]`` is the column.  The distinct values
    live in an Arrow array when they came from one (a column of unique strings then costs no
    Python object per row); :attr:`values` is the tuple form, made on first use."""

    __slots__ = ("_arrow", "_values", "codes")

    def __init__(self, values: Sequence[str] | None, codes: Codes, arrow: Any = None) -> None:
        if values is None and arrow is None:
            raise ValueError("a Column needs its values")
        self._values = None if values is None else tuple(values)
        self._arrow = arrow
        self.codes = codes

    @property
    def values(self) -> tuple[str, ...]:
        if self._values is None:
            self._values = tuple(self._arrow.to_pylist())
        return self._values

    def arrow_values(self) -> Any:
        """The distinct values as an Arrow string array."""
        if self._arrow is None:
            import pyarrow as pa

            self._arrow = pa.array(self._values, pa.string())
        return self._arrow

    def n_values(self) -> int:
        return len(self._values) if self._values is not None else len(self._arrow)

    def strings(self) -> npt.NDArray[np.object_]:
        return np.asarray(self.values, dtype=object)[self.codes]

    def tolist(self) -> list[str]:
        out: list[str] = self.strings().tolist()
        return out

    def first_row_with(self, value_index: int) -> int:
        return int(np.flatnonzero(self.codes == value_index)[0])

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def __getitem__(self, idx: Any) -> Any:
        """A row's string for an integer index; a Column of the selected rows otherwise."""
        if isinstance(idx, int | np.integer):
            return self.values[int(self.codes[idx])]
        return Column(self._values, self.codes[idx], self._arrow)


def stripped_dictionary(arr: Any) -> tuple[Any, npt.NDArray[np.int32]]:
    """A text column of a batch as (distinct stripped values, int32 index of each row).

    Only values some row of the batch holds: a Parquet batch's dictionary is its row
    group's (values of other batches, a pandas categorical's unused categories), and a
    value no row holds must neither be refused here nor count as present."""
    import pyarrow as pa
    import pyarrow.compute as pc

    typed_dict = pa.types.is_dictionary(arr.type)
    if not typed_dict:
        arr = pc.dictionary_encode(arr)
    values = arr.dictionary
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        values = values.cast(pa.string())
    idx = arr.indices.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    if typed_dict:
        used = np.zeros(len(values), dtype=bool)
        used[idx] = True
        if not used.all():
            keep = np.flatnonzero(used)
            remap = np.zeros(len(values), dtype=np.int32)
            remap[keep] = np.arange(keep.size, dtype=np.int32)
            values, idx = values.take(pa.array(keep)), remap[idx]
    trimmed = pc.utf8_trim_whitespace(values)
    if not trimmed.equals(values):
        enc = pc.dictionary_encode(trimmed)
        remap = enc.indices.to_numpy(zero_copy_only=False).astype(np.int32)
        return enc.dictionary, remap[idx]
    return values, idx


class DictBuilder:
    """Folds per-batch (values, codes) pairs of one column into one :class:`Column`.

    Out of core (:meth:`to_disk`) each batch's codes are mapped to the codes of a running
    dictionary at once and appended to an unnamed file: the same values in the same order
    (first appearance, as Arrow's ``unify_dictionaries``) and the same codes as in memory.
    The distinct values stay in memory."""

    def __init__(self) -> None:
        self._chunks: list[tuple[Any, npt.NDArray[np.int32]]] = []
        self._spill: Spill | None = None
        self._sink: Sink | None = None
        self._dict: Any = None  # the running dictionary (Arrow strings), out of core

    def add(self, values: Any, idx: npt.NDArray[np.int32]) -> None:
        if self._sink is None:
            self._chunks.append((values, idx))
            return
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._dict is None:
            self._dict = values.slice(0, 0)
        pos = pc.index_in(values, value_set=self._dict)
        new = pc.is_null(pos)
        if pc.any(new).as_py():
            fresh = values.filter(new)
            self._dict = pa.concat_arrays([self._dict, fresh])
            pos = pc.index_in(values, value_set=self._dict)
        remap = pos.to_numpy(zero_copy_only=False).astype(np.int32)
        self._sink.add(remap[idx])

    def to_disk(self, spill: Spill) -> None:
        """From now on keep the codes out of core (the batches so far are written out)."""
        self._spill = spill
        self._sink = Sink(np.int32)
        self._sink.to_disk(spill)
        chunks, self._chunks = self._chunks, []
        for values, idx in chunks:
            self.add(values, idx)

    def finish(self, sort: bool = False) -> Column:
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._sink is not None and self._spill is not None and not sort:
            codes32 = self._sink.finish()
            values = self._dict if self._dict is not None else pa.array([], pa.string())
            dtype = smallest_uint(max(len(values) - 1, 0))
            return Column(None, converted(self._spill, codes32, dtype), values)
        if self._sink is not None:
            raise ValueError("a sorted column is not built out of core")
        if not self._chunks:
            return Column((), np.zeros(0, dtype=np.int32))
        if len(self._chunks) == 1:
            values, codes = self._chunks[0]
        else:
            arrays = [pa.DictionaryArray.from_arrays(pa.array(i), v) for v, i in self._chunks]
            unified = pa.chunked_array(arrays).unify_dictionaries()
            values = unified.chunk(0).dictionary
            codes = np.concatenate(
                [c.indices.to_numpy(zero_copy_only=False) for c in unified.chunks]
            ).astype(np.int32, copy=False)
        self._chunks = []
        if sort:
            order = pc.array_sort_indices(values).to_numpy(zero_copy_only=False)
            rank = np.empty(order.size, dtype=np.int32)
            rank[order] = np.arange(order.size, dtype=np.int32)
            values, codes = values.take(pa.array(order)), rank[codes]
        dtype = smallest_uint(max(len(values) - 1, 0))
        return Column(None, codes.astype(dtype, copy=False), values)


def columns_from_batches(b: Batches) -> dict[str, Column]:
    """Every column of the batches as a Column with sorted values."""
    builders: dict[str, DictBuilder] = {}
    for batch in b.batches:
        for name, arr in batch.columns.items():
            builders.setdefault(name, DictBuilder()).add(*stripped_dictionary(arr))
    return {name: builders[name].finish(sort=True) for name in b.header if name in builders}
