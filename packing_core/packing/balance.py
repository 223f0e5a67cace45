"""A plan's rows over data-parallel ranks and micro-batches, balanced by attention cost.

Packing evens out tokens per row, but attention costs the sum of len^2 of the documents
in a row, so two ranks with the same tokens can take very different time. A step waits
for the slowest rank::

    rows (tokens, attention):  A = one 512-token document (512, 262,144)   B = four of 128 (512, 65,536)
    rows A B A B on 2 ranks, i mod 2:  tokens 1,024 | 1,024   attention 524,288 | 131,072   max/mean 1.60
    balanced (A B | A B):              tokens 1,024 | 1,024   attention 327,680 | 327,680   max/mean 1.00

    >>> from packing_core.packing.strategies import make_plan
    >>> plan = make_plan([512, 128, 128, 128, 128, 512, 128, 128, 128, 128], 512, "next-fit")
    >>> r = balance_rows(plan, ranks=2, micro_batches=1)
    >>> round(r.before.attention_imbalance, 2), round(r.after.attention_imbalance, 2)
    (1.6, 1.0)

``before`` deals rows the way a distributed sampler does (row i to rank i mod R, then
consecutive micro-batches); ``after`` is longest-processing-time first with equal row
counts: rows sorted by cost, each round of R rows dealt heaviest to the lightest rank.
Every rank gets the same number of micro-batches, and every row lands exactly once.

Too few rows to fill every micro-batch is refused, or with ``fit=True`` shown on as many
ranks and micro-batches as the rows fill, and said so in ``note`` (the CLI and the pages
both fit, so one input gets one answer):

    >>> r = balance_rows(make_plan([100, 200, 300], 512, "bfd"), ranks=8, micro_batches=4, fit=True)
    >>> (r.ranks, r.micro_batches), r.note
    ((2, 1), 'The 2 rows cannot fill 8 ranks x 4 micro-batches: shown on 2 x 1.')
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import InputError, whole_number
from packing_core.packing.plan import Plan

MAX_RANKS = 2**20   # data-parallel ranks, and micro-batches per rank: far past any cluster (arrays are per rank)


@dataclass(frozen=True, eq=False)
class RankSplit:
    """One assignment: the rank and micro-batch of every row, and each rank's load."""

    rank: np.ndarray            # int64 [rows]
    micro_batch: np.ndarray     # int64 [rows]: 0 .. micro_batches - 1 within its rank
    rank_tokens: np.ndarray     # int64 [ranks]: real tokens
    rank_attention: np.ndarray  # int64 [ranks]: attention cost, sum of len^2 (the row width^2 unpacked)

    @property
    def token_imbalance(self) -> float:
        return _imbalance(self.rank_tokens)

    @property
    def attention_imbalance(self) -> float:
        return _imbalance(self.rank_attention)

    def to_dict(self) -> dict:
        return {"rank_tokens": self.rank_tokens.tolist(), "rank_attention": self.rank_attention.tolist(),
                "token_imbalance": self.token_imbalance, "attention_imbalance": self.attention_imbalance}


@dataclass(frozen=True, eq=False)
class BalanceReport:
    """Rows over ``ranks`` x ``micro_batches``: as a sampler deals them, and balanced by attention cost."""

    ranks: int
    micro_batches: int
    rows: int
    before: RankSplit
    after: RankSplit
    note: str = ""              # fit=True with too few rows: what was asked and what is shown instead

    def to_dict(self) -> dict:
        return {"ranks": self.ranks, "micro_batches": self.micro_batches, "rows": self.rows,
                "before": self.before.to_dict(), "after": self.after.to_dict(), "note": self.note}


def _imbalance(load: np.ndarray) -> float:
    """max / mean: 1.0 is perfect, 2.0 means the slowest rank does twice the average work."""
    mean = float(load.mean()) if len(load) else 0.0
    return float(load.max()) / mean if mean > 0 else 1.0


def row_loads(plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens, attention)`` per row: block-diagonal sum(len^2) when packed, width^2 when padded."""
    tokens = np.bincount(plan.placed.row, weights=plan.placed.length, minlength=plan.n_rows).astype(np.int64)
    if plan.packed:
        cost = np.bincount(plan.placed.row, weights=plan.placed.length.astype(np.float64) ** 2, minlength=plan.n_rows)
        return tokens, cost.astype(np.int64)
    return tokens, plan.row_width * plan.row_width


def _deal(cost: np.ndarray, bins: int) -> np.ndarray:
    """Equal-count LPT: rows by cost, heaviest first; each round of ``bins`` rows goes heaviest to lightest."""
    order = np.argsort(-cost, kind="stable")
    out = np.empty(len(cost), dtype=np.int64)
    load = np.zeros(bins, dtype=np.float64)
    for start in range(0, len(order), bins):
        take = order[start:start + bins]
        lightest = np.argsort(load, kind="stable")[: len(take)]
        out[take] = lightest
        load[lightest] += cost[take]
    return out


def _split(rank: np.ndarray, micro: np.ndarray, tokens, cost, ranks) -> RankSplit:
    return RankSplit(rank, micro, np.bincount(rank, weights=tokens, minlength=ranks).astype(np.int64),
                     np.bincount(rank, weights=cost.astype(np.float64), minlength=ranks).astype(np.int64))


def balance_rows(plan_or_loads, ranks: int, micro_batches: int = 1, *, fit: bool = False,
                 by=None) -> BalanceReport:
    """Split a plan's rows (or ``(tokens, attention)`` arrays per row) over ranks x micro-batches.

    With fewer rows than micro-batches: refused, or with ``fit=True`` shown on as many ranks (then
    micro-batches per rank) as the rows fill, with a ``note`` that says so. ``by`` is the cost per
    row that ``after`` balances (default: the attention cost); a step's cost with its linear layers
    counted comes from ``analysis.balance_report.step_balance``.
    """
    ranks = whole_number(ranks, "ranks", maximum=MAX_RANKS, hint="the data-parallel world size, e.g. 8")
    micro_batches = whole_number(micro_batches, "micro_batches", maximum=MAX_RANKS,
                                 hint="gradient-accumulation steps, e.g. 4")
    tokens, cost = row_loads(plan_or_loads) if isinstance(plan_or_loads, Plan) else map(np.asarray, plan_or_loads)
    n = len(tokens)
    weight = cost if by is None else np.asarray(by, dtype=np.float64)
    if weight.shape != (n,):
        raise InputError(f"by must hold one cost per row ({n:,}), got shape {weight.shape}")
    note = ""
    if n < ranks * micro_batches and fit and n > 0:
        fit_ranks = min(ranks, n)
        fit_micro = max(1, min(micro_batches, n // fit_ranks))
        note = (f"The {n:,} rows cannot fill {ranks:,} ranks x {micro_batches:,} micro-batches: shown on "
                f"{fit_ranks:,} x {fit_micro:,}.")
        ranks, micro_batches = fit_ranks, fit_micro
    if n < ranks * micro_batches:
        raise InputError(f"{n:,} rows cannot fill {ranks} ranks x {micro_batches} micro-batches = "
                         f"{ranks * micro_batches:,} micro-batches; use fewer ranks or micro-batches, or more data")
    # before: a distributed sampler (row i to rank i mod R), then consecutive micro-batches per rank
    idx = np.arange(n)
    rank = idx % ranks
    position = idx // ranks
    per_rank = np.bincount(rank, minlength=ranks)
    micro = position * micro_batches // per_rank[rank]
    before = _split(rank, micro.astype(np.int64), tokens, cost, ranks)
    # after: equal-count LPT over ranks, then again over each rank's micro-batches
    rank = _deal(weight, ranks)
    micro = np.empty(n, dtype=np.int64)
    for r in range(ranks):
        mine = np.flatnonzero(rank == r)
        micro[mine] = _deal(weight[mine], micro_batches)
    return BalanceReport(ranks, micro_batches, n, before, _split(rank, micro, tokens, cost, ranks), note)
