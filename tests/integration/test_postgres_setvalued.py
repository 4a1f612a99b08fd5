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
