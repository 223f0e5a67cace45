"""Batch composition: how a packing policy orders its rows (TEACHING 18).

>>> from packing_core import make_plan
>>> order = row_order(make_plan([500, 20, 480, 30, 400, 100], 512, "ffd"))
>>> order.longest.tolist()     # one row per long document, the short one left over
[500, 480, 400, 20]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RowOrder:
    """How a plan orders its rows (TEACHING 18)::

        bfd, 2,000 tickets   longest per row  511 509 508 ... 140 96 61
        neighbour_correlation ~ 1.0: consecutive rows, hence batches, hold similar lengths
        with shuffle=True     ~ 0.0: a random order again
    """

    longest: np.ndarray          # longest piece in each row, in row order
    neighbour_correlation: float  # Pearson correlation of consecutive rows' longest piece
    first_batch_mean: float       # mean document piece length in the first batch of rows
    last_batch_mean: float        # ... and in the last batch


def row_order(plan, batch_size: int = 32) -> RowOrder:
    """Longest piece per row and how strongly neighbouring rows resemble each other."""
    longest = np.zeros(plan.n_rows, dtype=np.int64)
    np.maximum.at(longest, plan.piece_row, plan.piece_len)
    if plan.n_rows > 2 and longest[1:].std() > 0 and longest[:-1].std() > 0:
        corr = float(np.corrcoef(longest[:-1], longest[1:])[0, 1])
    else:
        corr = 0.0
    rows = min(batch_size, plan.n_rows)
    first = plan.piece_row < rows
    last = plan.piece_row >= plan.n_rows - rows
    return RowOrder(longest, corr, float(plan.piece_len[first].mean()), float(plan.piece_len[last].mean()))



def batch_cu_seqlens(plan) -> list[int]:
    """The one ``cu_seqlens`` a varlen kernel takes for the whole batch, flattened row after row.

    ``torch.nn.attention.varlen.varlen_attn`` and ``flash_attn_varlen_func`` read one
    cumulative array over every token of the batch. It is the running sum of the lengths
    with a cut added at each row edge (here at 512), where a split document starts again:

    >>> from packing_core import make_plan
    >>> batch_cu_seqlens(make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut"))
    [0, 120, 210, 510, 512, 550, 605, 635, 845, 910]
    """
    order = np.lexsort((plan.piece_offset, plan.piece_row))   # row-major: the order the kernel counts tokens in
    return np.r_[0, np.cumsum(plan.piece_len[order])].astype(int).tolist()


def row_cu_seqlens(plan) -> list[list[int]]:
    """The same boundaries read inside each row, as lists: :meth:`Plan.row_piece_offsets`.

    A kernel still takes them as one array over the batch (:func:`batch_cu_seqlens`).

    >>> from packing_core import make_plan
    >>> row_cu_seqlens(make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut"))
    [[0, 120, 210, 510, 512], [0, 38, 93, 123, 333, 398]]
    """
    return [offsets.tolist() for offsets in plan.row_piece_offsets()]
