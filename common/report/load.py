"""Reading what a report is made of: the spec (any privacy model, seen through one small view),
the released table as coded text columns (Apache Arrow: a 1M-row release in well under a
second), and the run report JSON.

Cells are labels compared as written, surrounding blanks dropped (as ``fedanon audit`` reads
them).  A table is read with only the columns asked for; the original table likewise (its
cells never leave this process: only aggregate numbers computed from it reach the page).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from fedanon.errors import DataError, InputError, SpecError
from fedanon.model.attributes import NOT_RELEASED
from fedanon.model.taxonomy import Taxonomy, parse_taxonomy

PARQUET_MAGIC = b"PAR1"
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class QidView:
    """One quasi-identifier as the report needs it."""

    name: str
    kind: str  # "numeric" | "categorical" | "set"
    taxonomy: Taxonomy | None = None
    domain: tuple[float, float] | None = None


@dataclass(frozen=True)
class SpecView:
    """What the report reads from a spec, whatever its privacy model."""

    source: str
    model: str  # [privacy] model: a method's name or a registered model's
    parameters: tuple[tuple[str, str], ...]
    qids: tuple[QidView, ...]
    released: tuple[str, ...]  # the columns a release of this spec carries
    identifiers: tuple[str, ...]
    class_name: str | None
    k: int | None  # the group size the model asks for (None: DP)
    run_spec: Any = None  # the LKC RunSpec (LKC, registered models, DP's run part) or None
    one: Any = None  # the parsed spec (fedanon.Spec): its method's view and files

    def __post_init__(self) -> None:
        if not self.qids:
            raise SpecError("the spec declares no quasi-identifier", file=self.source)


def load_view(one: Any) -> SpecView:
    """The parsed spec (the one :class:`fedanon.Spec`, parsed by the command) as a
    :class:`SpecView`."""
    from fedanon.report.methods import kind_of

    shape = kind_of(one.privacy.model).shape
    if shape == "sets":
        return _kkm_view(one)
    reader = one.taxonomy_reader()
    if shape == "counts":
        from fedanon.dp.spec import DPSpec

        dp = DPSpec.of(one.view)
        # with a set-valued qid the noise always takes the rest (fedanon.dp.setrun)
        noise = "rest" if dp.set_attr is not None else dp.params.noise_budget
        params: tuple[tuple[str, str], ...] = (
            ("epsilon", str(dp.params.epsilon)),
            ("specializations", str(dp.params.specializations)),
            ("score", dp.params.score),
            ("noise budget", noise),
        )
        return _run_view(one, dp.run, reader, dp.run.privacy.model, params, None)
    spec = one.run_spec
    p = spec.privacy
    terms = p.as_lkc(len(spec.qids))
    shown = [(k, _text(v)) for k, v in p.parameters().items() if k != "model"]
    shown.append(("score", spec.score))
    return _run_view(one, spec, reader, p.model, tuple(shown), terms.K if terms else None)


def _text(v: Any) -> str:
    if isinstance(v, list | tuple):
        return ", ".join(str(x) for x in v)
    return str(v)


def _run_view(
    one: Any,
    spec: Any,
    reader: Any,
    model: str,
    params: tuple[tuple[str, str], ...],
    k: int | None,
) -> SpecView:
    qids = []
    for a in spec.qids:
        tax = parse_taxonomy(reader(a.taxonomy), a.taxonomy) if a.taxonomy else None
        kind = "numeric" if a.type == "numeric" else "categorical"
        qids.append(QidView(a.name, kind, tax, a.domain))
    class_name = spec.class_attr.name if spec.class_attr is not None else None
    return _view(one, spec.attributes, model, params, qids, class_name, k, run_spec=spec)


def _kkm_view(one: Any) -> SpecView:
    from fedanon.kkm.spec import MODEL

    spec, reader = one.view, one.file_bytes_reader()
    qids = []
    for a in spec.qids:
        tax = None
        if a.taxonomy:
            raw = reader(a.taxonomy)
            text = (gzip.decompress(raw) if raw[:2] == GZIP_MAGIC else raw).decode("utf-8-sig")
            tax = parse_taxonomy(text, a.taxonomy)
        qids.append(QidView(a.name, "numeric" if a.type == "numeric" else "categorical", tax))
    qids.append(QidView(spec.set_attr.name, "set"))
    p = spec.privacy
    params: tuple[tuple[str, str], ...] = (("k", str(p.k)), ("m", str(p.m)))
    params += (("delta", str(p.delta)),)
    params += (("epsilon_suppress", str(p.epsilon_suppress)),)
    classes = [a.name for a in spec.attributes if a.role == "class"]
    return _view(one, spec.attributes, MODEL, params, qids, classes[0] if classes else None, p.k)


def _view(
    one: Any,
    attrs: Any,
    model: str,
    params: tuple[tuple[str, str], ...],
    qids: list[QidView],
    class_name: str | None,
    k: int | None,
    run_spec: Any = None,
) -> SpecView:
    """The view of a parsed spec whose attributes (``attrs``, any method's) name the columns
    a release carries and the identifiers."""
    return SpecView(
        source=one.source,
        model=model,
        parameters=params,
        qids=tuple(qids),
        released=tuple(a.name for a in attrs if a.role not in NOT_RELEASED),
        identifiers=tuple(a.name for a in attrs if a.role == "identifier"),
        class_name=class_name,
        k=k,
        run_spec=run_spec,
        one=one,
    )


@dataclass(frozen=True)
class CodedTable:
    """A table as dictionary-coded text columns: ``codes[c][i]`` indexes ``labels[c]``."""

    source: str
    header: tuple[str, ...]
    n_rows: int
    labels: dict[str, tuple[str, ...]]
    codes: dict[str, npt.NDArray[np.int32]]

    def column(self, name: str) -> npt.NDArray[np.object_]:
        """The cells of ``name`` as text (for the few places that need them: the audit of
        distinct rows, the classifier of CE)."""
        return np.asarray(self.labels[name], dtype=object)[self.codes[name]]


def read_coded(path: Path, wanted: Sequence[str], *, name: str | None = None) -> CodedTable:
    """Read the ``wanted`` columns of a CSV (gzip by its magic bytes; ``#`` lines before the
    header skipped) or Parquet file as coded text.  ``name``: the file name the format is
    judged by when ``path`` is a temporary.  DataError (exit 2) for an unreadable file or a
    missing column."""
    import pyarrow as pa

    src = name or str(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise DataError(f"cannot read the table: {exc.strerror}", file=src) from exc
    lower = src.lower()
    try:
        if head == PARQUET_MAGIC or lower.endswith((".parquet", ".pq")):
            table, header = _parquet(path, wanted, src)
        else:
            table, header = _csv(path, wanted, src, gz=head[:2] == GZIP_MAGIC)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError, EOFError, UnicodeDecodeError) as exc:
        raise DataError(f"not a readable table ({_no_values(exc)})", file=src) from None
    if table.num_rows == 0:
        raise DataError("the table has a header but no records", file=src)
    labels: dict[str, tuple[str, ...]] = {}
    codes: dict[str, npt.NDArray[np.int32]] = {}
    for col in wanted:
        labels[col], codes[col] = _coded(table.column(col))
    return CodedTable(src, tuple(header), table.num_rows, labels, codes)


def _coded(column: Any) -> tuple[tuple[str, ...], npt.NDArray[np.int32]]:
    """A column as (distinct labels, code of each cell): dictionary-encoded by Arrow, the
    blanks around a label dropped on the distinct values only (labels that become equal are
    merged)."""
    import pyarrow as pa

    arr = column.combine_chunks()
    if not pa.types.is_dictionary(arr.type):
        arr = arr.cast(pa.string()).dictionary_encode()
    values = [("" if v is None else str(v)).strip() for v in arr.dictionary.to_pylist()]
    idx = arr.indices.fill_null(len(values)).to_numpy(zero_copy_only=False)
    values.append("")  # a null cell (Parquet) reads as the empty label
    uniq, remap = np.unique(np.asarray(values, dtype=object), return_inverse=True)
    codes = remap.reshape(-1).astype(np.int32)[idx]
    used = np.bincount(codes, minlength=len(uniq)) > 0
    if not used.all():  # drop labels no cell carries (the appended empty one, mostly)
        rank = (np.cumsum(used) - 1).astype(np.int32)
        codes, uniq = rank[codes], uniq[used]
    return tuple(str(u) for u in uniq), codes


def _no_values(exc: BaseException) -> str:
    """Arrow's reason without the row it quotes (``Expected 8 columns, got 7: <the row>``): the
    table may be the original, and a record's values never go to a message."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if first.startswith("CSV parse error:"):
        return re.sub(r"(got \d+): .*$", r"\1", first[len("CSV parse error:") :].strip())
    return first


def _missing(header: Sequence[str], wanted: Sequence[str], src: str) -> None:
    dup = sorted({h for h in header if list(header).count(h) > 1})
    if dup:
        raise DataError("a column name occurs twice in the header", file=src, column=dup[0])
    for w in wanted:
        if w not in header:
            raise DataError(
                "the table lacks a column",
                file=src,
                line=1,
                column=w,
                expected=f"a header naming {', '.join(wanted)}",
            )


def _parquet(path: Path, wanted: Sequence[str], src: str) -> tuple[Any, list[str]]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    header = [str(n) for n in pf.schema_arrow.names]
    _missing(header, wanted, src)
    return pf.read(columns=list(dict.fromkeys(wanted))), header


def _csv(path: Path, wanted: Sequence[str], src: str, *, gz: bool) -> tuple[Any, list[str]]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    header, skip = _csv_header(path, src, gz)
    _missing(header, wanted, src)
    stream: Any = pa.input_stream(str(path), compression="gzip" if gz else None)
    table = pacsv.read_csv(
        stream,
        read_options=pacsv.ReadOptions(skip_rows=skip + 1, column_names=header),
        # a quoted field may span lines: a kept free-text column, as every reader reads it
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            include_columns=list(dict.fromkeys(wanted)),
            column_types=dict.fromkeys(wanted, pa.dictionary(pa.int32(), pa.string())),
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    return table, header


def _csv_header(path: Path, src: str, gz: bool) -> tuple[list[str], int]:
    """The header of a CSV and the lines before it (``#`` comments, blank lines)."""
    skip = 0
    with _open_text(path, gz) as fh:
        line = fh.readline()
        while line and (line.lstrip().startswith("#") or not line.strip()):
            skip += 1
            line = fh.readline()
    if not line:
        raise DataError("the table is empty", file=src, expected="a header line")
    return [h.strip() for h in next(csv.reader(io.StringIO(line)))], skip


def _open_text(path: Path, gz: bool) -> Any:
    if gz:
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return path.open(encoding="utf-8-sig", newline="")


def read_header(path: Path, *, name: str | None = None) -> list[str]:
    """The column names of a CSV or Parquet table (``name``: as in :func:`read_coded`)."""
    src = name or str(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
        if head == PARQUET_MAGIC or src.lower().endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            return [str(n) for n in pq.ParquetFile(path).schema_arrow.names]
        return _csv_header(path, src, head[:2] == GZIP_MAGIC)[0]
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"not a readable table ({exc})", file=src) from None


def read_warning(path: Path, *, name: str | None = None) -> str | None:
    """The NOT PRIVATE warning a DiffGen run with a fixed seed writes into its table (a CSV's
    ``#`` line before the header, a Parquet file's ``fedanon.warning`` metadata), or None."""
    from fedanon.dp.randomness import NOT_PRIVATE
    from fedanon.dp.tablefile import WARNING_KEY

    src = name or str(path)
    lines: list[str] = []
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
        if head == PARQUET_MAGIC or src.lower().endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            meta = pq.ParquetFile(path).schema_arrow.metadata or {}
            lines.append(meta.get(WARNING_KEY, b"").decode("utf-8", "replace"))
        else:
            with _open_text(path, head[:2] == GZIP_MAGIC) as fh:
                for line in fh:
                    text = line.strip()
                    if text and not text.startswith("#"):
                        break
                    lines.append(text.lstrip("#").strip())
    except (OSError, EOFError, UnicodeDecodeError, ValueError):
        return None  # read_coded names what is wrong with the file
    return next((t for t in lines if t.startswith(NOT_PRIVATE)), None)


def read_run_report(path: Path, *, name: str | None = None) -> dict[str, Any]:
    """The run report JSON (``fedanon anonymize/federate/leader run --report``)."""
    src = name or str(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read the run report: {exc.strerror}", file=src) from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(
            f"the run report is not JSON ({exc})", file=src, expected="a --report JSON file"
        ) from exc
    if not isinstance(doc, dict):
        raise InputError("the run report is not a JSON object", file=src)
    return doc
