"""Every strategy on the same lengths, side by side, and the advice that follows from the table.

>>> rows = strategy_table([120, 90, 300, 40, 55, 30, 210, 65], 512)
>>> [(r.strategy, r.rows, round(r.utilisation, 3)) for r in rows[:2]]
[('pad', 8, 0.222), ('pad-longest', 8, 0.379)]

Each row is measured against the proven lower bound its kind of plan can reach
(``packing.bounds.bound_for``): L1 for a strategy that cuts documents, L2 or LP for one that
keeps them whole. Ten documents of 300 tokens at context 512:

>>> rows = {r.strategy: r for r in strategy_table([300] * 10, 512, ("pad", "concat-cut", "bfd"))}
>>> [(s, rows[s].rows, rows[s].bound.name, rows[s].bound.rows) for s in ("concat-cut", "bfd")]
[('concat-cut', 6, 'L1', 6), ('bfd', 10, 'L2', 10)]
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

import packing_core.packing.registry as registry
from packing_core._validate import InputError, as_lengths
from packing_core.analysis.costs import CONVENTION, HALVES, attention_cells, own_kernel
from packing_core.analysis.quality import bound_sentence, table_gap
from packing_core.analysis.stats import LengthStats
from packing_core.analysis.trainer_advice import TrainerSettings, trainer_settings
from packing_core.data.kinds import PURPOSES
from packing_core.packing.bounds import Bounds, RowBound, bound_for, bounds_from_lengths
from packing_core.packing.plan import PlanMetrics
from packing_core.packing.registry import STRATEGIES, STRATEGY_INFO
from packing_core.packing.strategies import make_plan

# Bucketing within this many points of the best packing is good enough: no mask changes.
BUCKET_IS_ENOUGH = 0.05


# Sarle's coefficient of the log lengths above this: two modes (a single bell gives about 0.33).
BIMODAL = 0.6


# More than this share of documents over the context: the context, not the policy, is the problem.
TOO_SHORT = 0.25


# Bucketing that leaves more than this share of its slots empty is no safe first run: pack from the start.
BUCKET_WASTES_TOO_MUCH = 0.5


# p95 at least this many times the median: a long tail (a few long documents set each bucket's width).
LONG_TAIL = 3.0


# Where the advice says positions start (finding positions_do_not_restart says the same).
FIRST_POSITION = ("the model's first position (0 for Llama-style models; transformers' padding-free path finds "
                  "documents by them)")


def length_shape(stats: LengthStats, lengths=None) -> str:
    """'bimodal', 'long-tailed' or 'compact': the one word the advice uses for a length distribution.

    >>> from packing_core.analysis.stats import length_stats
    >>> length_shape(length_stats([10] * 90 + [100] * 10, 512))
    'long-tailed'
    >>> length_shape(length_stats([20] * 50 + [400] * 50, 512), [20] * 50 + [400] * 50)
    'bimodal'
    """
    if lengths is not None and bimodality(lengths) > BIMODAL:
        return "bimodal"
    return "long-tailed" if stats.p95 >= LONG_TAIL * stats.p50 else "compact"


@dataclass(frozen=True)
class StrategyRow:
    """One strategy on one dataset, with its costs relative to padding every sample to the context.

    Three ratios, three different bills (``analysis.costs`` explains each one):
    ``slot_ratio`` is what the linear layers save; ``attention_ratio`` what attention saves with
    the plan's own kernel (a padded causal kernel for padding, an unpadding varlen kernel for
    packing); ``dense_mask_ratio`` what it saves with a materialised mask. All in full squares
    (``costs.CONVENTION``); the ``_halves`` ratios count a GPU's causal kernels, which skip the
    upper half of each square.
    """

    strategy: str
    description: str
    rows: int
    slots: int
    utilisation: float
    pad_tokens: int
    tokens_lost: int
    docs_split: int
    docs_dropped: int
    attention_cost: int          # cells of the plan's own kernel: padded sum(width**2), packed sum(len**2)
    dense_mask_cost: int         # cells with a materialised mask: sum(width**2) for every strategy
    attention_ratio: float       # pad's attention_cost / this one (an attention FLOP ratio, not a measured speed-up)
    dense_mask_ratio: float      # pad's attention_cost / this dense_mask_cost
    slot_ratio: float            # pad's slots / this one: the linear layers' saving
    bounds: Bounds | None = field(default=None, compare=False, repr=False)  # L1, L2, LP of the documents planned
    attention_ratio_halves: float = 0.0    # attention_ratio with a GPU's causal kernels (causal halves)
    dense_mask_ratio_halves: float = 0.0   # dense_mask_ratio against a GPU's padded causal kernel
    metrics: PlanMetrics | None = field(default=None, compare=False, repr=False)   # the plan's own numbers
    certificate: object = field(default=None, compare=False, repr=False)   # optimal: its Certificate

    @property
    def bound(self) -> RowBound:
        """The proven lower bound this kind of plan can reach: L1 if the strategy cuts documents,
        else the higher of L2 and LP (``packing.bounds.bound_for``)."""
        if self.bounds is None:
            raise InputError(f"the row of {self.strategy} carries no bounds: build it with strategy_table or "
                             "rows_from_metrics(..., bounds=...)")
        return bound_for(registry.get_strategy(self.strategy), self.bounds)

    @property
    def rows_over_bound(self) -> float:
        """Rows against :attr:`bound` (1.0: proven optimal for this kind of plan)."""
        return self.rows / self.bound.rows if self.bound.rows else 1.0

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("metrics", "bounds", "certificate")}
        return {**d, "bound": self.bound.name, "bound_rows": self.bound.rows, "rows_over_bound": self.rows_over_bound}

    def cost_dict(self) -> dict:
        """The costs the tables show, named as ``report --format json`` writes them under ``"costs"``."""
        return {"convention": CONVENTION, "kernel": own_kernel(self.strategy), "slots": self.slots,
                "slot_ratio": self.slot_ratio, "attention_cells": self.attention_cost,
                "attention_ratio": self.attention_ratio, "dense_mask_cells": self.dense_mask_cost,
                "dense_mask_ratio": self.dense_mask_ratio, "attention_ratio_halves": self.attention_ratio_halves,
                "dense_mask_ratio_halves": self.dense_mask_ratio_halves}


def attention_cost(m: PlanMetrics) -> int:
    """Attention cells of a plan with its own kernel, in full squares (``analysis.costs.attention_cells``).

    A padded row pays its full square (row_width**2): a padded causal kernel runs over the pads
    too. A packed row pays one square per document, ``[300, 100] -> 300**2 + 100**2``, under an
    unpadding varlen kernel fed ``cu_seqlens``; a materialised dense mask pays the whole row's
    square (``attention_cells(m, "dense")``), FlexAttention every tile a document touches.
    """
    return attention_cells(m, "own")


def strategy_table(lengths, context: int, strategies=STRATEGIES, **plan_kwargs) -> list[StrategyRow]:
    """Every strategy on the same lengths; the ratios are against ``pad`` (always computed).

    Every row carries the bounds of these documents; when ``optimal`` is in the table, its LP
    bound joins them (it holds for every plan of whole documents). ``plan_kwargs`` go to
    ``make_plan`` (``time_limit`` bounds ``optimal``).
    """
    names = list(strategies)
    plans = {s: make_plan(lengths, context, s, **plan_kwargs) for s in (names if "pad" in names else ["pad", *names])}
    certificates = {s: p.certificate for s, p in plans.items() if p.certificate is not None}
    lp = next((x for x in (getattr(c, "lp", None) for c in certificates.values()) if x is not None), None)
    bounds = bounds_from_lengths(lengths, context, overlong=plan_kwargs.get("overlong", "split"),
                                 max_docs_per_row=plan_kwargs.get("max_docs_per_row"), lp=lp)
    return rows_from_metrics([plans[s].metrics() for s in names], plans["pad"].metrics(), bounds=[bounds] * len(names),
                             certificates=[certificates.get(s) for s in names])


def rows_from_metrics(metrics: list[PlanMetrics], base: PlanMetrics, *, bounds, certificates=None) -> list[StrategyRow]:
    """One ``StrategyRow`` per plan's metrics, with the ratios against ``base`` (padding to the context).

    ``bounds`` gives each plan the ``Bounds`` of the documents it planned (a sampled plan: its
    sample's); ``certificates`` each plan's certificate (``optimal``'s) or None.

    A plan measured on a sample of the documents (see ``packing.from_counts.sampled_plan``)
    is compared per real token: its slots and cells are scaled by ``base.real_tokens /
    its real_tokens``; plans of the same documents are compared as they are (the scale is 1).
    """
    base_attn = attention_cost(base)
    bounds = list(bounds)
    certificates = [None] * len(metrics) if certificates is None else list(certificates)
    if not len(bounds) == len(certificates) == len(metrics):
        raise ValueError("rows_from_metrics needs one bounds and one certificate (or None) per plan")
    base_half = attention_cells(base, "padded", convention=HALVES)

    def ratio(b: float, cells: int, scale: float) -> float:
        return b / (cells * scale) if cells else float("inf")

    out = []
    for m, b, cert in zip(metrics, bounds, certificates):
        cost, dense = attention_cost(m), attention_cells(m, "dense")
        scale = base.real_tokens / m.real_tokens if m.documents != base.documents and m.real_tokens else 1.0
        out.append(StrategyRow(
            strategy=m.strategy, description=STRATEGY_INFO[m.strategy], rows=m.rows, slots=m.slots,
            utilisation=m.utilisation, pad_tokens=m.pad_tokens, tokens_lost=m.tokens_lost,
            docs_split=m.docs_split, docs_dropped=m.docs_dropped, attention_cost=cost,
            dense_mask_cost=dense,
            attention_ratio=ratio(base_attn, cost, scale), dense_mask_ratio=ratio(base_attn, dense, scale),
            slot_ratio=ratio(base.slots, m.slots, scale),
            attention_ratio_halves=ratio(base_half, attention_cells(m, "own", convention=HALVES), scale),
            dense_mask_ratio_halves=ratio(base_half, dense, scale), bounds=b, metrics=m, certificate=cert,
        ))
    return out


def describe_padding(stats: LengthStats, table: list[StrategyRow], lengths=None) -> str:
    """What padding costs this dataset at its context, in numbers read from it (never a fixed sentence).

    >>> from packing_core.analysis.stats import length_stats
    >>> lengths = [120, 90, 300, 40, 55, 30, 210, 65]
    >>> print(describe_padding(length_stats(lengths, 512), strategy_table(lengths, 512, ("pad",)), lengths))
    ... # doctest: +NORMALIZE_WHITESPACE
    Padded to 512, 77.8% of this dataset's slots are pads; its lengths are long-tailed (median 78, p95 268
    tokens), and 7 of its 8 documents (88%) fill less than half of their row.
    """
    pad = {r.strategy: r for r in table}.get("pad")
    if pad is None:
        raise InputError("describe_padding needs the 'pad' row: pass strategy_table(lengths, context)")
    said = (f"Padded to {stats.context}, {pad.pad_tokens / pad.slots:.1%} of this dataset's slots are pads; its lengths "
            f"are {length_shape(stats, lengths)} (median {stats.p50:.0f}, p95 {stats.p95:.0f} tokens)")
    if lengths is None:
        return said + "."
    x = as_lengths(lengths)
    mostly = int((x < stats.context / 2).sum())
    return said + (f", and {mostly:,} of its {len(x):,} documents ({mostly / len(x):.0%}) fill less than half of their "
                   f"row{'' if len(x) == stats.count else ' (in a seeded sample)'}.")


def bimodality(lengths) -> float:
    """Sarle's bimodality coefficient of the log lengths: about 0.33 for one bell, above 0.6 for two humps.

    >>> round(bimodality([20] * 50 + [400] * 50), 2)
    0.91
    """
    x = np.log(as_lengths(lengths).astype(np.float64))
    n, s = len(x), float(x.std())
    if n < 4 or s == 0:
        return 0.0
    z = (x - x.mean()) / s
    skew, excess = float((z**3).mean()), float((z**4).mean()) - 3.0
    return (skew * skew + 1.0) / (excess + 3.0 * (n - 1) ** 2 / ((n - 2) * (n - 3)))


def recommend(stats: LengthStats, table: list[StrategyRow], purpose: str = "pretraining", lengths=None) -> str:
    """A few sentences on what fits this data: bucketing or packing, split or drop.

    ``purpose`` is ``"instruction"`` (prompt + answer examples: never split them) or
    ``"pretraining"`` (plain text: a split at a row edge is acceptable). With ``lengths``
    it also says when the lengths have two modes, where bucketing does best.
    When packing saves clearly more, the advice starts with bucketing for a first run (no
    mask to get wrong) and packs once the pipeline is trusted, unless bucketing still
    wastes over half its slots (``BUCKET_WASTES_TOO_MUCH``, typical of long-tailed lengths
    at a long context): then it says to pack from the start. The packer it names is a heuristic a
    trainer runs (not ``optimal``, whose plan carries a certificate); it ends on how far bfd is from
    the proven lower bound for whole documents (L2, or LP when ``optimal`` is in the table) and what
    ``optimal`` closes.
    """
    if purpose not in PURPOSES:
        raise InputError(f"purpose must be 'instruction' or 'pretraining', got {purpose!r}")
    best, bucket = _best_and_bucket(table)
    wide = (" Keep the buckets wide (hundreds of samples each), so each batch is a fair draw from its bucket, and shuffle "
            "the batch order, so no run of batches comes from one bucket.")
    decision = first_run(table)
    if bucket.utilisation >= best.utilisation:
        first = (f"Bucket: it fills {bucket.utilisation:.1%} of the slots, more than the best packing "
                 f"({best.strategy}, {best.utilisation:.1%}), with no mask to get wrong." + wide)
    elif best.utilisation - bucket.utilisation <= BUCKET_IS_ENOUGH:
        first = (f"Bucket: it already fills {bucket.utilisation:.1%} of the slots, within "
                 f"{(best.utilisation - bucket.utilisation) * 100:.1f} points of {best.strategy} "
                 f"packing ({best.utilisation:.1%}), with no mask to get wrong." + wide)
    elif 1 - bucket.utilisation > BUCKET_WASTES_TOO_MUCH:
        shape = length_shape(stats, lengths)
        first = (f"Pack from the start, with {best.strategy}. On these {shape} lengths at context "
                 f"{stats.context}, bucketing still wastes {1 - bucket.utilisation:.0%} of its slots (it fills "
                 f"{bucket.utilisation:.1%}; {best.strategy} fills {best.utilisation:.1%}, and bucketing computes "
                 f"{bucket.slots / best.slots:.1f}x as many slots). Pass cu_seqlens, start every document's "
                 f"positions at {FIRST_POSITION}, and run the "
                 "alone-vs-packed check before training.")
    else:
        first = (f"First run: bucket. It fills {bucket.utilisation:.1%} of the slots ({bucket.slot_ratio:.1f}x "
                 "fewer than padding to the context) and changes no mask, so nothing can leak." + wide
                 + f" Long run: pack with {best.strategy}, which fills {best.utilisation:.1%} (bucketing computes "
                 f"{bucket.slots / best.slots:.1f}x as many slots). Pass cu_seqlens, start every document's "
                 f"positions at {FIRST_POSITION}, and check "
                 "alone against packed before training.")
    gap = table_gap(table)     # how far bfd is from the proven optimum, when optimal ran beside it
    if gap is not None:
        first += " " + gap.sentence
    elif best.bounds is not None:
        first += " " + bound_sentence(best.strategy, best.rows, best.bound) + "."
    if lengths is not None and bimodality(lengths) > BIMODAL:
        first += (" These lengths have two modes: bucketing does well here, because short and long "
                  "samples fall into different buckets and are padded only to their own kind.")
    trl = trainer_settings(stats.context, purpose, bucket_first=decision != "pack")[0]
    switch = {"pack": f" In TRL: `{trl.call}`.", "bucket": f" In TRL: `{trl.first_run}`.",
              "bucket first": f" In TRL: first run `{trl.first_run}`, long run `{trl.call}`."}[decision]
    if stats.over_context == 0:
        return first + f" No document is longer than the context ({stats.context})." + switch
    if stats.share_over > TOO_SHORT:
        return first + (f" But {stats.share_over:.0%} of the documents are longer than the context "
                        f"({stats.context}): raise the context before choosing a policy for them.") + switch
    share = "<0.1%" if stats.share_over < 0.001 else f"{stats.share_over:.1%}"
    n = f"{stats.over_context:,} document{'s' if stats.over_context != 1 else ''} ({share})"
    if purpose == "instruction":
        return first + (f" Drop the {n} longer than {stats.context}: a split example is "
                        "incoherent, so filter instruction data by length.") + switch
    return first + (f" Split the {n} longer than {stats.context} across rows: standard for "
                    "pretraining, the lost context at the cut is accepted.") + switch


def recommended_settings(stats: LengthStats, table: list[StrategyRow], purpose: str = "pretraining"
                         ) -> tuple[TrainerSettings, ...]:
    """The settings that carry out :func:`recommend` in TRL, transformers and torchtune (``trainer_settings``):
    with TRL's bucketing config for a first run where the advice buckets, and the over-long count of ``stats``."""
    return trainer_settings(stats.context, purpose, bucket_first=first_run(table) != "pack",
                            over_context=stats.over_context)


def _best_and_bucket(table: list[StrategyRow]) -> tuple[StrategyRow, StrategyRow]:
    by = {r.strategy: r for r in table}
    # the registry's packers that keep documents whole, latest first: on a tie the more refined one
    # (bfd before ffd before next-fit) is named
    whole = [s.name for s in reversed(registry.strategies()) if s.packs and not s.cuts]
    packers = [by[s] for s in whole if s in by]
    if not packers or "bucket" not in by:
        raise InputError(f"recommend needs the 'bucket' row and at least one of {', '.join(whole)} "
                         "in the table; pass strategy_table(lengths, context) with every strategy")
    # the packer named is one a trainer runs (bfd and the like); a plan that carries a certificate (optimal,
    # column generation) is the lab's yardstick: recommend's last sentence says how far bfd is from it
    best = max([r for r in packers if r.certificate is None] or packers, key=lambda r: r.utilisation)
    return best, by["bucket"]


def first_run(table: list[StrategyRow]) -> str:
    """What :func:`recommend` advises for a first run: ``"bucket"`` (within ``BUCKET_IS_ENOUGH`` of the best
    packing, or better), ``"pack"`` (bucketing still wastes over ``BUCKET_WASTES_TOO_MUCH`` of its slots) or
    ``"bucket first"`` (then pack for the long run).

    >>> first_run(strategy_table([120, 90, 300, 40, 55, 30, 210, 65], 512))   # one bucket: 37.9% of its slots
    'pack'
    """
    best, bucket = _best_and_bucket(table)
    if best.utilisation - bucket.utilisation <= BUCKET_IS_ENOUGH:
        return "bucket"
    return "pack" if 1 - bucket.utilisation > BUCKET_WASTES_TOO_MUCH else "bucket first"
