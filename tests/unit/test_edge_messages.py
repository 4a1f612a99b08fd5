"""Messages at the edges of the input space (found by the edge review): what is wrong and
what would be valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.apispec import Spec
from fedanon.errors import SpecError

SPEC = """[privacy]
L = 1
K = 2
C = 1

[[attribute]]
name = "b"
role = "qid"
type = "numeric"
domain = {domain}
step = 1
"""


@pytest.mark.parametrize("domain", ["[0, inf]", "[nan, 100]", "[-inf, 0]", "[5, 5]", "[100, 0]"])
def test_a_bad_numeric_domain_is_named_with_what_is_valid(tmp_path: Path, domain: str) -> None:
    spec = tmp_path / "run.toml"
    spec.write_text(SPEC.format(domain=domain))
    with pytest.raises(SpecError) as err:
        Spec.from_toml(spec)
    text = str(err.value)
    assert "attribute 'b'" in text
    assert f"(value '{domain}')" in text  # the domain as written
    assert "expected two finite numbers min < max" in text


TABLE1 = Path(__file__).resolve().parents[2] / "examples" / "table1"


@pytest.mark.parametrize("table", ["header", "empty", "ragged"])
def test_federate_names_the_party_whose_table_cannot_be_read(tmp_path: Path, table: str) -> None:
    """`fedanon federate`'s same-table check names the party (--party NAME=...) of a table
    it cannot read, not only its file: 'party h1: .../h1.csv: the input has a header but no
    records' (a hospital's table with no records; it said only the file)."""
    from fedanon.errors import InputError
    from fedanon.leader.federateinputs import check_distinct_tables

    lines = (TABLE1 / "table1.csv").read_text().splitlines()
    bad = {"header": lines[:1], "empty": [], "ragged": [*lines[:3], "99,Doctor"]}[table]
    parties = []
    for i, rows in enumerate([lines[:1] + lines[1::2], bad, lines[:1] + lines[2::2]]):
        path = tmp_path / f"d{i}.csv"
        path.write_text("".join(f"{r}\n" for r in rows))
        parties.append((f"h{i}", path))
    run = Spec.from_toml(TABLE1 / "run.toml").run_spec
    with pytest.raises(InputError) as err:
        check_distinct_tables(parties, run)
    msg = str(err.value)
    assert msg.startswith(f"party h1: {tmp_path / 'd1.csv'}"), msg
    assert err.value.exit_code == 2
