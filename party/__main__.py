"""`python -m fedanon.party serve --config party.toml [--port-file F]`."""

import sys

from fedanon.party.cli import main

sys.exit(main())
