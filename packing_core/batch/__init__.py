"""Token ids + Plan -> tensors: PackedBatch, its checks and the classic faults.

The public names of ``packing_core.batch``: ``from packing_core.batch import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:

    from .loss import LOSS_RULES
    from .packed import IGNORE_INDEX, FlatBatch, segment_layout

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
