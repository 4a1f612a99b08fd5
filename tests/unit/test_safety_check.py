"""The last line of defence: a result that violates LKC is never published."""

from __future__ import annotations

from pathlib import Path

import pytest

import fedanon.privacy.lkc
from fedanon.apispec import Spec
from fedanon.centralized import anonymize_file
from fedanon.errors import InternalError


def test_a_broken_validity_check_publishes_nothing(
    table1_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # simulate a bug: no candidate is ever found invalid, so everything gets specialized
    monkeypatch.setattr(fedanon.privacy.lkc, "invalid_candidates", lambda *a, **k: [])
    out, rep = tmp_path / "out.csv", tmp_path / "rep.json"
    with pytest.raises(InternalError, match="violate LKC"):
        anonymize_file(
            Spec.from_toml(table1_dir / "run.toml"), table1_dir / "table1.csv", out, rep, False
        )
    assert not out.exists() and not rep.exists()
    assert list(tmp_path.iterdir()) == []
