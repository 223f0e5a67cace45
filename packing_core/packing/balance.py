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

A rank waits for the others once per optimizer step, so the balance that matters is the one of
each step's rows. :func:`balance_steps` draws every step in turn from the shuffled rows (ranks x
micro-batches x rows per micro-batch each), balances each step on its own and averages over the
epoch's steps. Summed over a whole epoch, ranks dealt equal row counts come out even (the sum of
many draws), so an epoch total hides the imbalance each step pays:

    >>> plan = make_plan(([512] + [64] * 8) * 100, 512, "next-fit")   # 100 heavy rows, 100 light ones
    >>> s = balance_steps(plan, ranks=2, micro_batches=2, seed=0)
    >>> s.steps, round(s.epoch_imbalance, 2)                         # the epoch: even
    (50, 1.02)
    >>> round(s.before_imbalance, 2), round(s.after_imbalance, 2), round(s.cut, 2)   # the average step
    (1.4, 1.25, 0.09)
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


def _deal_each(cost: np.ndarray, bins: int) -> np.ndarray:
    """Equal-count LPT on each line of ``cost`` [groups, rows] at once: rows by cost, heaviest first; each round
    of ``bins`` rows goes heaviest to the lightest bin. Returns the bin of every row, [groups, rows]."""
    cost = np.asarray(cost, dtype=np.float64)
    groups, n = cost.shape
    order = np.argsort(-cost, axis=1, kind="stable")
    out = np.empty((groups, n), dtype=np.int64)
    load = np.zeros((groups, bins), dtype=np.float64)
    line = np.arange(groups)[:, None]
    for start in range(0, n, bins):
        take = order[:, start:start + bins]
        lightest = np.argsort(load, axis=1, kind="stable")[:, : take.shape[1]]
        np.put_along_axis(out, take, lightest, axis=1)
        load[line, lightest] += np.take_along_axis(cost, take, axis=1)
    return out


def _deal(cost: np.ndarray, bins: int) -> np.ndarray:
    """Equal-count LPT over one set of rows (:func:`_deal_each` on one line)."""
    return _deal_each(np.asarray(cost, dtype=np.float64)[None, :], bins)[0]


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


@dataclass(frozen=True, eq=False)
class StepSplits:
    """Every optimizer step of an epoch: ``ranks`` x ``micro_batches`` x ``rows_per_micro_batch`` rows drawn in
    turn from the (shuffled) rows, each step dealt as a distributed sampler deals it and balanced on its own.

    ``rows`` [steps, per step] are the plan's row indices of each step; ``before`` and ``after`` the rank of each
    of them. Any per-row load (tokens, attention, step FLOPs) sums per rank and step with :meth:`rank_loads`.
    """

    ranks: int
    micro_batches: int
    rows_per_micro_batch: int
    plan_rows: int              # rows of the plan; the last ``left_over`` of the drawn order fill no whole step
    rows: np.ndarray            # int64 [steps, ranks * micro_batches * rows_per_micro_batch]
    before: np.ndarray          # int64, same shape: the rank of each row as a sampler deals it (slot i to i mod R)
    after: np.ndarray           # int64, same shape: the rank after balancing the step by ``by``
    attention: np.ndarray       # int64 [plan rows]: the attention cost of every row (sum of len^2)
    first: BalanceReport        # step 0, rank by rank and micro-batch by micro-batch: what a figure draws
    shuffled: bool = True
    seed: int = 0
    note: str = ""

    @property
    def steps(self) -> int:
        return int(self.rows.shape[0])

    @property
    def left_over(self) -> int:
        return self.plan_rows - int(self.rows.size)

    def rank_loads(self, per_row, split: str = "before") -> np.ndarray:
        """``per_row`` (one load per plan row) summed per step and rank: float [steps, ranks]."""
        rank = self.before if split == "before" else self.after
        flat = (np.arange(self.steps)[:, None] * self.ranks + rank).ravel()
        load = np.asarray(per_row, dtype=np.float64)[self.rows].ravel()
        return np.bincount(flat, weights=load, minlength=self.steps * self.ranks).reshape(self.steps, self.ranks)

    def imbalance(self, split: str = "before", per_row=None) -> np.ndarray:
        """Each step's max / mean over its ranks (attention unless ``per_row`` is given): float [steps]."""
        load = self.rank_loads(self.attention if per_row is None else per_row, split)
        mean = load.mean(axis=1)
        return np.divide(load.max(axis=1), mean, out=np.ones_like(mean), where=mean > 0)

    def cuts(self, per_row=None, other: StepSplits | None = None) -> np.ndarray:
        """Each step's cut of its slowest rank (attention unless ``per_row``), balanced (``other``'s balance if
        given) against as dealt: 1 - after max / before max, float [steps]."""
        per_row = self.attention if per_row is None else per_row
        before = self.rank_loads(per_row, "before").max(axis=1)
        after = (other or self).rank_loads(per_row, "after").max(axis=1)
        return np.divide(before - after, before, out=np.zeros_like(before), where=before > 0)

    @property
    def before_imbalance(self) -> float:
        """The average step's attention max/mean as a sampler deals the rows."""
        return float(self.imbalance("before").mean()) if self.steps else 1.0

    @property
    def after_imbalance(self) -> float:
        return float(self.imbalance("after").mean()) if self.steps else 1.0

    @property
    def cut(self) -> float:
        """The average step's cut of its slowest rank's attention cost (0.25 = 25 %)."""
        return float(self.cuts().mean()) if self.steps else 0.0

    @property
    def epoch_imbalance(self) -> float:
        """Attention max/mean of the ranks' totals over every step, as dealt: always close to 1.00."""
        return _imbalance(self.rank_loads(self.attention).sum(axis=0)) if self.steps else 1.0

    def to_dict(self) -> dict:
        return {"ranks": self.ranks, "micro_batches": self.micro_batches,
                "rows_per_micro_batch": self.rows_per_micro_batch, "steps": self.steps, "rows": self.plan_rows,
                "left_over": self.left_over, "shuffled": self.shuffled, "seed": self.seed, "note": self.note,
                "attention_imbalance_per_step": {"before": self.before_imbalance, "after": self.after_imbalance},
                "attention_cut_per_step": self.cut, "epoch_attention_imbalance": self.epoch_imbalance,
                "first_step": self.first.to_dict()}


def rows_word(n: int) -> str:
    """``1 row``, ``4 rows``."""
    return f"{n:,} row{'' if n == 1 else 's'}"


def _fit_step(n: int, ranks: int, micro: int, per_micro: int) -> tuple[int, int, int, str]:
    """The largest ranks x micro-batches x rows per micro-batch that ``n`` rows fill, and a note if it shrank."""
    if n >= ranks * micro * per_micro:
        return ranks, micro, per_micro, ""
    if n >= ranks * micro:
        fit = (ranks, micro, n // (ranks * micro))
    else:
        fit_ranks = min(ranks, n)
        fit = (fit_ranks, max(1, min(micro, n // fit_ranks)), 1)
    return (*fit, (f"The {n:,} rows cannot fill one step of {ranks} ranks x {micro} micro-batches x "
                   f"{rows_word(per_micro)}: shown on {fit[0]} x {fit[1]} x {rows_word(fit[2])}."))


def balance_steps(plan_or_loads, ranks: int, micro_batches: int = 1, rows_per_micro_batch: int = 1, *,
                  shuffle: bool = True, seed: int = 0, by=None, fit: bool = False) -> StepSplits:
    """Deal a plan's rows (or ``(tokens, attention)`` arrays per row) step by step, and balance each step.

    The rows are drawn in a seeded random order (``shuffle``, as a sampler shuffles them; else in the plan's
    order), ``ranks x micro_batches x rows_per_micro_batch`` per optimizer step; rows past the last whole
    step are left over (``left_over``). ``before``: each step as a distributed sampler deals it (its i-th row
    to rank i mod R); ``after``: each step balanced by ``by`` (default: the attention cost), equal-count
    longest-processing-time first, as :func:`balance_rows` balances one set of rows. Too few rows for one
    step are refused, or with ``fit=True`` shown on a step they fill, and said so in ``note``.
    """
    ranks = whole_number(ranks, "ranks", maximum=MAX_RANKS, hint="the data-parallel world size, e.g. 8")
    micro_batches = whole_number(micro_batches, "micro_batches", maximum=MAX_RANKS,
                                 hint="gradient-accumulation steps, e.g. 4")
    per_micro = whole_number(rows_per_micro_batch, "rows_per_micro_batch", maximum=MAX_RANKS,
                             hint="the per-device batch in rows, e.g. 1")
    tokens, cost = row_loads(plan_or_loads) if isinstance(plan_or_loads, Plan) else map(np.asarray, plan_or_loads)
    n = len(tokens)
    weight = cost.astype(np.float64) if by is None else np.asarray(by, dtype=np.float64)
    if weight.shape != (n,):
        raise InputError(f"by must hold one cost per row ({n:,}), got shape {weight.shape}")
    note = ""
    if fit and n > 0:
        ranks, micro_batches, per_micro, note = _fit_step(n, ranks, micro_batches, per_micro)
    per_step = ranks * micro_batches * per_micro
    if n < per_step:
        raise InputError(f"{n:,} rows cannot fill one step of {ranks} ranks x {micro_batches} micro-batches x "
                         f"{rows_word(per_micro)} = {per_step:,} rows; use fewer ranks, micro-batches or rows, or more data")
    order = np.random.default_rng(seed).permutation(n) if shuffle else np.arange(n)
    steps = n // per_step
    rows = order[: steps * per_step].reshape(steps, per_step)
    before = np.broadcast_to(np.arange(per_step) % ranks, rows.shape).astype(np.int64)
    after = _deal_each(weight[rows], ranks)
    first = balance_rows((tokens[rows[0]], cost[rows[0]]), ranks, micro_batches, by=weight[rows[0]])
    return StepSplits(ranks, micro_batches, per_micro, n, rows, before, after, cost.astype(np.int64), first,
                      shuffle, seed, note)
