"""`fedanon federate`'s ``--party NAME=DATA`` inputs: parsed, and every party with its own
table (the same records twice would count twice towards K)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedanon.errors import ConfigError, InputError
from fedanon.io.fsutil import same_file
from fedanon.leader.config import PartyAddress, check_parties
from fedanon.security import certs

LEADER = "leader"


def check_party_files(parties: Sequence[tuple[str, Path]]) -> None:
    """Every ``--party`` table exists and no two name the same file (cheap: no reading)."""
    for i, (name, data) in enumerate(parties):
        if not data.is_file():
            raise ConfigError(f"party {name}: data file not found", file=str(data))
        for other, other_path in parties[:i]:
            if same_file(data, other_path):
                _twice(other, other_path, name, data, "the same file")


def _twice(other: str, other_path: Path, name: str, data: Path, how: str) -> None:
    raise ConfigError(
        f"parties {other} ({other_path}) and {name} ({data}) have {how} as data: "
        "every party needs its own table (records counted twice would satisfy K "
        "falsely)",
        file=str(data),
    )


def check_distinct_tables(
    parties: Sequence[tuple[str, Path]],
    spec: Any = None,
    loaded: Sequence[str | None] | None = None,
) -> None:
    """Every party has its own table: the same records twice would count twice towards K.
    Tables are compared by content as the run reads it (:func:`fedanon.io.sametable.
    content_digest` on the run ``spec``'s non-identifier columns, numeric QIDs as numbers;
    every column as text without a spec): the same multiset of records, whatever the file's
    encoding, line endings, format, row or column order, identifier column or way of writing
    a number, so a gzip, CRLF, Parquet, shuffled, renumbered or ``34.0`` copy is refused too.

    ``loaded``: per party, the digest of the table its daemon loaded for ``spec``
    (:func:`~fedanon.io.sametable.loaded_digest`) or None; two text tables (CSV) whose
    daemons' digests differ differ, and are not read here.  A Parquet table's digest is not
    trusted: its typed numbers take another path to the encoder than a CSV's text (a float32
    ``0.3`` was 0.30000001 to it until the encoder read typed numbers as their text,
    :func:`fedanon.io.encoders.typed_numbers`), so its file is always read, whatever types
    a Parquet writer chose.  Every other pair is
    compared by reading the files: first by :func:`~fedanon.io.sametable.column_digest` (the
    names and one column, a fraction of the cost); the full digest only for tables that agree
    on it."""
    from fedanon.io.sametable import EVERY_COLUMN, Compared, column_digest, content_digest
    from fedanon.io.sources import is_parquet

    check_party_files(parties)
    if len(parties) < 2:
        return
    on = EVERY_COLUMN if spec is None else Compared.of_spec(spec)
    if loaded is None or spec is None or len(loaded) != len(parties):
        loaded = [None] * len(parties)
    loaded = [None if is_parquet(data) else d for (_, data), d in zip(parties, loaded, strict=True)]
    quick: dict[int, str] = {}
    full: dict[int, str] = {}

    def digest(k: int, cache: dict[int, str], of: Any) -> str:
        if k not in cache:
            try:
                cache[k] = of(parties[k][1], on)
            except InputError:
                if spec is not None:  # the run refuses the table: say why, as it would
                    try:
                        _read_as_the_run(parties[k][1], spec)
                    except InputError as own:
                        exc = own
                raise _of_party(parties[k][0], exc) from None
        return cache[k]

    for i, (name, data) in enumerate(parties):
        for j in range(i):
            mine, theirs = loaded[i], loaded[j]
            if mine is not None and theirs is not None and mine != theirs:
                continue
            if digest(i, quick, column_digest) != digest(j, quick, column_digest):
                continue
            if digest(i, full, content_digest) == digest(j, full, content_digest):
                how = (
                    "the same records"
                    if spec is None
                    else "the same records (as the run reads them)"
                )
                _twice(parties[j][0], parties[j][1], name, data, how)


def _of_party(name: str, exc: InputError) -> InputError:
    """``exc`` naming the ``--party`` whose table it is about, before its file: 'party h1:
    data/h1.csv: the input has a header but no records'."""
    if exc.file is not None:
        exc.file = f"party {name}: {exc.file}"
    else:
        exc.message = f"party {name}: {exc.message}"
    exc.args = (exc.render(),)
    return exc


def _read_as_the_run(data: Path, spec: Any) -> None:
    """Check ``data``'s header as a hospital's daemon does (every declared column, the
    provider optional) and raise its error: a table the comparison cannot read (e.g. saved
    with ';' between fields, where the comparison's own reader saw a ragged row at line 3)
    is refused with the message ``fedanon anonymize`` gives for it."""
    from fedanon.io.sources import open_batches

    prov = spec.provider_attr
    b = open_batches(
        data,
        [a.name for a in spec.attributes],
        (),
        (prov.name,) if prov is not None else (),
    )
    b.close()


def parse_parties(items: Sequence[str]) -> list[tuple[str, Path]]:
    out = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError("--party must be NAME=DATA.csv", value=item)
        certs.validate_name(name)
        if name == LEADER:
            raise ConfigError("party name 'leader' is reserved for the leader", value=name)
        out.append((name, Path(path)))
    check_parties(tuple(PartyAddress(n, "-") for n, _ in out), "--party")
    return out
