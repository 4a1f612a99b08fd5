"""``python -m fedanon.cli ...``: the same as the ``fedanon`` command."""

from fedanon.cli.main import entry

entry()
