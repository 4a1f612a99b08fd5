"""`fedanon federate`'s same-table check from the daemons' loaded tables (issue 19, the 1M
federation): a daemon with a pinned spec digests the table it loads anyway
(:func:`fedanon.io.sametable.loaded_digest`), and the check reads only the files whose
daemons' digests agree.  The digest must agree for every copy the file-based check refuses
(else a copy would slip through) and tell apart what differs on the columns it covers."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

import fedanon.io.sametable as sametable
from fedanon.apispec import Spec
from fedanon.errors import ConfigError
from fedanon.io.sametable import loaded_digest
from fedanon.io.table import encode_table
from fedanon.leader.federateinputs import check_distinct_tables
from fedanon.methods import registry

TABLE1 = Path(__file__).parent.parent.parent / "examples" / "table1"
ONE = Spec.from_toml(TABLE1 / "run.toml")
SPEC = ONE.run_spec
SCHEMA = registry.get(SPEC.privacy.model).schema(SPEC, ONE.taxonomy_reader())


def _digest(path: Path) -> str:
    return loaded_digest(encode_table(SCHEMA, path, memory_budget="off"))


def _lines() -> list[str]:
    return (TABLE1 / "table1.csv").read_text().splitlines()


def _write(d: Path, name: str, lines: list[str], end: str = "\n") -> Path:
    p = d / name
    p.write_bytes((end.join(lines) + end).encode())
    return p


def test_every_copy_has_the_same_digest(tmp_path: Path) -> None:
    want = _digest(TABLE1 / "table1.csv")
    lines = _lines()
    body = lines[1:]
    random.Random(3).shuffle(body)
    gz = tmp_path / "copy.csv.gz"
    gz.write_bytes(gzip.compress((TABLE1 / "table1.csv").read_bytes()))
    rows = [ln.split(",") for ln in lines]
    renumbered = [lines[0], *(",".join([str(int(r[0]) + 100), *r[1:]]) for r in rows[1:])]
    copies = [
        gz,
        _write(tmp_path, "crlf.csv", lines, "\r\n"),
        _write(tmp_path, "shuffled.csv", [lines[0], *body]),
        _write(tmp_path, "swapped.csv", [",".join([r[2], r[0], r[1], *r[3:]]) for r in rows]),
        _write(tmp_path, "renumbered.csv", renumbered),
    ]
    assert [_digest(c) for c in copies] == [want] * len(copies)


def test_a_changed_or_missing_record_changes_the_digest(tmp_path: Path) -> None:
    want = _digest(TABLE1 / "table1.csv")
    lines = _lines()
    header = lines[0].split(",")
    rows = [ln.split(",") for ln in lines[1:]]
    sex = header.index("Sex")
    rows[0][sex] = "F" if rows[0][sex] == "M" else "M"
    changed = _write(tmp_path, "changed.csv", [lines[0], *(",".join(r) for r in rows)])
    dropped = _write(tmp_path, "dropped.csv", lines[:-1])
    assert _digest(changed) != want
    assert _digest(dropped) != want


def test_tables_whose_daemons_disagree_are_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[Path] = []
    real_quick, real_full = sametable.column_digest, sametable.content_digest

    def quick(path: Path, *on: sametable.Compared) -> str:
        read.append(path)
        return real_quick(path, *on)

    def full(path: Path, *on: sametable.Compared) -> str:
        read.append(path)
        return real_full(path, *on)

    monkeypatch.setattr(sametable, "column_digest", quick)
    monkeypatch.setattr(sametable, "content_digest", full)
    one, two = TABLE1 / "table1.csv", TABLE1 / "table2.csv"
    gz = tmp_path / "copy.csv.gz"
    gz.write_bytes(gzip.compress(one.read_bytes()))
    parties = [("a", one), ("b", two), ("c", gz)]
    check_distinct_tables(parties[:2], SPEC, ["d1", "d2"])
    assert read == []
    # agreeing digests (a copy): the files are read and the copy refused
    with pytest.raises(ConfigError, match="same records"):
        check_distinct_tables(parties, SPEC, ["d1", "d2", "d1"])
    assert sorted(set(read)) == sorted([one, gz])
    # a daemon that loaded nothing ahead (None): its file is compared with every other
    read.clear()
    with pytest.raises(ConfigError, match="same records"):
        check_distinct_tables(parties, SPEC, ["d1", "d2", None])
    assert gz in read and one in read
