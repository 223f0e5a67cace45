"""``python -m packing_core``: the command line (see :mod:`packing_core.cli`)."""
import sys

from packing_core.cli import main

sys.exit(main())
