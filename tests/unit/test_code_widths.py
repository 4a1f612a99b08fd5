"""Issue 24 attack, finding 1: code columns never wrap.

A leader listed 255 made-up sensitive values and put ``Divorced`` 256th: the sensitive codes
were uint8, so code 256 became 0 ("not a sensitive value") and C bound nothing for Divorced
(federated and centralized alike).  Every code column is sized to what it holds, and an
encoder handed a dtype too small for its codes refuses instead of wrapping."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedanon.io.columns import smallest_uint
from fedanon.io.encoders import LookupEncoder
from fedanon.io.table import build_schema, encode_table
from fedanon.lkc.accepted import confidence_binds
from fedanon.model.spec import parse_spec

FAKE = [f"zz{i:03d}" for i in range(255)]


def _spec(values: list[str], c: float = 0.5) -> str:
    listed = ", ".join(f'"{v}"' for v in values)
    return (
        f"[privacy]\nL = 1\nK = 1\nC = {c}\nsensitive_values = [{listed}]\n"
        'allow_absent_sensitive = true\n[utility]\nscore = "discernibility"\n'
        '[[attribute]]\nname = "sex"\nrole = "qid"\ntype = "categorical"\n'
        'taxonomy = "sex.txt"\n'
        '[[attribute]]\nname = "marital"\nrole = "sensitive"\n'
    )


def test_the_256th_sensitive_value_keeps_its_code(tmp_path: Path) -> None:
    (tmp_path / "sex.txt").write_text("ANY\n  F\n  M\n")
    (tmp_path / "d.csv").write_text("sex,marital\nF,Divorced\nM,Divorced\nF,Married\nM,zz254\n")
    spec = parse_spec(_spec([*FAKE, "Divorced"]))
    schema = build_schema(spec, lambda rel: (tmp_path / rel).read_text())
    table = encode_table(schema, tmp_path / "d.csv")
    assert table.sens.tolist() == [256, 256, 0, 255]  # was [0, 0, 0, 255]: Divorced lost
    assert table.sens.dtype == np.uint16


def test_few_sensitive_values_stay_uint8(tmp_path: Path) -> None:
    (tmp_path / "sex.txt").write_text("ANY\n  F\n  M\n")
    (tmp_path / "d.csv").write_text("sex,marital\nF,Divorced\nM,Married\n")
    spec = parse_spec(_spec([*FAKE[:254], "Divorced"]))  # 255 values: codes 0..255
    table = encode_table(
        build_schema(spec, lambda r: (tmp_path / r).read_text()), tmp_path / "d.csv"
    )
    assert table.sens.dtype == np.uint8 and table.sens.tolist() == [255, 0]


def test_an_encoder_refuses_a_dtype_its_codes_do_not_fit() -> None:
    with pytest.raises(ValueError, match="code 256 does not fit uint8"):
        LookupEncoder("marital", {f"v{i}": i + 1 for i in range(256)}, np.uint8, "", missing=0)
    LookupEncoder("marital", {f"v{i}": i + 1 for i in range(255)}, np.uint8, "", missing=0)
    with pytest.raises(ValueError, match="code 300 does not fit uint8"):
        LookupEncoder("x", {"a": 0}, np.uint8, "", missing=300)


@pytest.mark.parametrize(
    ("top", "dtype"),
    [
        (0, np.uint8),
        (255, np.uint8),
        (256, np.uint16),
        (65535, np.uint16),
        (65536, np.int32),
        ((1 << 31) - 1, np.int32),
    ],
)
def test_smallest_uint_holds_its_maximum(top: int, dtype: type) -> None:
    got = smallest_uint(top)
    assert got is dtype and np.iinfo(got).max >= top


def test_smallest_uint_refuses_what_int32_cannot_hold() -> None:
    with pytest.raises(ValueError, match="do not fit int32"):
        smallest_uint(1 << 31)


def test_the_accepted_line_never_cuts_the_policys_values_out() -> None:
    spec = parse_spec(_spec([*FAKE, "Divorced"]))
    line = confidence_binds(spec, ("Divorced",))
    assert line == "binds=[C=0.5 on marital: Divorced + 255 more of the spec]", line
    short = parse_spec(_spec(["Widowed", "Divorced", "Married"]))
    assert confidence_binds(short, ("Divorced", "Widowed")) == (
        "binds=[C=0.5 on marital: Divorced,Widowed + 1 more of the spec: Married]"
    )
    assert (
        confidence_binds(short)
        == "binds=[C=0.5 on marital: 3 of the spec: Widowed,Divorced,Married]"
    )
