"""Outside deployment check: federation.toml, m-private audits and the DP codes page, with
tables, taxonomies and configs generated here (not the bundled examples).

Each test pins one defect found by an outside acceptance run of the deployment path.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import fedanon_cli, table1_spec, write_rows

from fedanon.errors import ConfigError
from fedanon.leader.config import parse_federation_config

FEDERATION = """
[run]
spec = "run.toml"
output = "released.csv"
{run_extra}

[leader]
name = {leader_name}

[tls]
ca = "ca.pem"
cert = "leader.pem"
key = "leader.key"

[[party]]
name = "north"
address = {address}
[[party]]
name = "south"
address = "127.0.0.1:7444"
[[party]]
name = "west"
address = "127.0.0.1:7445"
"""


def federation(
    address: str = '"127.0.0.1:7443"', leader_name: str = '"leader"', run_extra: str = ""
) -> str:
    return FEDERATION.format(address=address, leader_name=leader_name, run_extra=run_extra)


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.1:99999", "127.0.0.1:abc", ":7443"])
def test_a_malformed_party_address_is_a_config_error_naming_the_key(address: str) -> None:
    # was accepted, then the run failed at connect with exit 1 and a misleading reason
    # ("connection refused" for port 99999, "cannot resolve host ''" for ':7443')
    with pytest.raises(ConfigError) as err:
        parse_federation_config(federation(f'"{address}"'), "federation.toml")
    msg = str(err.value)
    assert "federation.toml" in msg and "[party #1] address" in msg and address in msg, msg
    assert "HOST:PORT" in msg, msg


def test_a_malformed_mpc_address_is_a_config_error() -> None:
    text = federation().replace(
        'address = "127.0.0.1:7443"', 'address = "127.0.0.1:7443"\nmpc_address = "127.0.0.1"'
    )
    with pytest.raises(ConfigError) as err:
        parse_federation_config(text, "federation.toml")
    assert "[party #1] mpc_address" in str(err.value), str(err.value)


def test_leader_run_exits_2_on_a_malformed_address_before_any_connection(
    tmp_path: Path, pki: Path
) -> None:
    spec = table1_spec(tmp_path)
    text = federation('"127.0.0.1:99999"').replace('"run.toml"', f'"{spec}"')
    for name in ("ca.pem", "leader.pem", "leader.key"):
        text = text.replace(f'"{name}"', f'"{pki / name}"')
    cfg = tmp_path / "federation.toml"
    cfg.write_text(text)
    r = fedanon_cli("leader", "run", "--config", str(cfg))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "failed during connect" not in r.stderr, r.stderr
    assert not (tmp_path / "released.csv").exists()


def test_wrong_types_in_federation_toml_are_named_as_such() -> None:
    with pytest.raises(ConfigError) as err:  # was: "deadline_seconds must be positive ('10')"
        parse_federation_config(federation(run_extra='deadline_seconds = "10"'), "f.toml")
    assert "[run] deadline_seconds" in str(err.value), str(err.value)
    assert "number of seconds" in str(err.value), str(err.value)
    with pytest.raises(ConfigError) as err:  # was: read as the name "3"
        parse_federation_config(federation(leader_name="3"), "f.toml")
    assert "[leader] name must be a non-empty string" in str(err.value), str(err.value)


def test_a_config_value_of_the_wrong_type_is_named_with_its_value(tmp_path: Path) -> None:
    # party.toml's listen = 7443 (a number) said '[party] needs listen = "..."', as if the
    # key were missing, and named no value; federation.toml's address likewise
    from fedanon.party.config import parse_party_config

    text = PARTY.replace('listen = "127.0.0.1:7443"', "listen = 7443")
    with pytest.raises(ConfigError) as err:
        parse_party_config(text, "party.toml", tmp_path)
    msg = str(err.value)
    assert "[party] listen must be a non-empty string" in msg and "7443" in msg, msg
    with pytest.raises(ConfigError) as err:
        parse_federation_config(federation("7443"), "federation.toml")
    msg = str(err.value)
    assert "[party #1] address must be a non-empty string" in msg and "7443" in msg, msg


PARTY = """
[party]
name = "north"
listen = "127.0.0.1:7443"
data = "patients.csv"

[policy]
min_K = 10
min_L = 2
max_C = 1

[tls]
ca = "ca.pem"
cert = "north.pem"
key = "north.key"
"""


M1_SPEC = """
[privacy]
L = 1
K = 2
C = 1
sensitive_values = []
m = 1

[utility]
score = "infogain"

[[attribute]]
name = "ward"
role = "qid"
type = "categorical"
taxonomy = "ward.txt"

[[attribute]]
name = "y"
role = "class"
values = ["N", "Y"]

[[attribute]]
name = "hospital"
role = "provider"
"""


def test_audit_of_an_m_private_spec_without_provider_column_claims_only_lkc(
    tmp_path: Path,
) -> None:
    # the headline said "m-private LKC-privacy (m = 1) holds" although the coalitions were
    # not checked (the release carries no provider column), and the HTML page's verdict said
    # "holds" without saying that m-privacy was not checked
    (tmp_path / "ward.txt").write_text("ANY_Ward\n  Surgical\n  Medical\n")
    spec = tmp_path / "m1.toml"
    spec.write_text(M1_SPEC)
    released = tmp_path / "released.csv"
    write_rows(released, ["ward", "y"], [["ANY_Ward", "N"]] * 4 + [["ANY_Ward", "Y"]] * 3)
    r = fedanon_cli("audit", "--spec", str(spec), "--released", str(released))
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("LKC-privacy holds"), r.stdout
    assert "m-privacy (m = 1) NOT checked" in r.stdout, r.stdout
    page = tmp_path / "page.html"
    r = fedanon_cli("report", "--spec", str(spec), "--released", str(released), "--html", str(page))
    assert r.returncode == 0, r.stderr
    assert "m-privacy (m = 1) NOT checked" in page.read_text(encoding="utf-8")


DP_CODES_SPEC = """
[privacy]
model = "dp"
epsilon = 1.0
specializations = 3

[utility]
score = "max"

[[attribute]]
name = "age"
role = "qid"
type = "numeric"
domain = [0, 100]

[[attribute]]
name = "dx"
role = "qid"
type = "set"
taxonomy = "dx.txt"
separator = "|"

[[attribute]]
name = "died"
role = "class"
values = ["N", "Y"]
"""


def test_dp_codes_page_states_the_noise_budget_the_run_used(tmp_path: Path) -> None:
    # a DiffGen run with a set-valued qid always gives the noise the rest of epsilon (its
    # report says "rest"); the page's parameters said "half", the spec default it ignores
    (tmp_path / "dx.txt").write_text("ALL\n  Heart\n    H1\n    H2\n  Lung\n    L1\n    L2\n")
    spec = tmp_path / "codes.toml"
    spec.write_text(DP_CODES_SPEC)
    codes = ["", "H1", "H1|L2", "L1|L2|H2", "H2"]
    rows = [[str(20 + i % 60), codes[i % 5], "Y" if i % 3 == 0 else "N"] for i in range(200)]
    data = tmp_path / "cohort.csv"
    write_rows(data, ["age", "dx", "died"], rows)
    out, rep, page = (tmp_path / n for n in ("rel.csv", "rep.json", "page.html"))
    r = fedanon_cli(
        "anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out),
        "--report", str(rep), "--html", str(page), "--seed", "3",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    shown = re.findall(r"<dt>noise budget</dt><dd>([^<]*)</dd>", page.read_text("utf-8"))
    assert shown and set(shown) == {"rest"}, shown


def _rewrite_keeping_size_and_mtime(path: Path, old: str, new: str) -> None:
    """Edit ``path`` in place (same inode, same size) and put its mtime back, as an
    ``rsync --inplace --times`` or a restore with preserved times does."""
    import os

    st = path.stat()
    text = path.read_text(encoding="utf-8")
    assert len(old) == len(new) and old in text
    with path.open("r+", encoding="utf-8", newline="") as fh:
        fh.write(text.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        st.st_size,
        st.st_mtime_ns,
        st.st_ino,
    )


def test_an_in_place_edit_with_the_mtime_put_back_is_read_again(tmp_path: Path) -> None:
    # the daemon's table cache and the ledger's fingerprint keyed the file on (path, size,
    # mtime, inode): three daemons released the old table's generalization and the ledger
    # row named the old content's SHA-256 after such an edit (found with party serve)
    from fedanon.io.table import build_schema
    from fedanon.ledger.fingerprint import Fingerprints
    from fedanon.model.spec import load_spec, run_hash
    from fedanon.party.tablecache import TableCache

    spec_path = table1_spec(tmp_path)
    spec, reader = load_spec(spec_path)
    schema = build_schema(spec, reader)
    key = run_hash(spec, schema.files)
    data = tmp_path / "patients.csv"
    rows = [["0", "Janitor", "M", "30", "N", "Transgender"]]
    rows += [[str(i), "Mover", "F", "40", "Y", "Urology"] for i in range(1, 20)]
    write_rows(data, ["ID", "Job", "Sex", "Age", "Transfuse", "Surgery"], rows)
    cache, fps = TableCache(data), Fingerprints(data)
    try:
        first = cache.get(key, schema)
        before = fps.start().result()  # type: ignore[union-attr]
        _rewrite_keeping_size_and_mtime(data, ",M,30,", ",F,31,")
        second = cache.get(key, schema)
        after = fps.start().result()  # type: ignore[union-attr]
    finally:
        fps.close()
    assert second is not first, "the cached table of the old content was served"
    assert before.digest != after.digest, "the old content's fingerprint was ledgered"


def test_noise_budget_half_with_a_set_valued_qid_is_refused_not_ignored(tmp_path: Path) -> None:
    # noise_budget = "half" ran as "rest" with a set-valued qid (the same release as without
    # the key): a key the run does not obey is refused, as an unknown key is
    (tmp_path / "dx.txt").write_text("ALL\n  Heart\n    H1\n    H2\n  Lung\n    L1\n    L2\n")
    spec = tmp_path / "codes.toml"
    spec.write_text(
        DP_CODES_SPEC.replace("specializations = 3", 'specializations = 3\nnoise_budget = "half"')
    )
    data, out = tmp_path / "cohort.csv", tmp_path / "rel.csv"
    write_rows(
        data, ["age", "dx", "died"], [[str(20 + i), "H1", "N" if i % 2 else "Y"] for i in range(40)]
    )
    r = fedanon_cli(
        "anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out), "--seed", "1"
    )
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "noise_budget" in r.stderr and "set-valued" in r.stderr, r.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("swap", "named"),
    [("cert", "alice.key"), ("ca", "alice.key"), ("key", "alice.pem")],
)
def test_a_tls_file_of_the_wrong_kind_is_named(pki: Path, swap: str, named: str) -> None:
    # party.toml's [tls] cert naming the key file said only 'not a PEM certificate':
    # no file, no key of the config (the files are read first, then parsed from bytes)
    from fedanon.security.tls import TlsMaterial

    files = {"ca": pki / "ca.pem", "cert": pki / "alice.pem", "key": pki / "alice.key"}
    files[swap] = pki / named
    with pytest.raises(ConfigError) as err:
        TlsMaterial.load(files["ca"], files["cert"], files["key"])
    assert named in str(err.value), str(err.value)


def _uneven_providers(tmp: Path) -> tuple[Path, Path, list[Path], Path]:
    """Three hospitals, one holding nearly every record: without it, 4 records remain (< K)."""
    (tmp / "ward.txt").write_text("ANY_Ward\n  Surgical\n  Medical\n")
    central = tmp / "m1.toml"
    central.write_text(M1_SPEC.replace("K = 2", "K = 5"))
    fed = tmp / "m1fed.toml"
    fed.write_text(M1_SPEC.replace("K = 2", "K = 5").split('[[attribute]]\nname = "hospital"')[0])
    sizes = {"big": (60, 0), "small-a": (2, 0), "small-b": (2, 1)}  # (records, offset)
    parts, union = [], []
    for name, (n, o) in sizes.items():
        rows = [
            ["Surgical" if i % 2 else "Medical", "Y" if i % 3 else "N"] for i in range(o, o + n)
        ]
        path = tmp / f"{name}.csv"
        write_rows(path, ["ward", "y"], rows)
        parts.append(path)
        union += [[w, y, name] for w, y in rows]
    data = tmp / "union.csv"
    write_rows(data, ["ward", "y", "hospital"], union)
    return central, fed, parts, data


def test_a_fully_generalized_table_that_is_not_m_private_is_refused(tmp_path: Path) -> None:
    # with m = 1 the coalition of the big hospital leaves 4 records (K = 5): no release is
    # m-private, yet anonymize and federate published the fully generalized table (exit 0),
    # which fedanon audit with the provider column then finds VIOLATED (exit 3)
    central, fed, parts, data = _uneven_providers(tmp_path)
    out = tmp_path / "released.csv"
    r = fedanon_cli("anonymize", "--spec", str(central), "--input", str(data), "--output", str(out))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "m-private" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not out.exists()
    args = [f"--party={p.stem}={p}" for p in parts]
    r = fedanon_cli("federate", "--spec", str(fed), *args, "--output", str(out), "--quiet")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "m-private" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not out.exists()


def test_the_root_check_is_check_0_in_whatever_state_the_leader_is() -> None:
    # fedanon leader run over party serve daemons asks it after one Instruction (none can
    # specialize before a check passes); only a later check number is refused
    from fedanon.errors import ProtocolError
    from fedanon.privacy.mprivacy import CoalitionQuery

    assert CoalitionQuery(0, 1, None).candidate is None
    with pytest.raises(ProtocolError, match="checked first"):
        CoalitionQuery(1, 1, None)
