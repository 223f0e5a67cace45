"""Masks as composable predicates, and attend() with five backends.

The public names of ``packing_core.attention``: ``from packing_core.attention import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .backends import BACKENDS, attend, available_backends, varlen_function
    from .documents import TIERS, Evidence, IntendedDocuments, intended_documents
    from .families import (
        KERNELS,
        KINDS,
        SETUP_SIGNALS,
        SETUPS,
        SIGNALS,
        Family,
        Kernel,
        LayerVerdict,
        Mixer,
        Outcome,
        family,
        known_families,
        layer_verdicts,
        nearest_setup,
    )
    from .flex import block_mask_from_cu, compile_records, flex_unavailable
    from .masks import allowed, and_masks, block_causal, block_causal_mask, causal, materialise, same_document
    from .semantics import (
        ATTENTION_READERS,
        IMPLEMENTATIONS,
        TRAINER_READERS,
        EffectiveAttention,
        applied_4d_mask,
        effective_attention,
        packed_attention,
    )
    from .sharing import SharedAttention, future_reads, reached, shared_attention
    from .tensors import MASK_CONVENTIONS, NON_ATTENTION_SIGNALS, BatchTensors, FourDMask, read_4d_mask
    from .tiles import DEFAULT_TILE, TileSpans, tile_spans

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__, renamed={"READERS": "ATTENTION_READERS"})
