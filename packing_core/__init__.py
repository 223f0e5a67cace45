"""Packing Lab's library: measure and check sequence packing where a trainer runs.

The short public API is this module's ``__all__``, along the data flow; each subpackage has
its own curated ``__all__`` (``from packing_core.attention import attend``). Names load on
first use, so ``from packing_core import make_plan`` costs numpy alone, and torch or
transformers load only with the names that need them::

    >>> from packing_core import make_plan
    >>> make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut").metrics().utilisation
    0.888671875

The layers, each importing only from those before it (a test checks the graph):
data -> packing -> batch -> attention -> parallel -> check -> models -> verify -> integrations / analysis -> cli
(``parallel``: a packed batch cut over context-parallel ranks, and the ring, beside the batch layer).
The lab (``packing_lab``: pages' helpers, demos, the bug zoo, figures) sits above the library and
is never imported by it.
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from ._validate import DEFAULT_CONTEXT, LIMITS, InputError
    from .analysis.tables import recommend, strategy_table
    from .batch.packed import PackedBatch
    from .check.batch import check_batch, check_hf_batch
    from .check.files import load_batch_file
    from .data.builtin import load_lengths
    from .data.profile import LengthProfile
    from .data.scan import scan
    from .integrations.hook import guard
    from .integrations.trainer import PackingCheckCallback
    from .models.registry import model_spec
    from .models.tokenizers import load_tokenizer
    from .packing.balance import balance_rows
    from .packing.from_counts import plan_from_counts
    from .packing.plan import Plan
    from .packing.registry import STRATEGIES
    from .packing.strategies import make_plan
    from .verify.equivalence import VerifyReport
    from .verify.run import verify_model

__all__, _getattr, _dir = lazy_exports(__name__, __file__)
# the subpackages, each with its own curated ``__all__``: ``from packing_core.attention import attend``
SUBPACKAGES = ("analysis", "attention", "batch", "check", "cli", "data", "integrations", "models", "packing", "parallel",
               "verify")


def __getattr__(name: str):
    import importlib

    if name in SUBPACKAGES:
        return importlib.import_module(f"packing_core.{name}")
    return _getattr(name)


def __dir__() -> list[str]:
    return sorted(set(_dir()) | set(SUBPACKAGES))
