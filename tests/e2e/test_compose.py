"""End to end: the federation of deploy/docker-compose.yml on this machine's Docker.

Builds the wheels and the image (on the local Debian base of deploy/build-base.sh unless
BASE_IMAGE says otherwise), then, each test with a compose project of its own:

* a joint run of three hospitals and the leader releases a table that satisfies
  LKC-privacy and equals, as a multiset of rows, the centralized ``fedanon anonymize`` of
  the same data;
* stopping one hospital in the middle of a run (once every hospital has accepted it; the
  hospital is slowed to a twentieth of a CPU first so that the run lasts long enough) makes
  the leader exit non-zero, name that hospital, and write no output;
* each member's private key is in a volume that only that member's containers mount (the
  CA key only in the CA step): a hospital sees its own key and no other, nowhere in its file
  system, and the hand-over volume holds no private key;
* hospitals cannot reach each other (pairwise sums: each sits on a network of its own that
  only the leader shares), neither by name nor by address;
* each hospital's privacy ledger is on its own writable volume (/ledger) while /config is
  read-only: the run's rows are in it, the chain is intact, and it survives a restart;
* ``compose down`` leaves no container, network or volume of the project behind.

Skipped, with the reason, where Docker or compose cannot be used.  Environment:
BASE_IMAGE (default fedanon-base:bookworm), FEDANON_E2E_IMAGE (default fedanon:e2e),
FEDANON_E2E_TIMEOUT (seconds one joint run may take, default 900).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
EXAMPLES = REPO / "examples"
SPEC = EXAMPLES / "adult" / "run.toml"
HOSPITALS = ("hospital-a", "hospital-b", "hospital-c")
BASE_IMAGE = os.environ.get("BASE_IMAGE", "fedanon-base:bookworm")
IMAGE = os.environ.get("FEDANON_E2E_IMAGE", "fedanon:e2e")
RUN_TIMEOUT = float(os.environ.get("FEDANON_E2E_TIMEOUT", "900"))
LABEL = "com.docker.compose.project"
# What a party daemon logs once it has accepted a run from the leader (party/prepare.py,
# accepted_line: after its policy checks, before any statistics leave it).
PREPARED = re.compile(r"run [0-9a-f]+ accepted: leader=leader ")


def _run(
    cmd: Sequence[str],
    *,
    timeout: float = 600,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        list(cmd),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}\n"
            f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
        )
    return proc


def _compose_command() -> list[str] | None:
    for cmd in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(cmd[0]) is None:
            continue
        try:
            if _run([*cmd, "version"], timeout=60, check=False).returncode == 0:
                return cmd
        except (OSError, subprocess.TimeoutExpired):
            continue
    return None


@pytest.fixture(scope="session")
def compose_cmd() -> list[str]:
    """The compose command, or skip (with the reason) where Docker cannot be used."""
    if shutil.which("docker") is None:
        pytest.skip("docker is not installed")
    try:
        info = _run(["docker", "info"], timeout=60, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip("docker info did not answer within 60 s")
    if info.returncode != 0:
        last = (info.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"docker info failed: {last}")
    cmd = _compose_command()
    if cmd is None:
        pytest.skip("neither 'docker compose' nor 'docker-compose' works")
    return cmd


def _env() -> dict[str, str]:
    return {**os.environ, "FEDANON_IMAGE": IMAGE, "BASE_IMAGE": BASE_IMAGE}


@pytest.fixture(scope="session")
def image(compose_cmd: list[str]) -> str:
    """The fedanon image, built from this working tree through the compose file."""
    if BASE_IMAGE.startswith("fedanon-base:"):
        _run([str(DEPLOY / "build-base.sh")], timeout=1800, env=_env())
    _run([str(DEPLOY / "build-wheels.sh")], timeout=900)
    project = f"fedanon-e2e-build-{uuid.uuid4().hex[:8]}"
    _run(
        [*compose_cmd, "-p", project, "-f", str(COMPOSE_FILE), "build", "ca"],
        timeout=1800,
        env=_env(),
    )
    _assert_mount_points_belong_to_the_daemon(IMAGE)
    return IMAGE


# The mount points of the volumes the unprivileged user writes.  Docker gives a fresh named
# volume the owner of the image's directory it is mounted on, and root when the image has no
# such directory: the daemon (uid 10001) then cannot create its ledger, exits, and compose
# only says that the hospital is "unhealthy".
WRITABLE_MOUNTS = ("/certs", "/data", "/out", "/ca", "/exchange", "/ledger")


def _assert_mount_points_belong_to_the_daemon(image: str) -> None:
    proc = _run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "/bin/sh",
            image,
            "-c",
            'for d in "$@"; do printf "%s %s\\n" "$d" "$(stat -c %u:%g "$d" 2>/dev/null)"; done',
            "sh",
            *WRITABLE_MOUNTS,
        ]
    )
    owners = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    wrong = {
        d: owners.get(d, "") or "missing" for d in WRITABLE_MOUNTS if owners.get(d) != "10001:10001"
    }
    assert not wrong, f"{image}: mount points not owned by the daemon's user 10001: {wrong}"


class Project:
    """One compose project (its own containers, network and volumes) of the demo file."""

    def __init__(self, compose_cmd: list[str], name: str) -> None:
        self.cmd = [*compose_cmd, "-p", name, "-f", str(COMPOSE_FILE)]
        self.name = name

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> str:
        proc = _run([*self.cmd, *args], timeout=timeout, check=False, env=_env())
        if check and proc.returncode != 0:
            # compose names a failed dependency only ("Container ... is unhealthy", also for
            # one that exited): the containers' own logs say why.
            raise AssertionError(
                f"compose {' '.join(args)} exited {proc.returncode}\n"
                f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}\n"
                f"--- states\n{self.states()}\n--- logs\n{self.all_logs()[-8000:]}"
            )
        return proc.stdout + proc.stderr

    def states(self) -> str:
        return _run(
            [
                "docker",
                "ps",
                "-a",
                "--filter",
                f"label={LABEL}={self.name}",
                "--format",
                "{{.Names}}: {{.Status}}",
            ],
            check=False,
        ).stdout

    def container(self, service: str) -> str:
        out = _run(
            [
                "docker",
                "ps",
                "-aq",
                "--filter",
                f"label={LABEL}={self.name}",
                "--filter",
                f"label=com.docker.compose.service={service}",
            ]
        ).stdout.split()
        assert len(out) == 1, f"expected one {service} container, found {out}"
        return out[0]

    def logs(self, service: str) -> str:
        proc = _run(["docker", "logs", self.container(service)], check=False)
        return proc.stdout + proc.stderr

    def all_logs(self) -> str:
        return self.compose("logs", "--no-color", check=False)

    def wait_healthy(self, services: Sequence[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            states = {
                svc: _run(
                    ["docker", "inspect", "-f", "{{.State.Health.Status}}", self.container(svc)]
                ).stdout.strip()
                for svc in services
            }
            if all(state == "healthy" for state in states.values()):
                return
            assert time.monotonic() < deadline, f"not healthy: {states}\n{self.all_logs()[-8000:]}"
            time.sleep(1)

    def wait(self, service: str, timeout: float) -> int:
        try:
            out = _run(["docker", "wait", self.container(service)], timeout=timeout).stdout
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{service} did not finish within {timeout:.0f} s\n{self.all_logs()[-8000:]}"
            ) from None
        return int(out.strip())

    def volumes(self, service: str) -> set[str]:
        """The named volumes ``service``'s container mounts, without the project prefix."""
        out = _run(
            [
                "docker",
                "inspect",
                "-f",
                '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}',
                self.container(service),
            ]
        ).stdout.split()
        return {re.sub(rf"^{re.escape(self.name)}[-_]", "", name) for name in out}

    def exec(self, service: str, *cmd: str) -> subprocess.CompletedProcess[str]:
        return _run(["docker", "exec", self.container(service), *cmd], check=False)

    def copy_out(self, service: str, path: str, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        _run(["docker", "cp", f"{self.container(service)}:{path}/.", str(dest)])

    def down(self) -> None:
        self.compose("down", "--volumes", "--remove-orphans", "--timeout", "5", check=False)

    def leftovers(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for kind, cmd in (
            ("containers", ["docker", "ps", "-a", "--format", "{{.Names}}"]),
            ("networks", ["docker", "network", "ls", "--format", "{{.Name}}"]),
            ("volumes", ["docker", "volume", "ls", "--format", "{{.Name}}"]),
        ):
            labelled = _run([*cmd, "--filter", f"label={LABEL}={self.name}"]).stdout.split()
            # Compose names everything it makes "<project>_..." or "<project>-...".
            named = [n for n in _run(cmd).stdout.split() if re.match(rf"{self.name}[-_]", n)]
            found[kind] = sorted(set(labelled) | set(named))
        return found


@pytest.fixture
def project(compose_cmd: list[str], image: str) -> Iterator[Project]:
    proj = Project(compose_cmd, f"fedanon-e2e-{uuid.uuid4().hex[:10]}")
    try:
        yield proj
    finally:
        proj.down()


def _down_leaves_nothing(project: Project) -> None:
    project.down()
    assert project.leftovers() == {"containers": [], "networks": [], "volumes": []}


# Which named volumes each service may mount: a member's key volume only in its own steps.
EXPECTED_VOLUMES = {
    **{f"request-{m}": {f"certs-{m}", "exchange"} for m in ("a", "b", "c", "leader")},
    **{f"install-{m}": {f"certs-{m}", "exchange"} for m in ("a", "b", "c", "leader")},
    "ca": {"ca", "exchange"},
    **{f"data-{m}": {f"data-{m}"} for m in ("a", "b", "c")},
    **{f"hospital-{m}": {f"certs-{m}", f"data-{m}", f"ledger-{m}"} for m in ("a", "b", "c")},
    "leader": {"certs-leader", "out"},
}
# Every private key file a process in a hospital container can find, outside /proc etc.
FIND_KEYS = (
    "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o "
    "\\( -name '*.key' -o -name '*.key.*' \\) -print 2>/dev/null; true"
)


def _assert_each_member_holds_only_its_own_key(project: Project, image: str) -> None:
    mounted = {service: project.volumes(service) for service in EXPECTED_VOLUMES}
    assert mounted == EXPECTED_VOLUMES
    for hospital in HOSPITALS:
        listing = project.exec(hospital, "ls", "-A", "/certs")
        assert listing.returncode == 0, listing.stderr
        assert sorted(listing.stdout.split()) == sorted(
            ["ca.pem", f"{hospital}.csr", f"{hospital}.key", f"{hospital}.pem"]
        )
        keys = project.exec(hospital, "/bin/sh", "-c", FIND_KEYS)
        assert keys.stdout.split() == [f"/certs/{hospital}.key"], keys.stdout
        for other in [*(h for h in HOSPITALS if h != hospital), "leader", "ca"]:
            peek = project.exec(hospital, "ls", f"/certs/{other}.key", f"/ca/{other}.key")
            assert peek.returncode != 0 and not peek.stdout.strip(), (hospital, other, peek)
    # The hand-over volume carries requests and certificates only.
    exchange = _run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            f"{project.name}_exchange:/exchange:ro",
            "--entrypoint",
            "/bin/sh",
            image,
            "-c",
            "ls -A /exchange; grep -l 'PRIVATE KEY' /exchange/* || true",
        ]
    ).stdout.split()
    names = ["hospital-a", "hospital-b", "hospital-c", "leader"]
    assert sorted(exchange) == sorted(
        ["ca.pem", *(f"{n}.csr" for n in names), *(f"{n}.pem" for n in names)]
    )


def _assert_hospitals_cannot_reach_each_other(project: Project) -> None:
    """Each hospital reaches its own daemon; another hospital neither by name nor address."""
    address = {
        h: _run(
            [
                "docker",
                "inspect",
                "-f",
                "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
                project.container(h),
            ]
        ).stdout.split()
        for h in HOSPITALS
    }
    probe = (
        "import socket, sys\n"
        "for host in sys.argv[1:]:\n"
        "    try:\n"
        "        socket.create_connection((host, 50051), timeout=3).close()\n"
        "        print(host, 'reached')\n"
        "    except OSError as exc:\n"
        "        print(host, 'unreachable', type(exc).__name__)\n"
    )
    for hospital in HOSPITALS:
        others = [h for h in HOSPITALS if h != hospital]
        targets = [hospital, *others, *(ip for h in others for ip in address[h])]
        proc = project.exec(hospital, "python", "-c", probe, *targets)
        assert proc.returncode == 0, proc.stderr
        seen = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
        assert seen.pop(hospital) == "reached", (hospital, proc.stdout)
        assert len(seen) == len(targets) - 1, proc.stdout
        reached = [t for t, what in seen.items() if what == "reached"]
        assert not reached, f"{hospital} reaches {reached}"


def _ledger_rows(project: Project, hospital: str) -> list[dict[str, object]]:
    config = f"/config/party-{hospital[-1]}.toml"
    verify = project.exec(hospital, "fedanon", "party", "ledger", "verify", "--config", config)
    assert verify.returncode == 0 and "is intact" in verify.stdout, (hospital, verify)
    show = project.exec(
        hospital, "fedanon", "party", "ledger", "show", "--json", "--config", config
    )
    assert show.returncode == 0, (hospital, show.stderr)
    rows = json.loads(show.stdout)
    assert isinstance(rows, list)
    return rows


def _assert_ledgers_persist_and_config_is_read_only(project: Project) -> None:
    for hospital in HOSPITALS:
        config = project.exec(hospital, "touch", "/config/probe")
        assert config.returncode != 0 and "Read-only file system" in config.stderr, config
        ledger = project.exec(
            hospital, "/bin/sh", "-c", "touch /ledger/.probe && rm /ledger/.probe"
        )
        assert ledger.returncode == 0, f"{hospital}: /ledger is not writable: {ledger.stderr}"
        events = [row["event"] for row in _ledger_rows(project, hospital)]
        assert events[:1] == ["start"] and "reserved" in events and "released" in events, events
    # The ledger outlives the daemon: a restarted hospital appends to the same chain.
    hospital = HOSPITALS[0]
    before = _ledger_rows(project, hospital)
    project.compose("restart", hospital, timeout=300)
    project.wait_healthy([hospital], timeout=300)
    after = _ledger_rows(project, hospital)
    assert after[: len(before)] == before
    assert [row["event"] for row in after[len(before) :]] == ["start"], after


def _rows(path: Path) -> tuple[list[str], Counter[tuple[str, ...]]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, Counter(tuple(row) for row in reader if row)


def _centralized(image: str, dest: Path) -> Path:
    """``fedanon anonymize`` of the whole Adult table, in the same image."""
    proc = _run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            f"{EXAMPLES}:/examples:ro",
            "--entrypoint",
            "/bin/sh",
            image,
            "-euc",
            "gunzip -c /examples/adult/adult.csv.gz > /tmp/adult.csv\n"
            "fedanon anonymize --spec /examples/adult/run.toml --input /tmp/adult.csv"
            " --output /tmp/released.csv >&2\n"
            "cat /tmp/released.csv",
        ],
        timeout=RUN_TIMEOUT,
    )
    dest.write_text(proc.stdout, encoding="utf-8")
    return dest


def test_joint_run_is_lkc_private_and_equals_centralized(
    project: Project, image: str, tmp_path: Path
) -> None:
    import checker  # tests/checker.py, the independent LKC-privacy checker

    project.compose("up", "-d", timeout=900)
    rc = project.wait("leader", RUN_TIMEOUT)
    assert rc == 0, f"leader exited {rc}\n{project.all_logs()[-8000:]}"

    out = tmp_path / "out"
    project.copy_out("leader", "/out", out)
    released = out / "released.csv"
    assert released.is_file(), f"no released.csv in {sorted(p.name for p in out.iterdir())}"
    assert (out / "report.json").is_file()

    _assert_each_member_holds_only_its_own_key(project, image)
    _assert_hospitals_cannot_reach_each_other(project)
    _assert_ledgers_persist_and_config_is_read_only(project)

    result = checker.check_released(SPEC, released)
    assert result.ok, str(result)

    header, rows = _rows(released)
    c_header, c_rows = _rows(_centralized(image, tmp_path / "centralized.csv"))
    assert header == c_header
    assert sum(rows.values()) == sum(c_rows.values())
    assert rows == c_rows, (
        f"federated and centralized releases differ: "
        f"only federated {list((rows - c_rows).items())[:5]}, "
        f"only centralized {list((c_rows - rows).items())[:5]}"
    )

    _down_leaves_nothing(project)


def test_stopping_a_hospital_mid_run_fails_the_leader_clearly(
    project: Project, tmp_path: Path
) -> None:
    victim = "hospital-b"
    project.compose("up", "-d", *HOSPITALS, "install-leader", timeout=900)
    project.wait_healthy(HOSPITALS, timeout=300)
    assert project.wait("install-leader", 300) == 0, project.all_logs()[-8000:]
    # A whole joint run takes about a second: slow the victim down (a hundredth of a CPU,
    # docker's least) so that the run is still going when the test has seen it start and
    # stops the victim.
    throttled = _run(["docker", "update", "--cpus", "0.01", project.container(victim)], check=False)
    if throttled.returncode != 0:
        warnings.warn(
            f"cannot throttle {victim} ({throttled.stderr.strip()}): the test may miss the run",
            stacklevel=1,
        )
    # --no-deps: the hospitals are up and healthy and the leader's certificate installed;
    # compose must not check the victim's health again, as the throttled victim's health
    # check (a Python process at a hundredth of a CPU) outlasts its timeout and would turn it
    # "unhealthy" before the leader is even created.
    project.compose("up", "-d", "--no-deps", "leader", timeout=300)

    # Stop the hospital once the run is under way: every hospital has accepted the leader's
    # hand-over (Prepare) and the rounds have begun.
    deadline = time.monotonic() + RUN_TIMEOUT
    leader = project.container("leader")
    while not all(PREPARED.search(project.logs(h)) for h in HOSPITALS):
        state = _run(["docker", "inspect", "-f", "{{.State.Status}}", leader]).stdout.strip()
        assert state in ("created", "running"), (
            f"the leader ended ({state}) before every hospital was prepared:\n"
            f"{project.all_logs()[-8000:]}"
        )
        assert time.monotonic() < deadline, (
            f"the run never got going:\n{project.all_logs()[-8000:]}"
        )
        time.sleep(0.1)
    # abruptly (a power cut, a crashed host): a graceful stop lets calls in flight finish, and
    # with the tables loaded at start-up the short run could end inside that grace
    _run(["docker", "kill", project.container(victim)])

    rc = project.wait("leader", RUN_TIMEOUT)
    logs = project.logs("leader")
    assert rc != 0, f"the leader exited 0 although {victim} was stopped:\n{logs[-8000:]}"
    last_lines = "\n".join(logs.strip().splitlines()[-5:])
    assert victim in last_lines, f"the leader's last words do not name {victim}:\n{logs[-8000:]}"
    assert "Traceback" not in logs, f"the leader crashed instead of failing cleanly:\n{logs}"

    out = tmp_path / "out"
    project.copy_out("leader", "/out", out)
    assert sorted(p.name for p in out.iterdir()) == [], "the failed run left output behind"

    _down_leaves_nothing(project)
