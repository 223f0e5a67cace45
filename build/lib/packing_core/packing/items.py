"""Deprecated: a document no longer than the context is a *piece*; see :mod:`packing_core.packing.pieces`.

``Items``, ``items_from_lengths`` and ``item_histogram`` still resolve here, with a
``DeprecationWarning``, for one release.
"""
from __future__ import annotations

from packing_core._lazy import warn_renamed
from packing_core.packing import pieces

_RENAMED = {"Items": "Pieces", "items_from_lengths": "pieces_from_lengths", "item_histogram": "piece_histogram",
            "kept_tokens": "kept_tokens", "overlong_pieces": "overlong_pieces", "OVERLONG_POLICIES": "OVERLONG_POLICIES"}


def __getattr__(name: str):
    if name in _RENAMED:
        warn_renamed(f"packing_core.packing.items.{name}", f"packing_core.packing.pieces.{_RENAMED[name]}")
        return getattr(pieces, _RENAMED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
