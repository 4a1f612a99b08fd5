"""Where the bundled examples are: the Adult data, specs and taxonomies that the experiment
commands (``fedanon experiment``, ``fedanon dp-experiment``, ``fedanon kkm-generate`` ...)
default to.

The repository's top-level ``examples/`` is the one copy of these files.  A wheel ships it as
package data at ``fedanon/examples/`` (pyproject.toml maps ``fedanon.examples`` to
``examples/``); a development (editable) install reads the checkout's ``examples/``, which is
next to ``common/``.  The files are real files in both cases (wheels install unzipped), so a
spec's relative taxonomy paths resolve as usual.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def examples_dir() -> Path:
    """The ``examples/`` folder of this installation (wheel: package data; checkout: the
    repository's own)."""
    installed = _HERE / "examples"
    if installed.is_dir():
        return installed
    return _HERE.parent / "examples"


EXAMPLES = examples_dir()
