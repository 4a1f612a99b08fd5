"""`python -m fedanon.leader run --config federation.toml`."""

import sys

from fedanon.leader.cli import main

sys.exit(main(sys.argv[1:]))
