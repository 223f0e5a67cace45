"""Alone vs packed (isolation) and a later token changed (causality): one VerifyReport for every model.

The public names of ``packing_core.verify``: ``from packing_core.verify import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .batch_run import BatchVerdict, Reconciled, reconcile, run_hf_batch
    from .causality import causality_of_batch, causality_runner
    from .drift import Continuations, continuations
    from .equivalence import (
        DEFAULT_LENGTHS,
        CausalityReport,
        Cut,
        DocumentResult,
        TokenChange,
        VerifyReport,
        default_documents,
        default_tolerance,
        model_runner,
        verify_runner,
    )
    from .eval_loss import EvalLoss, eval_loss_packed_vs_alone
    from .run import (
        attention_arguments,
        drift_path,
        drift_pretrained,
        drift_verdict,
        load_causal_lm,
        verify_hf,
        verify_model,
        verify_pretrained,
    )
    from .texts import MAX_TEXT_TOKENS, MAX_TEXTS, MIN_TEXTS, read_texts_file, tokenise_texts

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
