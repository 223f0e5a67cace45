"""The lesson of the release axis: the same packed batch, sound on one transformers release and leaking on another.

The numbers are the library's measured table (:func:`packing_core.attention.releases.measured_cells`:
a tiny Llama, three documents packed in one row with position ids restarting per document, no mask,
``use_cache=False``, each document against its run alone, in a venv per release).

>>> dict((r, s) for r, s, _ in same_batch_by_release())["4.46.3"]
'leaks'
"""
from __future__ import annotations

from packing_core.attention.releases import measured_cells

__all__ = ["same_batch_by_release"]


def same_batch_by_release(key: str = "llama|sdpa", setup: str = "position_ids") -> tuple[tuple[str, str, float], ...]:
    """``(release, "sound" | "leaks", largest |logit difference|)`` for every measured release, oldest first."""
    return measured_cells(key, setup)
