"""Alone vs packed (isolation) and a later token changed (causality): one VerifyReport for every model.

The public names of ``packing_core.verify``: ``from packing_core.verify import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
import importlib
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
    from .families_kernels import KernelCheck, check_kernels
    from .families_run import measure_family
    from .families_table import measure_all
    from .loss_lesson import LossLesson
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
    from .zoo import (
        BREAKS,
        PLANTED,
        REPRODUCED,
        ZOO,
        ZOO_NAMES,
        Bug,
        NaiveTargets,
        ZooResult,
        broken_batch,
        example_checks,
        loss_vs_answers,
        naive_targets,
        plant_bug,
        reference_links,
        reproduce_bug,
    )

__all__, _lazy_getattr, __dir__ = lazy_exports(__name__, __file__)


def __getattr__(name: str) -> object:
    if name == "PromptBlindBatch":   # deprecated, one release: a PackedBatch with key_mask set
        return importlib.import_module("packing_core.verify.zoo.planted").__getattr__(name)
    return _lazy_getattr(name)
