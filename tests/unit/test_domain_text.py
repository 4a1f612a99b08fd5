"""Issue 24 attack, finding 7: the hospital's log prints a numeric domain exactly.

``[0, 1.4904e+06)`` stood for both 1490400 and 1490401: the admin could not read the
leader's exact probe.  (The leader hears none of it: a data refusal is one sentence.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.errors import DataError
from fedanon.io.encoders import exact
from fedanon.io.table import build_schema, encode_table
from fedanon.model.spec import parse_spec


@pytest.mark.parametrize("hi", ["1490400", "1490401", "17.25"])
def test_the_expected_domain_is_exact(tmp_path: Path, hi: str) -> None:
    (tmp_path / "d.csv").write_text("fnlwgt,y\n12,n\n1490402,y\n")
    spec = parse_spec(
        "[privacy]\nL = 1\nK = 1\nC = 1.0\n"
        f'[[attribute]]\nname = "fnlwgt"\nrole = "qid"\ntype = "numeric"\ndomain = [0, {hi}]\n'
        "step = 1000\n"
        '[[attribute]]\nname = "y"\nrole = "class"\nvalues = ["n", "y"]\n'
    )
    with pytest.raises(DataError) as err:
        encode_table(build_schema(spec, lambda r: ""), tmp_path / "d.csv")
    assert err.value.expected == f"a number in [0, {hi})"


def test_exact() -> None:
    assert [exact(x) for x in (0.0, 1490400.0, -3.0, 0.1, 1e20)] == [
        "0", "1490400", "-3", "0.1", "1e+20"
    ]  # fmt: skip
