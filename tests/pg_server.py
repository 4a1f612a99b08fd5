"""A real, throw-away PostgreSQL server for tests: initdb into a temporary directory, start it
on a free loopback port, stop it and delete everything afterwards.

PostgreSQL refuses to run as root, so under root the server runs as the ``postgres`` user
(Debian's package creates it) through ``runuser``.  Local socket connections trust the
superuser; TCP connections need a password (scram-sha-256), so tests exercise PGPASSWORD.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

USER = "fedanon"
PASSWORD = "test-only-password"
DATABASE = "ehr"


@dataclass(frozen=True)
class PgServer:
    port: int
    socket_dir: Path

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def admin(self) -> object:
        """A superuser connection over the Unix socket (trust)."""
        import psycopg

        return psycopg.connect(
            host=str(self.socket_dir), port=self.port, user="postgres", dbname=DATABASE
        )


def bindir() -> Path | None:
    """Where initdb and pg_ctl are (Debian: /usr/lib/postgresql/N/bin), or None."""
    for cand in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(cand, "initdb").exists() and Path(cand, "pg_ctl").exists():
            return Path(cand)
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("pg_ctl") else None


def missing_reason() -> str | None:
    if bindir() is None:
        return (
            "PostgreSQL server binaries (initdb, pg_ctl) are not installed (.ci/run installs them)"
        )
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is missing"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def pg_server() -> Iterator[PgServer]:
    bins = bindir()
    assert bins is not None
    as_user: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="fedanon-pg-"))
    if os.geteuid() == 0:
        import pwd

        pw = pwd.getpwnam("postgres")
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, log = tmp / "data", tmp / "server.log"
    port = _free_port()

    def run(*cmd: str) -> None:
        subprocess.run([*as_user, *cmd], check=True, capture_output=True, timeout=120)

    started = False
    try:
        pwfile = tmp / "pw"
        pwfile.write_text("unused-superuser-password\n")
        if as_user:
            shutil.chown(pwfile, "postgres")
        run(
            str(bins / "initdb"), "-D", str(data), "-U", "postgres", "-E", "UTF8",
            "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}",
        )  # fmt: skip
        opts = f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off"
        run(str(bins / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts, "-w", "start")
        started = True
        server = PgServer(port, tmp)
        import psycopg

        with psycopg.connect(
            host=str(tmp), port=port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")
            conn.execute(f"CREATE DATABASE {DATABASE} OWNER {USER}")
        yield server
    finally:
        if started:
            subprocess.run(
                [*as_user, str(bins / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                check=False,
                capture_output=True,
                timeout=120,
            )
        shutil.rmtree(tmp, ignore_errors=True)
