"""Where each strategy puts the pieces: one ``place`` function per strategy, over arrays.

Each takes the pieces (after the over-long policy), the context, the plan's options and a
seeded generator, and returns a :class:`Placement`: the pieces, their rows and offsets, and
each row's width. ``registry.py`` lists them; ``make_plan`` calls the one it is asked for.

    pad          one piece per row, each row as wide as the context
    pad-longest  batches of ``batch_size`` pieces, each row as wide as the batch's longest
    bucket       pieces grouped by length bucket, shuffled inside each bucket, then batched
    concat-cut   one stream of all tokens cut into full rows (documents split at row edges)
    next-fit     pieces in order; open a new row when the next one does not fit
    ffd          first-fit decreasing: longest first, into the first row with room
    bfd          best-fit decreasing: longest first, into the row with the least room that fits

All placement is vectorised over arrays, or over the length histogram (at most
``context`` distinct lengths), never a Python loop per document.

>>> from packing_core.packing.pieces import pieces_from_lengths
>>> p = place_next_fit(pieces_from_lengths(np.array([3, 2, 4]), 5, "split"), 5, PlanOptions(), None)
>>> p.row.tolist(), p.offset.tolist(), p.row_width.tolist()
([0, 0, 1], [0, 3, 0], [5, 5])
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from packing_core.packing.options import PlanOptions, cap_of, refuse_cap
from packing_core.packing.patterns import deal, fit_decreasing_patterns
from packing_core.packing.pieces import Pieces
from packing_core.packing.plan import cu_seqlens_from_lengths


@dataclass(frozen=True)
class Placement:
    """The pieces a strategy placed (in its own order), their rows and offsets, and each row's width."""

    doc: np.ndarray
    start: np.ndarray
    length: np.ndarray
    row: np.ndarray
    offset: np.ndarray
    row_width: np.ndarray
    certificate: object = None   # optimal: its Certificate (rows, proven bound, gap)


def _padded(it: Pieces, order: np.ndarray, widths: np.ndarray) -> Placement:
    """One piece per row, rows in ``order``."""
    n = len(it.length)
    row_of_piece = np.empty(n, dtype=np.int64)
    row_of_piece[order] = np.arange(n)
    return Placement(it.doc, it.start, it.length, row_of_piece, np.zeros(n, np.int64), widths)


def _full_rows(it: Pieces, row: np.ndarray, offset: np.ndarray, n_rows: int, context: int) -> Placement:
    return Placement(it.doc, it.start, it.length, row, offset, np.full(n_rows, context, np.int64))


def place_pad(it: Pieces, context: int, opts: PlanOptions, rng) -> Placement:
    n = len(it.length)
    return _padded(it, np.arange(n), np.full(n, context, dtype=np.int64))


def place_pad_longest(it: Pieces, context: int, opts: PlanOptions, rng) -> Placement:
    n = len(it.length)
    order = np.argsort(-it.length, kind="stable") if opts.sort else np.arange(n)
    return _padded(it, order, _batched_rows(order, it, np.arange(n) // opts.batch_size))


def place_bucket(it: Pieces, context: int, opts: PlanOptions, rng) -> Placement:
    n, batch_size = len(it.length), opts.batch_size
    bucket_of = _bucket_of(it.length, context, opts.buckets, opts.bucket_edges, batch_size)
    # shuffle, then a stable sort by bucket: random order inside each bucket
    # (bucket ids are small, so the stable sort is a radix sort)
    perm = rng.permutation(n)
    order = perm[np.argsort(bucket_of[perm], kind="stable")]
    # a batch starts at every bucket start and every batch_size pieces inside a bucket
    ends = np.cumsum(np.bincount(bucket_of))
    first = np.concatenate([np.arange(a, b, batch_size) for a, b in zip(ends - np.diff(ends, prepend=0), ends)])
    sizes = np.diff(np.append(first, n))
    # lay the batches out in a random order, so long and short batches interleave
    shuffled = rng.permutation(len(first))
    take = np.repeat(first[shuffled] - np.cumsum(sizes[shuffled]) + sizes[shuffled], sizes[shuffled])
    order = order[take + np.arange(n)]
    batch_of = np.repeat(np.arange(len(first)), sizes[shuffled])
    return _padded(it, order, _batched_rows(order, it, batch_of))


def place_concat_cut(it: Pieces, context: int, opts: PlanOptions, rng) -> Placement:
    refuse_cap("concat-cut", opts)
    # cut points fall at multiples of the context in the kept stream
    end = np.cumsum(it.length)
    begin = end - it.length
    first_row = begin // context
    n_pieces = (end - 1) // context - first_row + 1
    rep = lambda a: np.repeat(a, n_pieces)  # noqa: E731  (sequential, cheaper than fancy indexing)
    row = rep(first_row) + (np.arange(int(n_pieces.sum())) - rep(np.cumsum(n_pieces) - n_pieces))
    b, cut = rep(begin), row * context
    lo = np.maximum(b, cut)
    hi = np.minimum(rep(end), cut + context)
    n_rows = int(-(-end[-1] // context))
    return Placement(rep(it.doc), rep(it.start) + lo - b, hi - lo, row, lo - cut, np.full(n_rows, context, np.int64))


def place_next_fit(it: Pieces, context: int, opts: PlanOptions, rng) -> Placement:
    starts = _next_fit_starts(it.length, context, cap_of(opts))
    row = np.searchsorted(starts, np.arange(len(it.length)), side="right") - 1
    cum = cu_seqlens_from_lengths(it.length)
    return _full_rows(it, row, cum[:-1] - cum[starts[row]], len(starts), context)


def place_ffd(it: Pieces, context: int, opts: PlanOptions, rng) -> Placement:
    if (cap := cap_of(opts)) is not None:
        return _capped(it, context, cap, best=False)
    row, offset, n_rows = _fit_decreasing(it.length, context, best=False)
    return _full_rows(it, row, offset, n_rows, context)


def place_bfd(it: Pieces, context: int, opts: PlanOptions, rng) -> Placement:
    if (cap := cap_of(opts)) is not None:
        return _capped(it, context, cap, best=True)
    row, offset, n_rows = _fit_decreasing(it.length, context, best=True)
    return _full_rows(it, row, offset, n_rows, context)


def _capped(it: Pieces, context: int, cap: int, best: bool) -> Placement:
    """First- or best-fit decreasing with at most ``cap`` pieces a row: the patterns, dealt to the pieces."""
    sizes, n = np.unique(it.length, return_counts=True)
    patterns = fit_decreasing_patterns(sizes, n, context, best=best, max_docs_per_row=cap)
    row, offset = deal(patterns, it.length)
    return _full_rows(it, row, offset, patterns.rows, context)


def _batched_rows(order: np.ndarray, it: Pieces, batch_of: np.ndarray):
    """Rows in ``order``; each row as wide as the longest piece of its batch."""
    n_batches = int(batch_of.max()) + 1 if len(batch_of) else 0
    widths = np.zeros(n_batches, dtype=np.int64)
    np.maximum.at(widths, batch_of, it.length[order])
    return widths[batch_of]


def _next_fit_starts(length: np.ndarray, context: int, cap: int | None = None) -> np.ndarray:
    """Indices where next-fit opens a new row, by pointer doubling.

    ``nxt[i]`` is the first piece that no longer fits in a row starting at piece ``i`` (nor under
    the cap on pieces per row);
    row starts are the orbit 0, nxt[0], nxt[nxt[0]], ... Squaring the jump table
    doubles the known orbit each round: log2(rows) vectorised rounds.
    """
    n = len(length)
    cum = cu_seqlens_from_lengths(length)
    jump = np.searchsorted(cum, cum[:-1] + context, side="right") - 1
    if cap is not None:
        jump = np.minimum(jump, np.arange(n) + cap)
    jump = np.append(jump, n).astype(np.int64)
    starts = np.zeros(1, dtype=np.int64)
    while jump[0] < n:
        more = jump[starts]
        starts = np.concatenate([starts, more[more < n]])
        jump = jump[jump]
    return np.sort(starts)


def _takes(full: int, q: int, part: int) -> np.ndarray:
    """Pieces taken by each row: ``full`` rows take ``q``, then one row takes ``part`` (if any)."""
    t = np.full(full + (part > 0), q, dtype=np.int64)
    if part:
        t[-1] = part
    return t


def _fit_decreasing(length: np.ndarray, context: int, best: bool):
    """First- or best-fit decreasing over the length histogram.

    Pieces of one length L are placed together: a row with room c takes c // L of
    them in a row (after one, it is still the first, or the tightest, fit). Returns
    (row, offset) per piece, in input order.
    """
    n = len(length)
    # lengths fit 16 bits, where numpy's stable argsort is a radix sort
    key = (context - length).astype(np.uint16 if context < 2**16 else np.int64)
    order = np.argsort(key, kind="stable")
    sorted_len = length[order]
    values, first = np.unique(-sorted_len, return_index=True)
    row = np.empty(n, dtype=np.int64)
    offset = np.empty(n, dtype=np.int64)
    room = np.zeros(0, dtype=np.int64)          # ffd: remaining room of every row, by row id
    by_room: dict[int, np.ndarray] = {}         # bfd: row ids grouped by remaining room
    rooms: list[int] = []                       # bfd: the keys of by_room, ascending (never re-sorted)

    def add_room(rest: int, ids_: np.ndarray) -> None:
        if len(ids_):
            if rest not in by_room:
                bisect.insort(rooms, rest)
            by_room[rest] = np.concatenate([by_room.get(rest, np.zeros(0, np.int64)), ids_])
    n_rows = 0
    bounds = list(first) + [n]
    for g, neg in enumerate(values):
        size = int(-neg)
        lo, hi = bounds[g], bounds[g + 1]
        need = hi - lo
        takers, takes, base = [], [], []      # rows, pieces each takes, first free offset
        if best:   # the rooms that fit, tightest first; rooms made meanwhile are smaller than the one just used
            j = bisect.bisect_left(rooms, size)
            while need and j < len(rooms):
                c = rooms.pop(j)
                ids = by_room.pop(c)
                q = c // size
                full = min(len(ids), need // q)
                part = need - full * q if full < len(ids) else 0
                used = full + (part > 0)
                takers.append(ids[:used])
                takes.append(_takes(full, q, part))
                base.append(np.full(used, context - c))
                need -= full * q + part
                for rest, ids_ in ((c - q * size, ids[:full]), (c - part * size, ids[full:used]), (c, ids[used:])):
                    add_room(rest, ids_)
                j = bisect.bisect_right(rooms, c)
        else:
            fits = np.nonzero(room >= size)[0]
            if len(fits) and need:
                fit_q = room[fits] // size
                cum = np.cumsum(fit_q)
                k = int(np.searchsorted(cum, need))     # first row that finishes the group
                if k < len(fits):
                    t = fit_q[: k + 1].copy()
                    t[k] = need - (cum[k - 1] if k else 0)
                    ids = fits[: k + 1]
                else:
                    t, ids = fit_q, fits
                takers.append(ids)
                takes.append(t)
                base.append(context - room[ids])
                room[ids] -= t * size
                need -= int(t.sum())
        if need:
            q0 = context // size
            full, part = divmod(need, q0)
            new = np.arange(n_rows, n_rows + full + (part > 0), dtype=np.int64)
            t = _takes(full, q0, part)
            n_rows += len(new)
            takers.append(new)
            takes.append(t)
            base.append(np.zeros(len(new), dtype=np.int64))
            if best:
                for rest, ids_ in ((context - q0 * size, new[:full]), (context - part * size, new[full:])):
                    add_room(rest, ids_)
            else:
                room = np.concatenate([room, context - t * size])
        rows_g = np.concatenate(takers)
        takes_g = np.concatenate(takes)
        base_g = np.concatenate(base)
        slot_row = np.repeat(rows_g, takes_g)
        within = np.arange(len(slot_row)) - np.repeat(np.cumsum(takes_g) - takes_g, takes_g)
        slot_off = np.repeat(base_g, takes_g) + within * size
        row[order[lo:hi]] = slot_row
        offset[order[lo:hi]] = slot_off
    return row, offset, n_rows


def _bucket_of(length: np.ndarray, context: int, buckets: int, bucket_edges, batch_size: int) -> np.ndarray:
    if bucket_edges is not None:
        edges = np.asarray(sorted(set(bucket_edges)), dtype=np.int64)   # checked by make_plan
    else:
        # quantile edges: buckets of about equal size on this data, each at least one full
        # batch (eight buckets over eight samples would be eight one-row "batches")
        buckets = min(int(buckets), max(1, len(length) // batch_size))
        edges = np.unique(np.quantile(length, np.linspace(0, 1, buckets + 1)[1:], method="higher").astype(np.int64))
    longest = int(length.max())
    if longest > 1 << 20:  # a table per possible length would be huge: one search per piece instead
        return np.searchsorted(edges, length, side="left")
    # a table of every length up to the longest piece (sized by the data, never by the context)
    table = np.searchsorted(edges, np.arange(longest + 1), side="left")
    return table.astype(np.uint16 if len(edges) < 2**16 - 1 else np.int64)[length]
