"""Check packing inside a training loop: :func:`guard` and, for HF Trainer / TRL, :class:`PackingCheckCallback`.

The public names of ``packing_core.integrations``: ``from packing_core.integrations import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .hook import Guard, PackingCheckError, guard
    from .trainer import PackingCheckCallback

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
