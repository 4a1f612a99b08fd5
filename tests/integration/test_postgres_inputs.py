"""PostgreSQL inputs as a hospital's IT writes them, against a real server (tests/pg_server.py):
the paper's Table I with a free-text ``other`` column, read through a query with a trailing SQL
comment, with notes longer than Arrow's block, from an empty result, and from a URL carrying a
client key's passphrase."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import PASSWORD, PgServer, missing_reason, pg_server

REASON = missing_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

COLUMNS = ("ID", "Job", "Sex", "Age", "Transfuse", "Surgery", "Note")
SELECT = 'SELECT "ID", "Job", "Sex", "Age", "Transfuse", "Surgery", "Note" FROM notes'
LONG = 5 << 20  # longer than the 4 MB block Arrow reads


@pytest.fixture(scope="module")
def server(table1_dir: Path) -> Iterator[PgServer]:
    with open(table1_dir / "table1.csv", newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    with pg_server() as srv:
        import psycopg

        with psycopg.connect(
            host=str(srv.socket_dir), port=srv.port, user="postgres", dbname="ehr"
        ) as conn:
            conn.execute(
                'CREATE TABLE notes ("ID" integer, "Job" char(12), "Sex" varchar(3), '
                '"Age" integer, "Transfuse" text, "Surgery" text, "Note" text)'
            )
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO notes VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    [(*r[:6], f'note {r[0]}, "quoted"\nsecond line') for r in rows],
                )
            conn.execute("ALTER TABLE notes OWNER TO fedanon")
        yield srv


@pytest.fixture()
def work(table1_dir: Path, tmp_path: Path) -> Path:
    for name in ("job.txt", "sex.txt", "age.txt"):
        (tmp_path / name).write_text((table1_dir / name).read_text())
    text = (table1_dir / "run.toml").read_text()
    (tmp_path / "run.toml").write_text(text + '\n[[attribute]]\nname = "Note"\nrole = "other"\n')
    return tmp_path


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PGPASSWORD": PASSWORD, "PGPASSFILE": str(tmp_path / "no-pgpass")}


def _anonymize(work: Path, *source: str) -> subprocess.CompletedProcess[str]:
    out = work / "released.csv"
    out.unlink(missing_ok=True)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "fedanon.cli",
            "anonymize",
            "--spec",
            str(work / "run.toml"),
            *source,
            "--output",
            str(out),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=_env(work),
    )


def _csv_release(server: PgServer, work: Path, query: str) -> bytes:
    """The release of the same rows exported to CSV."""
    with server.admin() as conn, conn.cursor() as cur:  # type: ignore[attr-defined]
        cur.execute(query)
        rows = cur.fetchall()
    data = work / "export.csv"
    with data.open("w", newline="") as fh:
        csv.writer(fh).writerows([COLUMNS, *rows])
    proc = _anonymize(work, "--input", str(data))
    assert proc.returncode == 0, proc.stderr
    return (work / "released.csv").read_bytes()


def test_a_query_ending_in_a_comment_is_read(server: PgServer, work: Path) -> None:
    """psql runs 'SELECT ... -- a comment'; fedanon wrapped it as '(SELECT ... -- ...) AS q',
    whose closing parenthesis the comment swallowed (a syntax error)."""
    query = f'{SELECT} ORDER BY "ID" -- Table I, for the transfusion study'
    proc = _anonymize(work, "--input", server.url, "--query", query)
    assert proc.returncode == 0, proc.stderr
    released = (work / "released.csv").read_bytes()
    assert released == _csv_release(server, work, f'{SELECT} ORDER BY "ID"')


def test_notes_longer_than_a_block_are_read(server: PgServer, work: Path) -> None:
    """Every note longer than Arrow's 4 MB block: the COPY stream is handed over in blocks that
    end at a record boundary, as a CSV file is (it failed as 'a value Arrow cannot read')."""
    query = (
        'SELECT "ID", "Job", "Sex", "Age", "Transfuse", "Surgery", '
        f'"Note" || repeat(\'x\', {LONG}) AS "Note" FROM notes ORDER BY "ID"'
    )
    proc = _anonymize(work, "--input", server.url, "--query", query)
    assert proc.returncode == 0, proc.stderr
    released = (work / "released.csv").read_bytes()
    assert len(released) > 11 * LONG
    assert released == _csv_release(server, work, query)


@pytest.mark.parametrize(
    "source",
    [("--query", f"{SELECT} WHERE false"), ("--query", f"{SELECT} LIMIT 0")],
)
def test_an_empty_result_is_named_as_such(
    server: PgServer, work: Path, source: tuple[str, str]
) -> None:
    proc = _anonymize(work, "--input", server.url, *source)
    assert proc.returncode == 2
    assert "the query returned no rows" in proc.stderr, proc.stderr
    assert not (work / "released.csv").exists()


def test_an_empty_table_is_named_as_such(server: PgServer, work: Path) -> None:
    with server.admin() as conn:  # type: ignore[attr-defined]
        conn.execute("CREATE TABLE IF NOT EXISTS empty (LIKE notes)")
        conn.execute("ALTER TABLE empty OWNER TO fedanon")
    proc = _anonymize(work, "--input", server.url, "--table", "empty")
    assert proc.returncode == 2
    assert "no rows" in proc.stderr and "table empty" in proc.stderr, proc.stderr


def test_a_client_key_passphrase_in_the_url_is_refused(server: PgServer, work: Path) -> None:
    """sslpassword (the client key's passphrase) is a secret like the password: it was kept in
    the source's name, shown in every error and written to the ledger."""
    url = f"{server.url}?sslpassword=key-passphrase-xyz"
    proc = _anonymize(work, "--input", url, "--query", SELECT)
    assert proc.returncode == 2
    assert "key-passphrase-xyz" not in proc.stderr + proc.stdout
    assert "password" in proc.stderr


@pytest.mark.parametrize(
    ("expr", "named"),
    [
        ("'Urology'::surgery", "surgery"),  # an enum type: its oid is the database's own
        ("true", "boolean"),
        ("date '2020-01-01'", "date"),
        ("gen_random_uuid()", "uuid"),
    ],
)
def test_a_type_fedanon_does_not_read_is_named(
    server: PgServer, work: Path, expr: str, named: str
) -> None:
    """The refusal named only the type's oid ('type oid 16387'), which a hospital's IT cannot
    look up without the catalog; it now says the type's SQL name."""
    with server.admin() as conn:  # type: ignore[attr-defined]
        conn.execute(
            "DO $$ BEGIN CREATE TYPE surgery AS ENUM ('Plastic', 'Transgender', 'Urology', "
            "'Vascular'); EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        )
    query = SELECT.replace('"Surgery"', f'{expr} AS "Surgery"')
    proc = _anonymize(work, "--input", server.url, "--query", query)
    assert proc.returncode == 2
    assert f"(type {named})" in proc.stderr and "'Surgery'" in proc.stderr, proc.stderr
    assert "cast it in the query" in proc.stderr
    assert not (work / "released.csv").exists()
