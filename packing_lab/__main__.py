"""``python -m packing_lab``: the ``packing-lab`` command (see :mod:`packing_lab.cli`)."""
import sys

from packing_lab.cli import main

sys.exit(main())
