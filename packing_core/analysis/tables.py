"""Every strategy on the same lengths, side by side, and the advice that follows from the table.

>>> rows = strategy_table([120, 90, 300, 40, 55, 30, 210, 65], 512)
>>> [(r.strategy, r.rows, round(r.utilisation, 3)) for r in rows[:2]]
[('pad', 8, 0.222), ('pad-longest', 8, 0.379)]
"""

from __future__ import annotations

from dataclasses import dataclass

from packing_core.analysis.stats import LengthStats
from packing_core.packing.plan import PlanMetrics
from packing_core.packing.strategies import PACKING_STRATEGIES, STRATEGIES, STRATEGY_INFO, compare

# Bucketing within this many points of the best packing is good enough: no mask changes.
BUCKET_IS_ENOUGH = 0.05


# More than this share of documents over the context: the context, not the policy, is the problem.
TOO_SHORT = 0.25


@dataclass(frozen=True)
class StrategyRow:
    """One strategy on one dataset, with its costs relative to padding every sample to the context."""

    strategy: str
    description: str
    rows: int
    slots: int
    utilisation: float
    pad_tokens: int
    tokens_lost: int
    docs_split: int
    docs_dropped: int
    attention_cost: int          # padded rows: sum(row_width**2); packed rows: sum(len**2)
    attention_speedup: float     # attention cost of "pad" / this one
    slots_speedup: float         # slots of "pad" / this one (the linear layers' saving)
    rows_over_lower_bound: float


def attention_cost(m: PlanMetrics) -> int:
    """FLOP-proportional attention cost of a plan, as a kernel would pay it.

    A padded row pays its full causal square (row_width**2) because the kernel runs
    over the pads too. A packed row with a block-diagonal mask or a varlen kernel pays
    one square per document: ``[300, 100] in a row of 512 -> 300**2 + 100**2``.
    """
    return m.attention_cost_packed if m.strategy in PACKING_STRATEGIES else m.attention_cost_padded


def strategy_table(lengths, context: int, strategies=STRATEGIES, **plan_kwargs) -> list[StrategyRow]:
    """Every strategy on the same lengths; speed-ups are against ``pad`` (always computed)."""
    names = list(strategies)
    metrics = compare(lengths, context, names if "pad" in names else ["pad", *names], **plan_kwargs)
    by_name = {m.strategy: m for m in metrics}
    base = by_name["pad"]
    base_attn = attention_cost(base)
    out = []
    for s in names:
        m = by_name[s]
        cost = attention_cost(m)
        out.append(StrategyRow(
            strategy=s, description=STRATEGY_INFO[s], rows=m.rows, slots=m.slots,
            utilisation=m.utilisation, pad_tokens=m.pad_tokens, tokens_lost=m.tokens_lost,
            docs_split=m.docs_split, docs_dropped=m.docs_dropped, attention_cost=cost,
            attention_speedup=base_attn / cost if cost else float("inf"),
            slots_speedup=base.slots / m.slots if m.slots else float("inf"),
            rows_over_lower_bound=m.rows_over_lower_bound,
        ))
    return out


def recommend(stats: LengthStats, table: list[StrategyRow], kind: str = "pretraining") -> str:
    """One sentence (two at most) on what fits this data: bucketing or packing, split or drop.

    ``kind`` is ``"instruction"`` (prompt + answer examples: never split them) or
    ``"pretraining"`` (plain text: a split at a row edge is acceptable).
    """
    if kind not in ("instruction", "pretraining"):
        raise ValueError(f"kind must be 'instruction' or 'pretraining', got {kind!r}")
    by = {r.strategy: r for r in table}
    packers = [by[s] for s in ("bfd", "ffd", "next-fit") if s in by]
    if not packers or "bucket" not in by:
        raise ValueError("recommend needs the 'bucket' row and at least one of bfd, ffd, next-fit "
                         "in the table; pass strategy_table(lengths, context) with every strategy")
    best = max(packers, key=lambda r: r.utilisation)
    bucket = by["bucket"]
    if bucket.utilisation >= best.utilisation:
        first = (f"Bucket: it fills {bucket.utilisation:.1%} of the slots, more than the best packing "
                 f"({best.strategy}, {best.utilisation:.1%}), with no mask to get wrong.")
    elif best.utilisation - bucket.utilisation <= BUCKET_IS_ENOUGH:
        first = (f"Bucket: it already fills {bucket.utilisation:.1%} of the slots, within "
                 f"{(best.utilisation - bucket.utilisation) * 100:.1f} points of {best.strategy} "
                 f"packing ({best.utilisation:.1%}), with no mask to get wrong.")
    else:
        first = (f"Pack with {best.strategy}: it fills {best.utilisation:.1%} of the slots against "
                 f"{bucket.utilisation:.1%} for bucketing, which computes {bucket.slots / best.slots:.1f}x "
                 "as many slots; use cu_seqlens (a block-diagonal mask) and reset positions per document.")
    if stats.over_context == 0:
        return first + f" No document is longer than the context ({stats.context})."
    if stats.share_over > TOO_SHORT:
        return first + (f" But {stats.share_over:.0%} of the documents are longer than the context "
                        f"({stats.context}): raise the context before choosing a policy for them.")
    share = "<0.1%" if stats.share_over < 0.001 else f"{stats.share_over:.1%}"
    n = f"{stats.over_context:,} document{'s' if stats.over_context != 1 else ''} ({share})"
    if kind == "instruction":
        return first + (f" Drop the {n} longer than {stats.context}: a split example is "
                        "incoherent, so filter instruction data by length.")
    return first + (f" Split the {n} longer than {stats.context} across rows: standard for "
                    "pretraining, the lost context at the cut is accepted.")

