"""`python -m party serve --config party.toml [--port-file F]`."""

import sys

from party.cli import main

sys.exit(main())
