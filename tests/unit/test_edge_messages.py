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
