"""Padding, bucketing and packing strategies: lengths -> Plan.

``make_plan`` is four steps: check the arguments, apply the over-long policy (``pieces.py``:
documents become *pieces* no longer than the context), let the chosen strategy ``place``
the pieces (``registry.py`` lists the strategies, ``place.py`` holds their code), and wrap
the placement in a ``Plan``. Packing strategies may then shuffle their rows.
"""
from __future__ import annotations

import numpy as np

from packing_core._validate import (
    MAX_SPLIT_PIECES,
    OVERLONG_POLICIES,
    InputError,
    as_batch_size,
    as_bucket_edges,
    as_context,
    as_lengths,
    as_seed,
    choice,
    limit_hint,
    whole_number,
)
from packing_core.packing.options import DEFAULT_TIME_LIMIT, PlanOptions, as_max_docs_per_row, as_time_limit
from packing_core.packing.pieces import piece_count, pieces_from_lengths
from packing_core.packing.plan import PlacedPieces, Plan, PlanMetrics
from packing_core.packing.registry import PACKING_STRATEGIES, STRATEGIES, STRATEGY_INFO, get_strategy

__all__ = ["MAX_SPLIT_PIECES", "OVERLONG_POLICIES", "PACKING_STRATEGIES", "STRATEGIES", "STRATEGY_INFO", "compare",
           "make_plan"]



def _check_split(arr: np.ndarray, context: int) -> None:
    pieces = piece_count(arr, context, "split")
    if pieces - len(arr) > MAX_SPLIT_PIECES:
        i = int(np.argmax(arr))
        raise InputError(
            f"splitting at context {context} would make {pieces:,} pieces from {len(arr):,} documents "
            f"(the longest, at position {i}, has {int(arr[i])} tokens); at most {MAX_SPLIT_PIECES:,} extra pieces "
            "are allowed: check the lengths, "
            f"raise the context, or use overlong='truncate' or 'drop' ({limit_hint('MAX_SPLIT_PIECES')})"
        )


def _flag(value, name: str) -> bool:
    """True or False (numpy's too); ``'no'`` or ``1`` are refused, never read as a truth value."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} must be True or False, got {value!r}"[:300])
    return bool(value)


def make_plan(
    lengths,
    context: int,
    strategy: str,
    *,
    overlong: str = "split",
    batch_size: int = 32,
    sort: bool = False,
    buckets: int = 8,
    bucket_edges=None,
    shuffle: bool = False,
    seed: int = 0,
    max_docs_per_row: int | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT,
) -> Plan:
    """Place documents of ``lengths`` into rows of ``context`` slots.

    >>> m = make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut").metrics()
    >>> m.rows, m.slots, round(m.utilisation, 3)
    (2, 1024, 0.889)

    ``batch_size`` and ``sort`` shape ``pad-longest``; ``buckets`` (a count of
    quantile buckets, at most one per ``batch_size`` samples) or ``bucket_edges``
    (upper edges) shape ``bucket``;
    ``shuffle`` randomly reorders the rows of packing strategies, so packed batches
    are not sorted by length. The same ``seed`` gives the same plan.

    ``max_docs_per_row`` caps the documents (pieces) in a row, for static shapes: every packing
    strategy that keeps documents whole honours it exactly, at a price in rows:

    >>> make_plan([10] * 9, 512, "bfd", max_docs_per_row=4).n_rows
    3

    ``time_limit`` (seconds) bounds ``optimal``, which returns its best plan within it and
    carries a ``certificate`` (its proven lower bound and gap in rows).
    """
    # 1. validate
    context = as_context(context)
    s = get_strategy(strategy)
    choice("overlong policy", overlong, OVERLONG_POLICIES)
    shuffle = _flag(shuffle, "shuffle")
    opts = PlanOptions(batch_size=as_batch_size(batch_size), sort=_flag(sort, "sort"),
                       buckets=whole_number(buckets, "buckets", hint="try 8"),
                       bucket_edges=None if bucket_edges is None else as_bucket_edges(bucket_edges),
                       max_docs_per_row=as_max_docs_per_row(max_docs_per_row, context),
                       time_limit=as_time_limit(time_limit))
    rng = np.random.default_rng(as_seed(seed))
    lengths = as_lengths(lengths, copy=False)
    if overlong == "split":
        _check_split(lengths, context)
    # 2. pieces
    it = pieces_from_lengths(lengths, context, overlong)
    if len(it.length) == 0:
        raise InputError(
            f"every document is longer than the context ({context}) and overlong='drop' dropped them all; "
            "raise the context, or use overlong='split' or 'truncate'"
        )
    # 3. place
    p = s.place(it, context, opts, rng)
    if opts.max_docs_per_row is not None and len(p.row):
        most = int(np.bincount(p.row).max())
        if most > opts.max_docs_per_row:   # a strategy registered without the cap in its place()
            raise InputError(f"strategy {s.name!r} put {most} documents in one row, above max_docs_per_row="
                             f"{opts.max_docs_per_row}; it does not take the cap: use next-fit, ffd, bfd or optimal")
    row = p.row
    if shuffle and s.packs and len(p.row_width) > 1:
        row = rng.permutation(len(p.row_width))[row]
    # 4. the plan
    return Plan(strategy=s.name, context=context, overlong=overlong, lengths=lengths,
                placed=PlacedPieces(p.doc, p.start, p.length, row, p.offset),
                row_width=np.asarray(p.row_width, dtype=np.int64), packed=s.packs,
                certificate=getattr(p, "certificate", None))


def compare(lengths, context: int, strategies=STRATEGIES, **kwargs) -> list[PlanMetrics]:
    """Metrics of every strategy on the same lengths, in the order given."""
    return [make_plan(lengths, context, s, **kwargs).metrics() for s in strategies]
