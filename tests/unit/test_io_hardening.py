"""Issue 24, items 9-11: Arrow's reader stopped before a refusal leaves (a corrupt gzip never
aborts the process), records longer than a block are read (or refused at their true line), and
bare carriage returns end lines whatever the input's size."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Any

import pytest

from fedanon.errors import DataError
from fedanon.io import arrowfeed, csvarrow, csvread

EXAMPLES = Path(__file__).parent.parent.parent / "examples"
TABLE1 = EXAMPLES / "table1"
ADULT = EXAMPLES / "adult"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedanon.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _anonymize(spec: Path, data: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return _cli("anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out))


@pytest.fixture()
def case(tmp_path: Path) -> Path:
    for f in TABLE1.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def _table1_lines() -> list[str]:
    return (TABLE1 / "table1.csv").read_text().splitlines()


# item 9: a corrupt gzip --------------------------------------------------------------------


def _corrupt_adult(tmp_path: Path) -> Path:
    blob = bytearray((ADULT / "adult.csv.gz").read_bytes())
    mid = len(blob) // 2
    blob[mid : mid + 20] = b"\x00" * 20
    bad = tmp_path / "bad.csv.gz"
    bad.write_bytes(bytes(blob))
    return bad


class _Watched:
    """Wraps the file handed to Arrow: every block it returns and the file itself are
    watched, so the test sees whether Arrow still holds any when the refusal arrives."""

    def __init__(self, inner: Any, alive: dict[int, Any]) -> None:
        self.inner, self.alive = inner, alive

    def track(self, obj: Any) -> Any:
        alive = self.alive
        ref = weakref.ref(obj, lambda r: alive.pop(id(r), None))
        alive[id(ref)] = ref
        return obj

    def read(self, n: int = -1) -> Any:
        return self.track(memoryview(bytes(self.inner.read(n))))


class _File:
    def __init__(self, watched: _Watched) -> None:
        self.read = watched.read  # a traceback keeps _Watched's frame, not this object
        self.closed = False

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def test_corrupt_gzip_refusal_comes_after_arrow_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.csv as pacsv

    bad = _corrupt_adult(tmp_path)
    alive: dict[int, Any] = {}
    real = pacsv.open_csv

    def open_csv(source: Any, **kw: Any) -> Any:
        w = _Watched(source, alive)
        return real(w.track(_File(w)), **kw)

    monkeypatch.setattr(pacsv, "open_csv", open_csv)
    for _ in range(5):
        with pytest.raises(DataError, match="gzip"):
            b = csvread.read_batches(bad)
            for _batch in b.batches:
                pass
        # nothing waited in between: Arrow's threads must already have dropped every block
        assert not alive, f"Arrow still holds {len(alive)} of our objects after the refusal"


def test_corrupt_gzip_never_aborts_the_process(tmp_path: Path) -> None:
    bad = _corrupt_adult(tmp_path)
    for _ in range(8):
        proc = _anonymize(ADULT / "run.toml", bad, tmp_path / "out.csv")
        assert proc.returncode == 2, proc.stderr
        assert "corrupt gzip" in proc.stderr and "terminate" not in proc.stderr
        assert not (tmp_path / "out.csv").exists()


# item 10: records longer than Arrow's block -------------------------------------------------


def _with_big_id(case: Path, record: int, field: str) -> Path:
    """table1 with record ``record``'s ID replaced by ``field`` (quoted, quotes doubled)."""
    lines = _table1_lines()
    rest = lines[record + 1].split(",", 1)[1]
    lines[record + 1] = '"' + field.replace('"', '""') + '",' + rest
    f = case / "big.csv"
    f.write_text("\n".join(lines) + "\n")
    return f


@pytest.mark.parametrize("newlines", [False, True])
def test_field_over_8_mb_is_read(case: Path, newlines: bool) -> None:
    piece = 'x,"y\nz' if newlines else 'x,"y z'
    field = piece * ((9 << 20) // len(piece))  # 9 MB: over two of Arrow's 4 MB blocks
    big = _with_big_id(case, 3, field)
    proc = _anonymize(case / "run.toml", big, case / "out.csv")
    assert proc.returncode == 0, proc.stderr
    ref = _anonymize(case / "run.toml", case / "table1.csv", case / "ref.csv")
    assert ref.returncode == 0, ref.stderr
    assert (case / "out.csv").read_bytes() == (case / "ref.csv").read_bytes()


def test_fields_longer_than_a_block_keep_line_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvarrow, "BLOCK_BYTES", 1 << 16)
    long = '"' + "a\nb," * 100_000 + '"'  # 400 KB over 100,001 lines
    rows = [b"a,b"] + [b"1,2"] * 5000 + [f"3,{long}".encode()] + [b"1,2"] * 5000 + [b"1,2,3"]
    f = tmp_path / "r.csv"
    f.write_bytes(b"\n".join(rows) + b"\n")
    with pytest.raises(DataError) as err:
        csvread.read_columns(f)
    assert err.value.line == 1 + 5000 + 100_001 + 5000 + 1, str(err.value)
    assert "3 fields" in str(err.value)


def test_record_over_the_limit_is_refused_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvarrow, "BLOCK_BYTES", 1 << 16)
    monkeypatch.setattr(arrowfeed, "MAX_RECORD_BYTES", 1 << 20)
    rows = [b"a,b"] + [b"1,2"] * 30_000 + [b'3,"' + b"q\n" * (1 << 20) + b'"'] + [b"1,2"] * 10
    f = tmp_path / "r.csv"
    f.write_bytes(b"\n".join(rows) + b"\n")
    with pytest.raises(DataError) as err:
        csvread.read_columns(f)
    assert err.value.line == 30_002, str(err.value)
    assert "1 MB" in str(err.value)


# item 11: bare carriage returns -------------------------------------------------------------


@pytest.mark.parametrize("copies", [1, 300])  # table1 (< 64 KB: csv module) and > 64 KB (Arrow)
def test_bare_cr_line_endings_are_read_whatever_the_size(case: Path, copies: int) -> None:
    lines = _table1_lines()
    body = [f"{i},{ln.split(',', 1)[1]}" for i in range(copies) for ln in lines[1:]]
    lf, cr = case / "lf.csv", case / "cr.csv"
    lf.write_bytes(("\n".join([lines[0], *body]) + "\n").encode())
    cr.write_bytes(("\r".join([lines[0], *body]) + "\r").encode())
    assert (lf.stat().st_size > csvread.SMALL_INPUT_BYTES) == (copies > 1)
    a = _anonymize(case / "run.toml", lf, case / "lf_out.csv")
    b = _anonymize(case / "run.toml", cr, case / "cr_out.csv")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert (case / "lf_out.csv").read_bytes() == (case / "cr_out.csv").read_bytes()


def test_bare_cr_gzip_and_quoted_cr_inside_fields(case: Path) -> None:
    lines = _table1_lines()
    lines[2] = '"a\rb",' + lines[2].split(",", 1)[1]  # a CR inside a quoted (identifier) field
    data = ("\r".join(lines) + "\r").encode()
    (case / "cr.csv.gz").write_bytes(gzip.compress(data))
    proc = _anonymize(case / "run.toml", case / "cr.csv.gz", case / "out.csv")
    assert proc.returncode == 0, proc.stderr
    ref = _anonymize(case / "run.toml", case / "table1.csv", case / "ref.csv")
    assert (case / "out.csv").read_bytes() == (case / "ref.csv").read_bytes(), ref.stderr


# a refusal of the reader's consumer (attack a10: a daemon slow to stop after data refusals) ---


def _adult_csv(tmp_path: Path, rows: int = 3000) -> Path:
    """The first ``rows`` records of Adult as a plain CSV (over 64 KB: Arrow reads it)."""
    with gzip.open(ADULT / "adult.csv.gz", "rt", encoding="utf-8") as fh:
        lines = [next(fh) for _ in range(rows + 1)]
    f = tmp_path / "adult.csv"
    f.write_text("".join(lines))
    assert f.stat().st_size > csvread.SMALL_INPUT_BYTES
    return f


def _watch_arrow(monkeypatch: pytest.MonkeyPatch) -> dict[int, Any]:
    """What Arrow holds of ours: the file handed to it and every block it read."""
    import pyarrow.csv as pacsv

    alive: dict[int, Any] = {}
    real = pacsv.open_csv

    def open_csv(source: Any, **kw: Any) -> Any:
        w = _Watched(source, alive)
        return real(w.track(_File(w)), **kw)

    monkeypatch.setattr(pacsv, "open_csv", open_csv)
    return alive


def test_closing_the_batches_stops_arrow_mid_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import inspect

    alive = _watch_arrow(monkeypatch)
    b = csvread.read_batches(_adult_csv(tmp_path))
    next(b.batches)  # the consumer refuses this batch (a value outside a domain) and stops
    assert alive  # Arrow is reading
    b.close()
    assert inspect.getgeneratorstate(b.batches) == inspect.GEN_CLOSED  # type: ignore[arg-type]
    assert not alive, f"Arrow still holds {len(alive)} of our objects after close()"


def test_a_kept_domain_refusal_keeps_nothing_of_arrow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A daemon keeps a refusal's exception a while (its traceback holds the encoder's frames,
    # and through them the batches): Arrow's reader must be stopped before the refusal
    # leaves, not when the generator is collected -- at the interpreter's exit, where every
    # release waited its 10 s in vain.
    from fedanon.io.table import build_schema, encode_table
    from fedanon.model.spec import load_spec

    spec_path = tmp_path / "run.toml"
    text = (ADULT / "run-discernibility.toml").read_text()
    spec_path.write_text(text.replace("domain = [17, 91]", "domain = [17, 30]", 1))
    (tmp_path / "taxonomies").symlink_to(ADULT / "taxonomies")
    spec, reader = load_spec(spec_path)
    schema = build_schema(spec, reader)
    data = _adult_csv(tmp_path)
    alive = _watch_arrow(monkeypatch)
    kept: list[BaseException] = []
    for _ in range(3):
        with pytest.raises(DataError, match="outside the declared domain") as err:
            encode_table(schema, data, memory_budget="off")
        kept.append(err.value)
        assert err.value.__traceback__ is not None
        assert not alive, f"Arrow still holds {len(alive)} of our objects after the refusal"


def test_a_release_left_until_exit_does_not_wait(tmp_path: Path) -> None:
    # the safety net: a reader nobody closed, collected as the interpreter exits (Arrow's
    # threads cannot take the GIL any more, waiting for them is in vain)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from fedanon.io.csvread import read_batches\n"
        f"b = read_batches(Path({str(_adult_csv(tmp_path))!r}))\n"
        "it = b.batches\n"
        "cycle = [it, next(it)]\n"
        "cycle.append(cycle)\n"
    )
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    assert took < arrowfeed.RELEASE_TIMEOUT_S / 2, f"exit took {took:.1f} s"
