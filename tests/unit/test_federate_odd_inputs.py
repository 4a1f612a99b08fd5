"""`fedanon federate`'s same-table check on a hospital table saved with another separator:
the user is told what `fedanon anonymize` tells (the header holds the declared names
separated by ';'), not 'line 3: row has 3 fields; expected 1 fields like the header' from
the check's own reader (found by the odd-tables review)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.apispec import Spec
from fedanon.errors import DataError
from fedanon.leader.federateinputs import check_distinct_tables

TABLE1 = Path(__file__).resolve().parents[2] / "examples" / "table1"


def test_a_semicolon_table_is_named_as_such(tmp_path: Path) -> None:
    lines = (TABLE1 / "table1.csv").read_text().splitlines()
    parties = []
    for i in range(2):
        path = tmp_path / f"d{i}.csv"
        path.write_text("\n".join([lines[0], *lines[1 + i :: 3]]) + "\n")
        parties.append((f"h{i}", path))
    semi = tmp_path / "semi.csv"
    rows = [ln.replace(",", ";") for ln in [lines[0], *lines[3::3]]]
    rows[2] = rows[2].replace(";", ",", 1)  # an ID written '7,1': a comma inside a field
    semi.write_text("\n".join(rows) + "\n")
    parties.append(("h2", semi))
    run = Spec.from_toml(TABLE1 / "run.toml").run_spec
    with pytest.raises(DataError) as err:
        check_distinct_tables(parties, run)
    msg = str(err.value)
    assert "semi.csv, line 1" in msg and "separated by ';'" in msg, msg
