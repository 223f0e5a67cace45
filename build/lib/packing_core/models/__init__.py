"""The tiny transformer, our attention backends in transformers, and the pretrained SmolLM2.

The public names of ``packing_core.models``: ``from packing_core.models import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from packing_core._settings import cache_dir, model_dirs, models_dir

    from .folders import config_model_type
    from .hf_attention import ATTN_IMPLEMENTATIONS, HF_IMPLEMENTATIONS, hf_runner
    from .hybrid import HybridConfig, HybridLeak, HybridModel, hybrid_model, layer_leaks
    from .pretrained import load_local_model, load_pretrained, pretrained_status
    from .registry import (
        DEFAULT_MODEL,
        DEFAULT_TEXTS,
        PRETRAINED,
        ModelSpec,
        attn_implementations_of,
        find_model,
        is_model_path,
        load_model,
        model_names,
        model_spec,
        model_specs,
        register_model,
        runs_texts,
        unregister_model,
    )
    from .tiny import MODELS, TinyConfig, TinyTransformer, tiny_model
    from .tokenizers import AUTO as AUTO_TOKENIZER
    from .tokenizers import (
        TOKENIZER_CHOICES,
        ByteLevelCounter,
        HFTokenizer,
        check_tokenizer,
        default_tokenizer,
        load_tokenizer,
        real_tokenizer,
        tokenizer_choices,
    )

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
