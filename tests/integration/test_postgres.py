"""PostgreSQL as a source, against a real server started for these tests (tests/pg_server.py):
the same release as from the CSV export, typed columns checked like CSV cells, credentials
only from PGPASSWORD / .pgpass."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import PASSWORD, PgServer, missing_reason, pg_server

from fedanon.apispec import Spec
from fedanon.errors import DataError
from fedanon.io.sources import PgSource
from fedanon.io.table import build_schema, encode_table
from fedanon.model.spec import load_spec

REASON = missing_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

ADULT_DDL = """
CREATE TABLE encounters (
  mrn bigserial PRIMARY KEY,
  age integer, workclass text, fnlwgt integer, education text, "education-num" smallint,
  "marital-status" text, occupation text, relationship varchar(40), race text, sex text,
  "capital-gain" integer, "capital-loss" numeric(8, 0), "hours-per-week" integer,
  "native-country" text, "salary-class" text, admitted date DEFAULT '2020-01-01'
)
"""
COLUMNS = (
    'age, workclass, fnlwgt, education, "education-num", "marital-status", occupation, '
    'relationship, race, sex, "capital-gain", "capital-loss", "hours-per-week", '
    '"native-country", "salary-class"'
)
QUERY = f"SELECT {COLUMNS} FROM encounters ORDER BY mrn"


@pytest.fixture(scope="module")
def server(adult_csv: Path) -> Iterator[PgServer]:
    with pg_server() as srv:
        import psycopg

        with psycopg.connect(
            host=str(srv.socket_dir), port=srv.port, user="postgres", dbname="ehr"
        ) as conn:
            conn.execute(ADULT_DDL)
            conn.execute("ALTER TABLE encounters OWNER TO fedanon")
            with conn.cursor() as cur:
                copy_sql = f"COPY encounters ({COLUMNS}) FROM STDIN WITH (FORMAT csv, HEADER)"
                with cur.copy(copy_sql) as copy, adult_csv.open("rb") as fh:
                    while block := fh.read(1 << 20):
                        copy.write(block)
        yield srv


@pytest.fixture()
def pg_env(server: PgServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Credentials the way a hospital gives them: PGPASSWORD; no ~/.pgpass."""
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))
    return {**os.environ}


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedanon.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize("spec_name", ["run.toml", "run-discernibility.toml"])
def test_postgres_release_equals_the_csv_release(
    server: PgServer,
    pg_env: dict[str, str],
    adult_dir: Path,
    adult_csv: Path,
    tmp_path: Path,
    spec_name: str,
) -> None:
    spec = str(adult_dir / spec_name)
    csv_out, pg_out = tmp_path / "csv.csv", tmp_path / "pg.csv"
    proc = _cli("anonymize", "--spec", spec, "--input", str(adult_csv), "--output", str(csv_out),
                env=pg_env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    proc = _cli("anonymize", "--spec", spec, "--input", server.url, "--query", QUERY,
                "--output", str(pg_out), env=pg_env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert pg_out.read_bytes() == csv_out.read_bytes()
    assert PASSWORD not in proc.stderr + proc.stdout


def test_table_source_reads_only_the_declared_columns(
    server: PgServer, pg_env: dict[str, str], adult_dir: Path, adult_csv: Path
) -> None:
    """table = "encounters": its extra columns (mrn, a date) must be declared; as
    identifiers they are never selected, so their types do not matter."""
    spec, reader = load_spec(adult_dir / "run.toml")
    schema = build_schema(spec, reader)
    with pytest.raises(DataError, match="not declared"):
        encode_table(schema, PgSource(server.url, table="encounters"))
    text = (
        (adult_dir / "run.toml")
        .read_text()
        .replace('taxonomy = "taxonomies/', f'taxonomy = "{adult_dir}/taxonomies/')
    )
    text += '\n[[attribute]]\nname = "mrn"\nrole = "identifier"\n'
    text += '\n[[attribute]]\nname = "admitted"\nrole = "identifier"\n'
    from fedanon.model.spec import parse_spec

    spec2 = parse_spec(text, "run.toml")
    schema2 = build_schema(spec2, lambda rel: Path(rel).read_text())
    from_db = encode_table(schema2, PgSource(server.url, table="encounters"))
    from_csv = encode_table(schema, adult_csv)
    assert from_db.n_rows == from_csv.n_rows == 45223
    assert sorted(map(tuple, from_db.qid_leaves.T.tolist())) == sorted(
        map(tuple, from_csv.qid_leaves.T.tolist())
    )


def test_null_and_type_errors_name_the_row_and_column(
    server: PgServer, pg_env: dict[str, str], adult_dir: Path
) -> None:
    spec, reader = load_spec(adult_dir / "run.toml")
    schema = build_schema(spec, reader)
    with_null = QUERY.replace(
        "SELECT age,", "SELECT CASE WHEN mrn = 7 THEN NULL ELSE age END AS age,"
    )
    with pytest.raises(DataError) as err:
        encode_table(schema, PgSource(server.url, query=with_null))
    assert err.value.column == "age" and "row 7 of the query result" in str(err.value)
    assert "NULL" in str(err.value)
    as_date = QUERY.replace("SELECT age,", "SELECT admitted AS age,")
    with pytest.raises(DataError) as err:
        encode_table(schema, PgSource(server.url, query=as_date))
    assert err.value.column == "age" and "type" in str(err.value)
    bad_value = QUERY.replace(
        "SELECT age,", "SELECT CASE WHEN mrn = 9 THEN 200 ELSE age END AS age,"
    )
    with pytest.raises(DataError) as err:
        encode_table(schema, PgSource(server.url, query=bad_value))
    assert err.value.column == "age" and "row 9 of the query result" in str(err.value)
    assert err.value.value == "200"


def test_credentials_come_only_from_the_environment(
    server: PgServer, adult_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))
    spec, reader = load_spec(adult_dir / "run.toml")
    schema = build_schema(spec, reader)
    with pytest.raises(DataError, match="cannot connect"):
        encode_table(schema, PgSource(server.url, query=QUERY))
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"127.0.0.1:{server.port}:ehr:fedanon:{PASSWORD}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    assert encode_table(schema, PgSource(server.url, query=QUERY)).n_rows == 45223
    out = tmp_path / "o.csv"
    env = {**os.environ}
    bad_url = server.url.replace("fedanon@", f"fedanon:{PASSWORD}@")
    proc = _cli("anonymize", "--spec", str(adult_dir / "run.toml"), "--input", bad_url,
                "--query", QUERY, "--output", str(out), env=env)  # fmt: skip
    assert proc.returncode == 2 and PASSWORD not in proc.stderr and not out.exists()


def test_the_database_is_only_read(
    server: PgServer, pg_env: dict[str, str], adult_dir: Path
) -> None:
    spec, reader = load_spec(adult_dir / "run.toml")
    schema = build_schema(spec, reader)
    sneaky = "SELECT * FROM (DELETE FROM encounters RETURNING *) AS d"
    with pytest.raises(DataError):
        encode_table(schema, PgSource(server.url, query=sneaky))
    with server.admin() as conn:  # type: ignore[attr-defined]
        assert conn.execute("SELECT count(*) FROM encounters").fetchone()[0] == 45223


def test_a_hospital_serving_from_postgresql_joins_a_federation(
    server: PgServer, pg_env: dict[str, str], adult_dir: Path, adult_csv: Path, tmp_path: Path
) -> None:
    """party.toml data = postgresql://... + query: the daemon reads its share from the
    database at Prepare; the federated release equals the centralized one over all rows."""
    import subprocess
    import time

    from conftest import TEST_POLICY, accepted_runs, multiset, read_rows, write_rows

    from fedanon.centralized import anonymize_file
    from fedanon.leader.federate import Daemon, federation_config, stop
    from fedanon.leader.localdaemons import party_toml
    from fedanon.leader.run import run_federation
    from fedanon.security import certs

    header, rows = read_rows(adult_csv)
    work = tmp_path / "work"
    work.mkdir()
    certdir = work / "certs"
    certs.init_ca(certdir)
    certs.issue(certdir, "leader", "leader")
    started: list[Daemon] = []
    try:
        for i, name in enumerate(("h0", "h1", "h2")):
            certs.issue(certdir, name, "party")
            data = work / f"{name}.csv"
            write_rows(data, header, rows[i::3])  # mrn = row + 1: h0 holds mrn % 3 == 1
            text = party_toml(name, data, certdir, None, TEST_POLICY)
            if name == "h0":
                query = QUERY.replace("ORDER BY mrn", "WHERE mrn % 3 = 1 ORDER BY mrn")
                text = text.replace(
                    f'data = "{data.resolve()}"', f"data = \"{server.url}\"\nquery = '''{query}'''"
                )
                data.unlink()  # the database is its only source
            cfg = work / f"{name}.toml"
            cfg.write_text(text)
            port_file = work / f"{name}.port"
            with (work / f"{name}.log").open("wb") as log:
                cmd = [sys.executable, "-m", "fedanon.party", "serve", "--config", str(cfg)]
                proc = subprocess.Popen([*cmd, "--port-file", str(port_file)], stdout=log,
                                        stderr=subprocess.STDOUT)  # fmt: skip
            started.append(Daemon(name, proc, port_file, cfg))
        end = time.monotonic() + 30
        for d in started:
            while not d.port_file.exists():
                assert d.proc.poll() is None, (work / f"{d.name}.log").read_text()
                assert time.monotonic() < end, f"{d.name} did not start"
                time.sleep(0.02)
            d.port = int(d.port_file.read_text())
        spec = adult_dir / "run.toml"
        cfg = federation_config(started, work, spec, tmp_path / "fed.csv", tmp_path / "fed.json")
        out = run_federation(cfg)
    finally:
        stop(started)
    central, _ = anonymize_file(
        Spec.from_toml(spec), adult_csv, tmp_path / "central.csv", None, False
    )
    assert multiset(tmp_path / "fed.csv") == multiset(tmp_path / "central.csv")
    assert out.report["specializations"] == central["specializations"]
    log = (work / "h0.log").read_text()
    assert accepted_runs(log) and PASSWORD not in log
