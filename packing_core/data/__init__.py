"""Files, built-in sources and lengths; no torch, no transformers (a tokenizer is passed in).

The public names of ``packing_core.data``: ``from packing_core.data import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from packing_core._settings import read_budget

    from .builtin import list_sources, load_documents, load_lengths
    from .columns import describe_columns
    from .intake import looks_like_profile, profile_from_upload
    from .kinds import PURPOSES, RECORD_KINDS, purpose_of
    from .lengths import byte_tokenizer, parse_lengths, synthetic_lengths
    from .sources import INPUT_SUFFIXES

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
