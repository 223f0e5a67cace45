"""Masks as composable predicates, and attend() with five backends.

The public names of ``packing_core.attention``: ``from packing_core.attention import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .backends import BACKENDS, attend, available_backends, varlen_function
    from .families import KERNELS, known_families
    from .flex import flex_unavailable
    from .masks import allowed, block_causal_mask
    from .semantics import ATTENTION_READERS, IMPLEMENTATIONS, TRAINER_READERS, effective_attention, packed_attention
    from .tiles import DEFAULT_TILE

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
