"""Packed rows over context-parallel ranks: the cut, the ring, the balance (beside the batch layer).

The public names of ``packing_core.parallel``: ``from packing_core.parallel import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .split import split_batch

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
