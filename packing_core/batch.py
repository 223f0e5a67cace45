"""Packed batches: the tensors a training step consumes.

The layout of one packed row follows from its document lengths alone::

    lengths [3, 2] -> segment_ids  [0 0 0 1 1]
                      position_ids [0 1 2 0 1]      (reset at every document)
                      cu_seqlens   [0 3 5]          (np.cumsum with a leading 0)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SegmentLayout:
    """Per-token segment ids and position ids for documents laid end to end."""

    segment_ids: np.ndarray   # int64 [T]: index of the document each token belongs to
    position_ids: np.ndarray  # int64 [T]: 0 at each document start (or 0..T-1 if continuous)
    cu_seqlens: np.ndarray    # int32 [n + 1]: document boundary offsets, starting at 0


def segment_layout(lengths, positions: str = "reset") -> SegmentLayout:
    """Layout of documents of ``lengths`` placed back to back.

    >>> l = segment_layout([3, 2])
    >>> l.segment_ids.tolist(), l.position_ids.tolist(), l.cu_seqlens.tolist()
    ([0, 0, 0, 1, 1], [0, 1, 2, 0, 1], [0, 3, 5])
    >>> segment_layout([3, 2], positions="continuous").position_ids.tolist()
    [0, 1, 2, 3, 4]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.ndim != 1 or (lengths < 1).any():
        raise ValueError(f"lengths must be a 1-D list of positive integers, got {lengths.tolist()!r}")
    if positions not in ("reset", "continuous"):
        raise ValueError(f"positions must be 'reset' or 'continuous', got {positions!r}")
    cu = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=cu[1:])
    total = int(cu[-1])
    segment_ids = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    position_ids = np.arange(total, dtype=np.int64)
    if positions == "reset":
        position_ids = position_ids - cu[:-1][segment_ids]
    return SegmentLayout(segment_ids, position_ids, cu.astype(np.int32))
