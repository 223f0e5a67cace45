"""Files, built-in sources and lengths; no torch, no transformers (a tokenizer is passed in).

The public names of ``packing_core.data``: ``from packing_core.data import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from packing_core._settings import ReadBudget, read_budget

    from .formats import RECORD_KINDS, detect_kind
    from .intake import UPLOAD_TYPES, looks_like_profile, profile_from_inputs, profile_from_upload
    from .lengths import (
        SYNTHETIC,
        Tokenizer,
        as_lengths,
        byte_tokenizer,
        describe_columns,
        lengths_from_file,
        parse_lengths,
        synthetic_lengths,
        texts_from_file,
    )
    from .profile import LengthProfile
    from .scan import ENGINES, ScanProgress
    from .shards import find_shards
    from .builtin import Document, SourceInfo, list_sources, load_documents, load_lengths

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
