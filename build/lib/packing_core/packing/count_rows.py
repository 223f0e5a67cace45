"""Rows from a length histogram: each count-only strategy's ``from_counts`` function.

pad, concat-cut, ffd, bfd and bucket depend only on the *multiset* of lengths, so they
run on ``piece lengths -> pieces`` without one array entry per document. Rows that share a
remaining room behave alike, so first- and best-fit move whole groups of rows at once::

    pieces {300: 2, 200: 3}, context 512
    bfd: two rows [300 .] room 212 -> each takes one 200 -> room 12; one new row [200 200]
         3 rows

>>> rows_bfd(np.array([200, 300]), np.array([3, 2]), 512, None).rows
3
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from packing_core.packing.options import cap_of, refuse_cap
from packing_core.packing.patterns import fit_decreasing_patterns

__all__ = ["CountRows", "rows_bfd", "rows_bucket", "rows_concat_cut", "rows_ffd", "rows_pad"]


@dataclass(frozen=True)
class CountRows:
    """What a strategy's rows cost: how many, their slots, and the sum of their squared widths."""

    rows: int
    slots: int
    cost_padded: int
    certificate: object = None   # optimal: its Certificate (rows, proven bound, gap)


def _full(n_rows: int, context: int) -> CountRows:
    return CountRows(n_rows, n_rows * context, n_rows * context * context)


def rows_pad(piece_len, piece_n, context: int, opts) -> CountRows:
    return _full(int(piece_n.sum()), context)


def rows_concat_cut(item_len, item_n, context: int, opts) -> CountRows:
    refuse_cap("concat-cut", opts)
    return _full(-(-int((item_len * item_n).sum()) // context), context)


def rows_ffd(item_len, item_n, context: int, opts) -> CountRows:
    if cap_of(opts) is not None:   # the array planner's own capped patterns: the same rows by construction
        return _full(fit_decreasing_patterns(item_len, item_n, context, best=False, max_docs_per_row=cap_of(opts)).rows,
                     context)
    return _full(_ffd_rows(item_len, item_n, context), context)


def rows_bfd(item_len, item_n, context: int, opts) -> CountRows:
    if cap_of(opts) is not None:
        return _full(fit_decreasing_patterns(item_len, item_n, context, best=True, max_docs_per_row=cap_of(opts)).rows,
                     context)
    return _full(_bfd_rows(item_len, item_n, context), context)


def rows_bucket(piece_len, piece_n, context: int, opts) -> CountRows:
    """Every row padded to its bucket's longest piece: an upper bound on the shuffled plan."""
    pieces = int(piece_n.sum())
    w = _bucket_widths(piece_len, piece_n, context, min(int(opts.buckets), max(1, pieces // int(opts.batch_size))))
    return CountRows(pieces, int((w * piece_n).sum()), int((w * w * piece_n).sum()))


def _bfd_rows(piece_len: np.ndarray, piece_n: np.ndarray, context: int) -> int:
    """Best-fit decreasing on a histogram: rows tracked as counts per remaining room.

    Sizes come longest first, so a room too small for this size may fit a later one, and a
    room that fits stays a candidate for every later size. Candidates wait in a min-heap
    (tightest fit first), the rest in a max-heap until the size falls to them: each room is
    pushed and popped a bounded number of times, so the work is O(D log D) in the distinct
    lengths and rooms, not a scan of every room per length. ``rooms`` is sparse, so memory
    follows the data, never the context.
    """
    rooms: dict[int, int] = {}    # rooms[c]: rows with c slots free (c > 0, count > 0)
    ready: list[int] = []         # rooms >= the current size, smallest on top
    waiting: list[int] = []       # rooms below it, negated: largest on top
    n_rows, size = 0, context + 1

    def add(c: int, k: int) -> None:
        if k and c:
            if c in rooms:
                rooms[c] += k
            else:
                rooms[c] = k
                heapq.heappush(ready, c) if c >= size else heapq.heappush(waiting, -c)

    for size, need in zip(piece_len[::-1].tolist(), piece_n[::-1].tolist()):
        while waiting and -waiting[0] >= size:
            heapq.heappush(ready, -heapq.heappop(waiting))
        while need and ready:     # tightest fit first
            c = ready[0]
            have, q = rooms[c], c // size
            full = min(have, need // q)
            part = need - full * q if full < have else 0
            used = full + (part > 0)
            if used == have:
                heapq.heappop(ready)
                del rooms[c]
            else:
                rooms[c] = have - used
            need -= full * q + part
            add(c - q * size, full)     # below this size: waits
            if part:                    # need is met: the loop ends here
                add(c - part * size, 1)
        if need:
            q = context // size
            full, part = divmod(need, q)
            add(context - q * size, full)
            if part:
                add(context - part * size, 1)
            n_rows += full + (part > 0)
    return n_rows


def _ffd_rows(piece_len: np.ndarray, piece_n: np.ndarray, context: int) -> int:
    """First-fit decreasing on a histogram: rows in creation order as runs of equal room."""
    room = np.zeros(0, dtype=np.int64)     # run r: run_n[r] consecutive rows with room[r] free
    run_n = np.zeros(0, dtype=np.int64)
    for size, need in zip(piece_len[::-1].tolist(), piece_n[::-1].tolist()):
        fits = np.flatnonzero(room >= size)
        if len(fits):
            q = room[fits] // size
            cum = np.cumsum(q * run_n[fits])
            k = int(np.searchsorted(cum, need))            # the run where this length runs out
            if k >= len(fits):
                room[fits] -= q * size
                need -= int(cum[-1])
            else:
                before = int(cum[k - 1]) if k else 0
                room[fits[:k]] -= q[:k] * size
                r, left = int(fits[k]), need - before
                full, part = divmod(left, int(q[k]))
                c = int(room[r])
                pieces = [(c - int(q[k]) * size, full), (c - part * size, int(part > 0)),
                          (c, int(run_n[r]) - full - int(part > 0))]
                pieces = [(a, b) for a, b in pieces if b > 0]
                room = np.concatenate([room[:r], [a for a, _ in pieces], room[r + 1:]]).astype(np.int64)
                run_n = np.concatenate([run_n[:r], [b for _, b in pieces], run_n[r + 1:]]).astype(np.int64)
                need = 0
        if need:
            q = context // size
            full, part = divmod(need, q)
            new = [(context - q * size, full), (context - part * size, int(part > 0))]
            new = [(a, b) for a, b in new if b > 0]
            room = np.concatenate([room, [a for a, _ in new]]).astype(np.int64)
            run_n = np.concatenate([run_n, [b for _, b in new]]).astype(np.int64)
    return int(run_n.sum())


def _bucket_widths(piece_len, piece_n, context, buckets):
    """Quantile buckets over the pieces; every row padded to its bucket's longest piece."""
    cum = np.cumsum(piece_n)
    total = int(cum[-1])
    # the same 'higher' quantiles make_plan uses: edge = the piece at rank ceil(q * (n - 1))
    ranks = np.ceil(np.linspace(0, 1, buckets + 1)[1:] * (total - 1)).astype(np.int64)
    edges = np.unique(piece_len[np.searchsorted(cum, ranks, side="right")])
    bucket = np.searchsorted(edges, piece_len, side="left")
    return edges[bucket]    # each piece length's row width
