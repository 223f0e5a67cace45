"""Packing Lab's library: understand, measure and check sequence packing.

The short public API is this module's ``__all__``, about thirty names along the data flow; each
subpackage has its own curated ``__all__`` (``from packing_core.viz import plan_strip``). Pages,
benchmarks and scripts import only these packages, never a module file. Names load on first
use, so ``from packing_core import make_plan`` costs numpy alone, and torch or transformers load
only with the names that need them::

    >>> from packing_core import make_plan
    >>> make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut").metrics().utilisation
    0.888671875

The layers, each importing only from those before it (a test checks the graph):
data -> packing -> batch -> attention -> check -> models -> verify -> integrations / analysis /
experiments -> viz -> cli.
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from ._validate import DEFAULT_CONTEXT, LIMITS, InputError
    from .analysis.tables import recommend, strategy_table
    from .attention.backends import attend
    from .attention.semantics import effective_attention
    from .batch.packed import PackedBatch, segment_layout
    from .check.batch import check_batch, check_hf_batch
    from .check.files import load_batch_file
    from .data.builtin import load_lengths
    from .data.intake import profile_from_inputs
    from .data.profile import LengthProfile
    from .data.scan import scan
    from .experiments.warm import warm
    from .integrations.hook import guard
    from .integrations.trainer import PackingCheckCallback
    from .models.registry import model_spec
    from .models.tokenizers import load_tokenizer
    from .packing.balance import balance_rows
    from .packing.from_counts import plan_from_counts
    from .packing.plan import Plan, PlanMetrics, cu_seqlens_from_lengths
    from .packing.registry import STRATEGIES
    from .packing.strategies import compare, make_plan
    from .verify.equivalence import VerifyReport, verify_runner
    from .verify.loss_lesson import loss_lesson
    from .verify.registry import verify_model
    from .verify.zoo import ZOO, reproduce_bug

__all__, _getattr, _dir = lazy_exports(__name__, __file__)
# the subpackages, each with its own curated ``__all__``: ``from packing_core.viz import plan_strip``
SUBPACKAGES = ("analysis", "attention", "batch", "check", "data", "experiments", "integrations", "models",
               "packing", "verify", "viz")


def __getattr__(name: str):
    if name in SUBPACKAGES:
        import importlib

        return importlib.import_module(f"packing_core.{name}")
    return _getattr(name)


def __dir__() -> list[str]:
    return sorted(set(_dir()) | set(SUBPACKAGES))
