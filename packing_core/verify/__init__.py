"""Alone vs packed (isolation) and a later token changed (causality): one VerifyReport for every model.

The public names of ``packing_core.verify``: ``from packing_core.verify import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .batch_run import run_hf_batch
    from .causality import causality_runner
    from .equivalence import DEFAULT_LENGTHS, verify_runner
    from .eval_loss import eval_loss_packed_vs_alone
    from .run import attention_arguments, drift_path, drift_pretrained, drift_verdict, verify_model, verify_pretrained
    from .texts import MAX_TEXT_TOKENS, MAX_TEXTS, MIN_TEXTS

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
