"""`python -m fedanon.leader run --config federation.toml`."""

import sys

from fedanon.cli.main import main

sys.exit(main(["leader", *sys.argv[1:]]))
