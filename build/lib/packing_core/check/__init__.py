"""Static checks of a batch, for the attention implementation that will read it.

The public names of ``packing_core.check``: ``from packing_core.check import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .batch import check_all_implementations, check_batch, check_hf_batch, kernel_mask
    from .evidence import TokenizerFacts, tokenizer_facts
    from .files import (
        BATCH_FILE_TYPES,
        PICKLE_SUFFIXES,
        SAVE_HINT,
        load_batch_bytes,
        load_batch_file,
        save_batch_file,
        save_error_hint,
        save_snippet,
    )
    from .inputs import batch_tensors
    from .mixers import KERNEL_MODULES, SCOPE_NOTE, batch_signals, installed_kernels, model_family
    from .result import BatchCheck
    from .rules import RULES, SEVERITIES, Finding, Rule
    from .stream import BatchStats, StreamSummary, check_stream, stream_files, summarize_checks
    from .trainers import TRAINERS, batch_trainer

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
