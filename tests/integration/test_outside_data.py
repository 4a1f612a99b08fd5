"""Outside data: tables and specs unlike the bundled examples, generated here.

Each test pins one defect found by running fedanon on such data (an outside check).
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

from conftest import fedanon_cli, read_rows, write_rows

INTERVAL = re.compile(r"\[(?P<lo>[^-]+(?:e-\d+)?)-(?P<hi>.+)\)\Z")

DECIMAL_STEP_SPEC = """
[privacy]
L = 1
K = 5
C = 1
sensitive_values = []

[utility]
score = "infogain"

[[attribute]]
name = "x"
role = "qid"
type = "numeric"
domain = [0, 1]
step = 0.1

[[attribute]]
name = "y"
role = "class"
values = ["N", "Y"]
"""


def _inside(value: str, label: str) -> bool:
    m = INTERVAL.match(label)
    assert m is not None, label
    return Decimal(m["lo"]) <= Decimal(value) < Decimal(m["hi"])


def test_a_value_on_a_decimal_step_edge_is_released_in_the_interval_that_holds_it(
    tmp_path: Path,
) -> None:
    # 0.7 / 0.1 is 6.999999999999999 and 0.3 / 0.1 is 2.9999999999999996 in floating
    # point: the cell 0.7 was binned below the edge 0.7 and released as [0.6-0.7) or
    # [0.4-0.7) -- an interval that does not contain it.
    values = [f"{i / 10:.1f}" for i in range(10)]
    rows = [[v, "Y" if v >= "0.7" or v == "0.3" else "N"] for v in values for _ in range(6)]
    spec = tmp_path / "run.toml"
    spec.write_text(DECIMAL_STEP_SPEC)
    data, out = tmp_path / "data.csv", tmp_path / "released.csv"
    write_rows(data, ["x", "y"], rows)
    r = fedanon_cli("anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out))
    assert r.returncode == 0, r.stderr
    header, released = read_rows(out)
    assert header == ["x", "y"]
    assert {x for x, _ in released} != {"[0-1)"}  # the edges were split
    wrong = sorted(
        {(raw[0], rel[0]) for raw, rel in zip(rows, released) if not _inside(raw[0], rel[0])}
    )
    assert wrong == []


def test_an_interval_label_states_its_edges_exactly_far_from_zero(tmp_path: Path) -> None:
    # a time stamp in half seconds: the edge 1000000021.5 was labelled "1000000022" (the
    # label's format kept 10 significant digits), so 1000000022.0 was released in
    # "[1000000015-1000000022)" and neighbouring labels overlapped
    spec = tmp_path / "run.toml"
    spec.write_text(
        DECIMAL_STEP_SPEC.replace("domain = [0, 1]", "domain = [1000000000, 1000001000]")
        .replace("step = 0.1", "step = 0.5")
        .replace("K = 5", "K = 3")
    )
    values = [f"{1000000000 + i / 2:.1f}" for i in range(0, 2000, 7)]
    rows = [[v, "Y" if v.endswith(".5") else "N"] for v in values for _ in range(3)]
    data, out = tmp_path / "data.csv", tmp_path / "released.csv"
    write_rows(data, ["x", "y"], rows)
    r = fedanon_cli("anonymize", "--spec", str(spec), "--input", str(data), "--output", str(out))
    assert r.returncode == 0, r.stderr
    _, released = read_rows(out)
    assert len({x for x, _ in released}) > 10  # split well below the 10th digit
    wrong = sorted({(a[0], b[0]) for a, b in zip(rows, released) if not _inside(a[0], b[0])})
    assert wrong == []


def test_the_last_interval_ends_at_the_domain_end_as_written() -> None:
    from fedanon.model.tree import AttrTree

    # three steps of 0.3333333333333333 end at 0.9999999999999999, the domain at 1
    tree = AttrTree.numeric("x", (0.0, 1.0), 0.3333333333333333)
    assert tree.labels[0] == "[0-1)"
    tree.split(0, 2)
    assert tree.labels[1:] == ["[0-0.6666666666666666)", "[0.6666666666666666-1)"]
