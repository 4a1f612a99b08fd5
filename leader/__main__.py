"""`python -m leader run --config federation.toml`."""

import sys

from common.cli import main

sys.exit(main(["leader", *sys.argv[1:]]))
