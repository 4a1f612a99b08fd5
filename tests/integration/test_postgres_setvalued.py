"""Set-valued columns from PostgreSQL (a real server, tests/pg_server.py): a text[] array and
a delimited text column give the same codes as the CSV export; NULLs, empty arrays, NULL and
empty elements and an element holding the wire separator are told apart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pg_server import PASSWORD, PgServer, missing_reason, pg_server

from fedanon.errors import DataError
from fedanon.io.setread import read_set_column
from fedanon.io.setvalued import SetColumnSpec
from fedanon.io.sources import PgSource

REASON = missing_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

ITEMS = ("250.00", "401.9", "410.1", "V30")
SPEC = SetColumnSpec("dx", ITEMS, source="taxonomy dx.txt", noun="code")
ROWS = [
    (1, ["401.9", "250.00"], "401.9|250.00"),
    (2, [], ""),
    (3, [" V30 "], " V30 "),
    (4, ["250.00", "401.9", "250.00"], "250.00 | 401.9|250.00"),
    (5, ["410.1"], "410.1"),
]
CSV = 'id,dx\n1,"401.9|250.00"\n2,\n3, V30 \n4,"250.00 | 401.9|250.00"\n5,410.1\n'


@pytest.fixture(scope="module")
def server() -> Iterator[PgServer]:
    with pg_server() as srv:
        import psycopg

        with psycopg.connect(
            host=str(srv.socket_dir), port=srv.port, user="postgres", dbname="ehr"
        ) as conn:
            conn.execute("CREATE TABLE visits (id int, dx text[], dxt varchar(200))")
            conn.execute("CREATE TABLE odd (id int, dx text[])")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO visits VALUES (%s, %s, %s)", ROWS)
                cur.executemany(
                    "INSERT INTO odd VALUES (%s, %s)",
                    [
                        (1, ["V30"]),
                        (2, None),
                        (3, [""]),
                        (4, ["V30", None]),
                        (5, ["V30\x1f410.1"]),
                    ],
                )
            conn.execute("ALTER TABLE visits OWNER TO fedanon")
            conn.execute("ALTER TABLE odd OWNER TO fedanon")
        yield srv


@pytest.fixture()
def pg(server: PgServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))
    return server.url


def test_array_and_text_equal_the_csv(pg: str, tmp_path: Path) -> None:
    csv = tmp_path / "visits.csv"
    csv.write_text(CSV, encoding="utf-8")
    want = read_set_column(csv, SPEC)
    arr = read_set_column(PgSource(pg, query="SELECT id, dx FROM visits ORDER BY id"), SPEC)
    text = read_set_column(PgSource(pg, query="SELECT id, dxt AS dx FROM visits ORDER BY id"), SPEC)
    for got in (arr, text):
        assert np.array_equal(got.indptr, want.indptr)
        assert np.array_equal(got.items, want.items) and got.items.dtype == np.uint8
        assert got.repeats == want.repeats == 1
    assert want.indptr.tolist() == [0, 2, 2, 3, 5, 6]


def _odd(pg: str, where: str) -> PgSource:
    return PgSource(pg, query=f"SELECT id, dx FROM odd WHERE {where} ORDER BY id")


def test_array_nulls_empties_and_separator(pg: str) -> None:
    with pytest.raises(DataError, match="NULL") as e:
        read_set_column(_odd(pg, "id <= 2"), SPEC)
    assert "row 2 of the query result" in e.value.message and e.value.column == "dx"
    lenient = SetColumnSpec("dx", ITEMS, null="empty_set")
    assert read_set_column(_odd(pg, "id <= 2"), lenient).lengths().tolist() == [1, 0]
    with pytest.raises(DataError, match="empty code") as e:  # {""}: one empty item
        read_set_column(_odd(pg, "id IN (1, 3)"), SPEC)
    assert "row 2" in e.value.message and e.value.value == ""
    with pytest.raises(DataError, match="empty code"):  # {V30, NULL}
        read_set_column(_odd(pg, "id = 4"), SPEC)
    with pytest.raises(DataError, match="U\\+001F") as e:
        read_set_column(_odd(pg, "id IN (1, 5)"), SPEC)
    assert "row 2" in e.value.message
    with pytest.raises(DataError, match="unknown code") as e:
        read_set_column(PgSource(pg, query="SELECT ARRAY['V30', '999'] AS dx"), SPEC)
    assert e.value.value == "999" and "row 1" in e.value.message


def test_kkm_reads_postgres_like_its_csv(pg: str, server: PgServer) -> None:
    """(k,k^m)'s RT-dataset from a table with a text[] code column: the same table and
    codes as from the CSV export."""
    import csv

    import psycopg

    from fedanon.kkm.io import read_rt
    from fedanon.kkm.schema import build_kkm_schema
    from fedanon.kkm.spec import load_kkm_spec

    fig1 = Path(__file__).resolve().parents[1] / "unit" / "kkm_fig1"
    with (fig1 / "figure1a.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    with psycopg.connect(
        host=str(server.socket_dir), port=server.port, user="postgres", dbname="ehr"
    ) as conn:
        conn.execute(
            'CREATE TABLE rt (id int, name text, "Age" int, "Origin" text, "Gender" text, '
            '"Disease" text[])'
        )
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO rt VALUES (%s, %s, %s, %s, %s, %s)",
                [(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5].split("|")) for r in rows],
            )
        conn.execute("ALTER TABLE rt OWNER TO fedanon")
    spec, reader = load_kkm_spec(fig1 / "run.toml")
    schema = build_kkm_schema(spec, reader)
    want = read_rt(schema, fig1 / "figure1a.csv")
    got = read_rt(schema, PgSource(pg, query="SELECT * FROM rt ORDER BY id"))
    assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.codes, want.codes)
    for x, y in zip(got.qid, want.qid, strict=True):
        assert np.array_equal(x, y)
