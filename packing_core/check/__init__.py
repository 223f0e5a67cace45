"""Static checks of a batch, for the attention implementation that will read it.

The public names of ``packing_core.check``: ``from packing_core.check import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .batch import check_all_implementations, check_batch, check_hf_batch
    from .files import BATCH_FILE_TYPES, PICKLE_SUFFIXES, load_batch_bytes, load_batch_file, save_batch_file, save_snippet
    from .mixers import SCOPE_NOTE
    from .stream import check_stream, summarize_checks

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
