"""The ``packing-lab`` command: the library's commands (``packing_core.cli``) and the lab's own.

    report, balance, stream, scan, check, verify, cp    the library's (``python -m packing_core`` runs them too)
    zoo     bugs reported in real projects, reproduced live; faults planted        zoo.py
    warm    before class: convert SmolLM2, train the demo pair, fill the caches    warm.py

``packing-lab`` is the console script; ``python -m packing_lab`` is the same. Examples::

    packing-lab report --lengths 120,90,300,40,55,30,210,65 --context 512
    packing-lab check batch.safetensors --attn-implementation all
    packing-lab zoo --run all
    packing-lab warm        # before class: convert SmolLM2, train the demo, fill the caches
"""
from __future__ import annotations

import packing_lab.cli.warm as warm
import packing_lab.cli.zoo as zoo
from packing_core.cli.dispatch import COMMANDS as LIBRARY_COMMANDS
from packing_core.cli.dispatch import main as _main

ALL_COMMANDS = (*LIBRARY_COMMANDS, zoo, warm)
PROG = "packing-lab"


def main(argv=None, out=None, err=None) -> int:
    """``packing-lab COMMAND ...``: every command, the library's and the lab's; the exit code."""
    return _main(argv, out, err, commands=ALL_COMMANDS, prog=PROG)


__all__ = ["ALL_COMMANDS", "main"]
