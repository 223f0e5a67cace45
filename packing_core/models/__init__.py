"""The tiny transformer, our attention backends in transformers, and the pretrained SmolLM2.

The public names of ``packing_core.models``: ``from packing_core.models import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from packing_core._settings import model_dirs

    from .hybrid import hybrid_model, layer_leaks
    from .pretrained import load_pretrained, pretrained_status
    from .registry import DEFAULT_MODEL, DEFAULT_TEXTS, PRETRAINED, attn_implementations_of, load_model, model_specs, runs_texts
    from .tokenizers import AUTO as AUTO_TOKENIZER
    from .tokenizers import ByteLevelCounter, load_tokenizer, tokenizer_choices

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
