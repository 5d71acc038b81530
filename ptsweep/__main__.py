"""``python -m ptsweep <command> [overrides]`` -> :func:`ptsweep.cli.main`."""

import sys

from ptsweep.cli import main

sys.exit(main())
