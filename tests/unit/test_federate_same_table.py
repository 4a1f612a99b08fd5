"""Issue 24 item 5: `fedanon federate` refuses two parties with the same records, however the
copy is encoded (gzip, CRLF, bare CR, BOM, Parquet) or ordered (rows, columns)."""

from __future__ import annotations

import gzip
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fedanon.errors import ConfigError
from fedanon.leader.federateinputs import check_distinct_tables

TABLE1 = Path(__file__).parent.parent.parent / "examples" / "table1"


def _lines() -> list[str]:
    return (TABLE1 / "table1.csv").read_text().splitlines()


def _gzip(d: Path) -> Path:
    p = d / "copy.csv.gz"
    p.write_bytes(gzip.compress((TABLE1 / "table1.csv").read_bytes()))
    return p


def _ending(end: str, bom: str = "") -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        p = d / "copy.csv"
        p.write_bytes((bom + end.join(_lines()) + end).encode())
        return p

    return make


def _parquet(d: Path) -> Path:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    p = d / "copy.parquet"
    pq.write_table(pacsv.read_csv(TABLE1 / "table1.csv"), p)  # ID and Age typed int64
    return p


def _shuffled(d: Path) -> Path:
    lines = _lines()
    body = lines[1:]
    random.Random(7).shuffle(body)
    p = d / "copy.csv"
    p.write_text("\n".join([lines[0], *body]) + "\n")
    return p


def _columns_swapped(d: Path) -> Path:
    rows = [ln.split(",") for ln in _lines()]
    p = d / "copy.csv"
    p.write_text("\n".join(",".join([r[2], r[0], r[1], *r[3:]]) for r in rows) + "\n")
    return p


def _quoted_and_padded(d: Path) -> Path:
    rows = [ln.split(",") for ln in _lines()]
    p = d / "copy.csv"
    p.write_text("\n".join(",".join(f'" {c}"' for c in r) for r in rows) + "\n")
    return p


COPIES = {
    "gzip": _gzip,
    "crlf": _ending("\r\n"),
    "bare-cr": _ending("\r"),
    "bom": _ending("\n", "\ufeff"),
    "parquet": _parquet,
    "shuffled-rows": _shuffled,
    "column-order": _columns_swapped,
    "quoted-padded": _quoted_and_padded,
}


@pytest.mark.parametrize("kind", sorted(COPIES))
def test_a_copy_of_a_table_is_refused(tmp_path: Path, kind: str) -> None:
    copy = COPIES[kind](tmp_path)
    original = TABLE1 / "table1.csv"
    with pytest.raises(ConfigError) as err:
        check_distinct_tables([("a", original), ("b", TABLE1 / "table2.csv"), ("c", copy)])
    text = str(err.value)
    assert "same records" in text and str(original) in text and str(copy) in text


def test_one_record_changed_is_another_table(tmp_path: Path) -> None:
    lines = _lines()
    lines[3] = lines[3].replace("M", "F", 1) if ",M," in lines[3] else lines[3] + "x"
    changed = tmp_path / "changed.csv.gz"
    changed.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    check_distinct_tables([("a", TABLE1 / "table1.csv"), ("b", changed)])
    dropped = tmp_path / "dropped.csv"
    dropped.write_text("\n".join(_lines()[:-1]) + "\n")
    check_distinct_tables([("a", TABLE1 / "table1.csv"), ("b", dropped)])


def test_federate_refuses_a_gzip_copy_before_starting(tmp_path: Path) -> None:
    copy = _gzip(tmp_path)
    out = tmp_path / "out.csv"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedanon.cli",
            "federate",
            "--spec",
            str(TABLE1 / "run.toml"),
            "--party",
            f"a={TABLE1 / 'table1.csv'}",
            "--party",
            f"b={TABLE1 / 'table2.csv'}",
            "--party",
            f"c={copy}",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert str(TABLE1 / "table1.csv") in proc.stderr and str(copy) in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_tables_told_apart_by_one_column_are_not_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cheap first test (names and the first column's multiset) decides when it can:
    no full digest for tables that differ in Age; a copy still needs (and gets) one."""
    import fedanon.io.sametable as sametable

    full: list[Path] = []
    real = sametable.content_digest

    def counted(path: Path, *on: sametable.Compared) -> str:
        full.append(path)
        return real(path, *on)

    monkeypatch.setattr(sametable, "content_digest", counted)
    lines = _lines()
    older = tmp_path / "older.csv"  # every Age one more: another multiset of Age
    rows = [ln.split(",") for ln in lines[1:]]
    older.write_text(
        "\n".join([lines[0], *(",".join([*r[:3], str(int(r[3]) + 1), *r[4:]]) for r in rows)])
        + "\n"
    )
    check_distinct_tables([("a", TABLE1 / "table1.csv"), ("b", older)])
    assert full == []
    copy = _shuffled(tmp_path)
    with pytest.raises(ConfigError):
        check_distinct_tables([("a", TABLE1 / "table1.csv"), ("b", older), ("c", copy)])
    assert sorted(full) == sorted([TABLE1 / "table1.csv", copy])
