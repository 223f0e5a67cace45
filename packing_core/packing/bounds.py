"""How few rows could any plan use? Three lower bounds, each true for a different question.

- **L1** = ⌈tokens / context⌉. Every plan needs it, but only a plan that may *cut* documents
  at row edges (concat-cut) can reach it.
- **L2** (Martello and Toth, 1990) is for plans that keep every piece whole. Pieces longer than
  half a row cannot share a row with each other, and the room they leave is all the smaller
  pieces can use; trying every threshold ``k`` of "small" gives the bound.
- **LP**, the column-generation bound (Gilmore and Gomory, 1961): the optimum of the linear
  relaxation over every pattern that fits a row, computed by ``optimal.py`` (``master.py``); when
  column generation stops short of it, a proven lower bound on it, named as such. It is tight in
  practice: the best whole-document plan is almost always within one row of ⌈LP⌉.

Ten documents of 300 tokens at context 512: 3,000 tokens fit 6 rows if cut, but no two
documents share a row, so whole documents need 10::

    L1 = ⌈3000 / 512⌉ = 6         reachable only by cutting documents
    L2 = 10 pieces > 256 = 10      every whole-document plan needs 10 rows

>>> b = bounds_from_counts({300: 10}, 512)
>>> b.l1.rows, b.l2.rows
(6, 10)
>>> from packing_core.packing.registry import get_strategy
>>> bound_for(get_strategy("concat-cut"), b).name, bound_for(get_strategy("bfd"), b).name
('L1', 'L2')

Bounds work on *pieces*: documents after the over-long policy (``pieces.py``), so a split
document counts as its pieces.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from packing_core._validate import OVERLONG_POLICIES, as_context, as_lengths, choice
from packing_core.packing.options import as_max_docs_per_row
from packing_core.packing.pieces import histogram_arrays, piece_histogram

__all__ = ["Bounds", "RowBound", "bound_for", "bounds_from_counts", "bounds_from_lengths", "l1_bound", "l2_bound",
           "row_bounds"]


@dataclass(frozen=True)
class RowBound:
    """A lower bound on rows: no plan of the kind it covers uses fewer than ``rows``.

    ``value`` is the unrounded figure, always a proven lower bound: tokens / context for L1, L2's
    rows, and for LP the LP optimum or, when column generation stopped before it, the best proven
    lower bound on it (the duals' bound, Farley's, or L1's value when that is higher; ``what`` says
    which). ``proven`` says that ``value`` is the figure the name stands for (the LP optimum itself);
    False marks an LP value that is only a lower bound on it, ``rows`` is a valid bound either way.
    ``whole_documents``: the bound holds only for plans that keep pieces whole (L2, LP); L1 holds
    for every plan.
    """

    name: str
    rows: int
    value: float
    whole_documents: bool
    what: str
    proven: bool = True

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def l1_bound(item_len, item_n, context: int) -> RowBound:
    """⌈tokens / context⌉: reachable only by cutting documents.

    >>> l1_bound(np.array([300]), np.array([10]), 512).rows
    6
    """
    tokens = int((np.asarray(item_len, np.int64) * np.asarray(item_n, np.int64)).sum())
    return RowBound("L1", -(-tokens // context), tokens / context, False,
                    "tokens / context, rounded up: reachable only by cutting documents at row edges")


def l2_bound(item_len, item_n, context: int, max_docs_per_row: int | None = None) -> RowBound:
    """Martello and Toth's L2 bound for whole pieces, from a length histogram (all pieces <= context).

    For every threshold ``k`` in ``[0, context / 2]``: pieces longer than ``context - k`` need a
    row each and leave no room for an piece of ``k`` or more; pieces in ``(context / 2, context - k]``
    need a row each too; pieces in ``[k, context / 2]`` must fit in the room those rows leave, or
    open new rows. The bound is the best ``k``; it is never below L1. Vectorised over the distinct
    lengths (the candidate thresholds), with prefix sums: fast on 100,000 distinct lengths.

    With ``max_docs_per_row`` a row holds at most that many pieces, so ⌈pieces / cap⌉ bounds too.

    >>> l2_bound(np.array([300]), np.array([10]), 512).rows
    10
    >>> l2_bound(np.array([100, 300]), np.array([4, 4]), 512).rows      # 4 big rows; 400 small tokens fit beside them
    4
    >>> l2_bound(np.array([10]), np.array([9]), 512, max_docs_per_row=4).rows
    3
    """
    size = np.asarray(item_len, np.int64)
    n = np.asarray(item_n, np.int64)
    order = np.argsort(size, kind="stable")
    size, n = size[order], n[order]
    cum_n = np.concatenate([[0], np.cumsum(n)])
    cum_s = np.concatenate([[0], np.cumsum(size * n)])

    def below(x):   # (pieces, tokens) of sizes <= x, for an array of thresholds x
        i = np.searchsorted(size, x, side="right")
        return cum_n[i], cum_s[i]

    half = context // 2
    k = np.unique(np.concatenate([[0], size[size <= half]]))
    n_all, _ = below(np.array([context]))
    n_le_ck, s_le_ck = below(context - k)        # sizes <= context - k
    n_le_half, s_le_half = below(np.array([half]))
    n_lt_k, s_lt_k = below(k - 1)                # sizes < k
    j1 = n_all[0] - n_le_ck                       # > context - k
    j2 = n_le_ck - n_le_half[0]                   # (context / 2, context - k]
    s2 = s_le_ck - s_le_half[0]
    s3 = s_le_half[0] - s_lt_k                    # [k, context / 2]
    spill = s3 - (j2 * context - s2)
    best = j1 + j2 + np.maximum(0, -(-spill // context))
    rows = int(best.max()) if len(best) else 0
    what = "Martello-Toth L2: rows every plan of whole documents needs"
    if max_docs_per_row is not None:
        by_cap = -(-int(cum_n[-1]) // int(max_docs_per_row))
        if by_cap > rows:
            rows, what = by_cap, f"pieces / {max_docs_per_row} documents a row, rounded up (beats Martello-Toth L2)"
    return RowBound("L2", rows, float(rows), True, what)


@dataclass(frozen=True)
class Bounds:
    """The three named bounds of one histogram; ``lp`` is None until column generation ran."""

    l1: RowBound
    l2: RowBound
    lp: RowBound | None = None

    @property
    def whole_documents(self) -> RowBound:
        """The best bound for plans that keep documents whole: L2, or LP when it is higher."""
        if self.lp is not None and self.lp.rows > self.l2.rows:
            return self.lp
        return self.l2

    def to_dict(self) -> dict:
        return {"l1": self.l1.to_dict(), "l2": self.l2.to_dict(), "lp": None if self.lp is None else self.lp.to_dict(),
                "whole_documents": self.whole_documents.name}


def row_bounds(item_len, item_n, context: int, *, max_docs_per_row: int | None = None,
               lp: RowBound | None = None) -> Bounds:
    """L1 and L2 of an piece histogram (pieces no longer than the context), with an LP bound if given."""
    return Bounds(l1_bound(item_len, item_n, context), l2_bound(item_len, item_n, context, max_docs_per_row), lp)


def bounds_from_counts(counts, context: int, *, overlong: str = "split", max_docs_per_row: int | None = None,
                       lp: RowBound | None = None) -> Bounds:
    """The bounds of ``{length: documents}`` or a ``LengthProfile`` at ``context``, after the over-long policy.

    >>> b = bounds_from_counts({1000: 1, 100: 3}, 512)     # split: pieces 512, 488, 100 x 3
    >>> b.l1.rows, b.l2.rows
    (3, 3)
    """
    context = as_context(context)
    choice("overlong policy", overlong, OVERLONG_POLICIES)
    max_docs_per_row = as_max_docs_per_row(max_docs_per_row, context)
    lengths, n = histogram_arrays(counts)
    item_len, item_n, _ = piece_histogram(lengths, n, context, overlong)
    return row_bounds(item_len, item_n, context, max_docs_per_row=max_docs_per_row, lp=lp)


def bounds_from_lengths(lengths, context: int, *, overlong: str = "split", max_docs_per_row: int | None = None,
                        lp: RowBound | None = None) -> Bounds:
    """The bounds of one entry per document (what ``make_plan`` takes), after the over-long policy.

    >>> b = bounds_from_lengths([300] * 10, 512)
    >>> b.l1.rows, b.l2.rows, b.whole_documents.name
    (6, 10, 'L2')
    """
    sizes, n = np.unique(as_lengths(lengths), return_counts=True)
    return bounds_from_counts(_Histogram(sizes, n), context, overlong=overlong, max_docs_per_row=max_docs_per_row,
                              lp=lp)


@dataclass(frozen=True)
class _Histogram:
    lengths: np.ndarray
    counts: np.ndarray


def bound_for(strategy, bounds: Bounds) -> RowBound:
    """The bound a ``Strategy`` (``get_strategy(name)``) is measured against: L1 if it cuts documents
    (``Strategy.cuts``), else the best of L2 and LP."""
    return bounds.l1 if strategy.cuts else bounds.whole_documents

