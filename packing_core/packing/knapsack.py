"""The pricing step of column generation: the most valuable row pattern, by dynamic programming.

Given a value per piece length (the LP's duals), which multiset of pieces that fits one row
(at most ``bound[i]`` pieces of length ``size[i]``, at most ``max_docs_per_row`` pieces in all)
is worth the most? A bounded knapsack. Each length's bound is split into binary pieces
(1, 2, 4, ..., the rest: any count up to the bound is a sum of distinct pieces), which makes it
a 0-1 knapsack over a few pieces per length; each piece updates the table of "best value within
capacity c" for every c at once (one numpy operation, no loop per capacity)::

    size 3 (value 1.0, bound 2) -> pieces 1 x 3 (value 1.0), 1 x 6 (value 2.0)
    capacity   0    1    2    3    4    5    6
    start      0    0    0    0    0    0    0
    + piece 3  0    0    0    1    1    1    1
    + piece 6  0    0    0    1    1    1    2

>>> best = price(np.array([3]), np.array([1.0]), np.array([2]), 6)
>>> best.value, best.patterns.tolist()
(2.0, [[2]])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Priced", "pricing_work", "price"]


@dataclass(frozen=True)
class Priced:
    """The best pattern's value, and up to ``keep`` valuable patterns (rows: copies of each length)."""

    value: float
    patterns: np.ndarray    # int64 [patterns, lengths]
    values: np.ndarray      # float64 [patterns]


def _pieces(bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Binary pieces of every bound: ``(length index, copies)`` per piece."""
    bits = np.maximum(1, np.floor(np.log2(np.maximum(bound, 1))).astype(np.int64) + 1)
    piece = np.repeat(np.arange(len(bound)), bits)
    j = np.arange(len(piece)) - np.repeat(np.cumsum(bits) - bits, bits)
    copies = np.left_shift(1, j)
    # the last piece of each length takes the rest: bound - (2**(bits-1) - 1)
    last = np.cumsum(bits) - 1
    copies[last] = bound - (np.left_shift(1, bits - 1) - 1)
    keep = copies > 0
    return piece[keep], copies[keep]


def pricing_work(size, bound, context: int, max_docs_per_row: int | None = None, per_piece: int = 0) -> int:
    """Table cells one pricing step updates: pieces x (context + 1) x (cap + 1), and ``per_piece`` more
    for each piece (the cost of one numpy call, counted in cells)."""
    pieces = int(np.maximum(1, np.floor(np.log2(np.maximum(np.asarray(bound), 1))) + 1).sum())
    return pieces * ((context + 1) * (1 if max_docs_per_row is None else max_docs_per_row + 1) + per_piece)


def price(size, value, bound, context: int, max_docs_per_row: int | None = None, *, keep: int = 1,
          above: float = 0.0) -> Priced:
    """The most valuable patterns: pieces of ``size`` worth ``value`` each, at most ``bound`` of each,
    within ``context`` slots (and ``max_docs_per_row`` pieces). Lengths of value <= 0 are left out.

    ``keep`` > 1 also returns the best patterns that end below the full context, each worth more
    than ``above``: several new columns from one pricing step.

    >>> p = price(np.array([2, 3]), np.array([0.5, 0.8]), np.array([5, 5]), 6, max_docs_per_row=2, keep=3)
    >>> p.patterns.tolist(), p.values.round(2).tolist()     # 3+3, 2+3, 2+2 (a cap of 2 pieces)
    ([[0, 2], [1, 1], [2, 0]], [1.6, 1.3, 1.0])
    """
    size = np.asarray(size, np.int64)
    value = np.asarray(value, np.float64)
    bound = np.minimum(np.asarray(bound, np.int64), context // size)
    if max_docs_per_row is not None:
        bound = np.minimum(bound, max_docs_per_row)
    live = np.flatnonzero((value > 0) & (bound > 0))
    piece, copies = _pieces(bound[live])
    piece = live[piece]
    w, v = copies * size[piece], copies * value[piece]
    capped = max_docs_per_row is not None
    k_rows = max_docs_per_row + 1 if max_docs_per_row is not None else 1
    width = context + 1
    dp = np.zeros(k_rows * width)           # dp[k * width + c]: best value of <= k pieces within c slots
    take = np.zeros((len(piece), k_rows * width), dtype=bool)
    # a piece of m pieces and w slots moves value from cell (k, c) to (k + m, c + w): a shift of
    # m * width + w in the flat table, never across a row of k (cells with c + w > context are masked)
    if capped:
        inside = np.tile(np.arange(width), k_rows)
    for t in range(len(piece)):
        shift = int(w[t]) + (int(copies[t]) * width if capped else 0)
        src = dp[: len(dp) - shift] + v[t]
        dst = dp[shift:]
        better = take[t, shift:]
        np.greater(src, dst, out=better)
        if capped:
            better &= inside[shift:] >= w[t]
        np.copyto(dst, src, where=better)
    # ends: the cells worth the most (the best first), walked back through the pieces that took them
    order = np.argsort(-dp, kind="stable")[: keep * 4] if keep > 1 else np.array([int(np.argmax(dp))])
    order = order[(dp[order] > above) | (np.arange(len(order)) == 0)]
    pats = np.zeros((len(order), len(size)), np.int64)
    for e, cell in enumerate(order.tolist()):
        t = len(piece)
        while cell > 0:
            hits = np.flatnonzero(take[:t, cell])
            if not len(hits):
                break
            t = int(hits[-1])
            pats[e, piece[t]] += copies[t]
            cell -= int(w[t]) + (int(copies[t]) * width if capped else 0)
    seen: dict[bytes, int] = {}
    for e, p in enumerate(pats):
        seen.setdefault(p.tobytes(), e)
    first = np.array(sorted(seen.values())[:keep], np.int64)
    return Priced(float(dp.max()), pats[first], dp[order][first])
