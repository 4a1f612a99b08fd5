"""Shared pytest fixtures: paths to the example data under ``examples/``."""

from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).parent
EXAMPLES_DIR = TESTS_DIR.parent / "examples"

# Make ``import checker`` (tests/checker.py, the independent LKC-privacy checker) work from any
# test module, whatever pytest's import mode.
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    """The repository's ``examples/`` directory."""
    return EXAMPLES_DIR


@pytest.fixture(scope="session")
def table1_dir(examples_dir: Path) -> Path:
    """``examples/table1``: the paper's running example (Tables I and II, Fig. 2 taxonomies)."""
    return examples_dir / "table1"


@pytest.fixture(scope="session")
def adult_dir(examples_dir: Path) -> Path:
    """``examples/adult``: UCI Adult with ARX hierarchies and run specs."""
    return examples_dir / "adult"


@pytest.fixture(scope="session")
def adult_csv(adult_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain-CSV copy of ``examples/adult/adult.csv.gz`` in a session temporary directory."""
    out = tmp_path_factory.mktemp("adult") / "adult.csv"
    with gzip.open(adult_dir / "adult.csv.gz", "rb") as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A federation CA with party certificates ``alice`` and ``bob`` and a ``leader``
    certificate, one per test module (a module needing other names defines its own)."""
    from fedanon.security import certs

    root = tmp_path_factory.mktemp("pki")
    certs.init_ca(root)
    for name, role in [("alice", "party"), ("bob", "party"), ("leader", "leader")]:
        certs.issue(root, name, role)
    return root
