"""Balancing data-parallel ranks by what a step costs: the linear layers and attention, for one model shape.

A rank waits for the others once per optimizer step, at the gradient all-reduce. A step's cost is
``6 N`` per token through the linear layers plus ``12 n_layer d_model`` per attention cell
(``analysis.costs.training_flops``, full squares), so equal tokens are not quite equal time; how much
attention weighs depends on the model and the row length. Packed rows run padding-free (an unpadding
varlen kernel), so the linear layers pay per real token; a padded row pays its width. The rows of each
step are drawn in turn from the shuffled rows (``packing.balance.balance_steps``) and every figure is
the mean over the epoch's steps:

    >>> from packing_core.packing.strategies import make_plan
    >>> plan = make_plan(([512] + [64] * 8) * 100, 512, "next-fit")
    >>> sb = step_balance(plan, 2, 2, shape="SmolLM2-135M")
    >>> round(sb.attention_share, 3), round(sb.by_attention.cut, 3)
    (0.069, 0.087)
    >>> print(step_verdict(sb))   # doctest: +NORMALIZE_WHITESPACE
    50 optimizer steps of 2 ranks x 2 micro-batches x 1 row, drawn in turn from the shuffled rows: in
    the average step the slowest rank's attention cost is 1.40x the mean as a sampler deals the rows, 1.25x
    balanced by attention cost, a cut of 8.8 % to the slowest rank's attention. With the linear layers
    counted (SmolLM2-135M, attention 7 % of a step), the slowest rank's step FLOPs fall by 1.02 %;
    balancing by the step's cost (tokens and Σ len² together) does no better. Summed over the epoch the
    ranks come out even whatever the deal (attention max/mean 1.02): a rank waits for the others step by
    step, so an epoch total hides it. Attention is a small share of this step: balance by the step's cost;
    attention alone is worth balancing only where it is a large share (long rows, small models)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from packing_core.analysis.costs import ModelShape, model_shape, training_flops
from packing_core.packing.balance import BalanceReport, RankSplit, StepSplits, balance_steps, row_loads, rows_word
from packing_core.packing.plan import Plan

# Attention above this share of a step's FLOPs: balancing by attention alone is worth it.
ATTENTION_HEAVY = 0.5
DEFAULT_SHAPE = "SmolLM2-135M"


def slowest_rank_cut(report: BalanceReport) -> float:
    """The share of the slowest rank's attention cost that balancing removes (0.375 = 37.5 %)."""
    before, after = int(report.before.rank_attention.max()), int(report.after.rank_attention.max())
    return 1.0 - after / before if before else 0.0


def balance_verdict(report: BalanceReport) -> str:
    """What balancing by attention cost does to the slowest rank's attention cost (attention alone)."""
    cut = slowest_rank_cut(report)
    if cut < 0.005:
        why = ("these rows are already even across the ranks" if report.after.attention_imbalance < 1.05 else
               f"{report.rows:,} rows over {report.ranks} ranks leave no row to move")
        return f"balancing by attention cost changes the slowest rank's attention cost by less than 1 %: {why}"
    return f"balancing by attention cost cuts the slowest rank's attention cost by {cut:.0%}".replace("%", " %")


@dataclass(frozen=True, eq=False)
class StepBalance:
    """Every optimizer step of an epoch, balanced by attention alone and by the step's cost, judged per step.

    ``by_attention`` and ``by_step`` draw the same steps from the same shuffled rows (one ``before``) and differ
    only in the cost each step is balanced by; every figure is a mean over the epoch's steps.
    """

    shape: ModelShape
    attention_share: float        # attention's share of the whole plan's step FLOPs
    by_attention: StepSplits      # ``after``: each step balanced by attention cost
    by_step: StepSplits           # ``after``: each step balanced by the step's cost (linear + attention)
    row_flops: np.ndarray         # per row: its step FLOPs (6N x tokens or slots + 12 n_layer d_model x cells)

    def rank_flops(self, split: RankSplit) -> np.ndarray:
        """Each rank's step FLOPs in the first step, under one of its assignments (``by_attention.first``'s or
        ``by_step.first``'s ``before`` / ``after``)."""
        first = self.row_flops[self.by_attention.rows[0]] if self.by_attention.steps else np.zeros(0)
        return np.bincount(split.rank, weights=first, minlength=len(split.rank_tokens))

    @property
    def slowest(self) -> tuple[float, float, float]:
        """The slowest rank's step FLOPs, summed over the steps: as a sampler deals each step, balanced by
        attention, balanced by the step's cost."""
        return (float(self.by_attention.rank_loads(self.row_flops, "before").max(axis=1).sum()),
                float(self.by_attention.rank_loads(self.row_flops, "after").max(axis=1).sum()),
                float(self.by_step.rank_loads(self.row_flops, "after").max(axis=1).sum()))

    @property
    def step_cuts(self) -> tuple[float, float]:
        """The average step's cut of its slowest rank's step FLOPs: balanced by attention, by the step's cost
        (negative: balancing made the slowest step slower)."""
        a = self.by_attention
        return (float(a.cuts(self.row_flops).mean()) if a.steps else 0.0,
                float(a.cuts(self.row_flops, other=self.by_step).mean()) if a.steps else 0.0)

    def to_dict(self) -> dict:
        before, attention, step = self.slowest
        cut_attention, cut_step = self.step_cuts
        return {"model_shape": self.shape.to_dict(), "attention_share": self.attention_share,
                "slowest_rank_flops_summed_over_steps": {"before": before, "balanced_by_attention": attention,
                                                         "balanced_by_step": step},
                "step_flops_cut_per_step": {"balanced_by_attention": cut_attention, "balanced_by_step": cut_step},
                "attention_cut_per_step": self.by_attention.cut, "verdict": step_verdict(self),
                "by_attention": self.by_attention.to_dict(), "by_step": self.by_step.to_dict()}


def step_balance(plan: Plan, ranks: int, micro_batches: int = 1, rows_per_micro_batch: int = 1, *,
                 shape: ModelShape | str = DEFAULT_SHAPE, seed: int = 0, shuffle: bool = True,
                 fit: bool = True) -> StepBalance:
    """Draw ``plan``'s rows step by step, balance each step by attention and by its cost for ``shape``."""
    shape = model_shape(shape)
    tokens, attention = row_loads(plan)
    linear = (tokens if plan.packed else plan.row_width).astype(np.float64)
    flops = training_flops(linear, attention.astype(np.float64), shape)
    total = float(flops.sum())
    share = float(training_flops(0.0, attention.astype(np.float64), shape).sum()) / total if total else 0.0
    kw: dict[str, Any] = dict(shuffle=shuffle, seed=seed, fit=fit)
    return StepBalance(shape, share, balance_steps(plan, ranks, micro_batches, rows_per_micro_batch, **kw),
                       balance_steps(plan, ranks, micro_batches, rows_per_micro_batch, by=flops, **kw), flops)


def _change(cut: float) -> str:
    if abs(cut) < 5e-5:
        return "do not change (under 0.01 %)"
    return f"{'fall' if cut > 0 else 'rise'} by {abs(cut):.2%}".replace("%", " %")


def _percent(x: float) -> str:
    return f"{x:.1%}".replace("%", " %")


def step_verdict(sb: StepBalance) -> str:
    """The balance section's verdict, per optimizer step: the imbalance, attention's cut, the step's change, the
    epoch total, and which cost to balance by."""
    s = sb.by_attention
    drawn = "the shuffled rows" if s.shuffled else "the rows in the plan's order"
    head = (f"{s.steps:,} optimizer step{'' if s.steps == 1 else 's'} of {s.ranks} ranks x {s.micro_batches} micro-batches x "
            f"{rows_word(s.rows_per_micro_batch)}, drawn in turn from {drawn}: in the average step the slowest rank's "
            f"attention cost is {s.before_imbalance:.2f}x the mean as a sampler deals the rows, "
            f"{s.after_imbalance:.2f}x balanced by attention cost")
    head += (f", a cut of {_percent(s.cut)} to the slowest rank's attention" if s.cut >= 0.0005 else
             ", no change to the slowest rank's attention (under 0.1 %)")
    by_attention, by_step = sb.step_cuts
    share = f"{sb.attention_share:.0%}".replace("%", " %")
    said = (f"{head}. With the linear layers counted ({sb.shape.name}, attention {share} of a step), the slowest "
            f"rank's step FLOPs {_change(by_attention)}")
    if by_step > by_attention + 5e-5:
        said += f"; balancing by the step's cost (tokens and Σ len² together) makes them {_change(by_step)}"
    else:
        said += "; balancing by the step's cost (tokens and Σ len² together) does no better"
    said += (f". Summed over the epoch the ranks come out even whatever the deal (attention max/mean "
             f"{s.epoch_imbalance:.2f}): a rank waits for the others step by step, so an epoch total hides it")
    if sb.attention_share >= ATTENTION_HEAVY:
        return said + ". Attention is most of this step: balancing by attention cost is the right call"
    return (said + ". Attention is a small share of this step: balance by the step's cost; attention alone is worth "
            "balancing only where it is a large share (long rows, small models)")


def format_balance(report: BalanceReport, label: str, steps: StepBalance | None = None) -> str:
    """One line per rank, the max/mean imbalance before and after, and with ``steps`` (whose first step
    ``report`` is) each rank's step FLOPs in that step, the per-step averages and the verdict."""
    b, a = report.before, report.after
    head = ["rank", "tokens before", "attention before", "tokens after", "attention after"]
    cells = [[str(r), f"{b.rank_tokens[r]:,}", f"{b.rank_attention[r]:,}", f"{a.rank_tokens[r]:,}",
              f"{a.rank_attention[r]:,}"] for r in range(report.ranks)]
    if steps is not None:
        head += ["step FLOPs before", "after", "balanced by step"]
        flops = [steps.rank_flops(s) for s in (steps.by_attention.first.before, steps.by_attention.first.after,
                                               steps.by_step.first.after)]
        cells = [row + [f"{f[r]:.4g}" for f in flops] for r, row in enumerate(cells)]
    cells = [head] + cells
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in cells]
    said = (f"max/mean: tokens {b.token_imbalance:.2f} before, {a.token_imbalance:.2f} after; attention "
            f"{b.attention_imbalance:.2f} before, {a.attention_imbalance:.2f} after (balanced by attention cost, "
            "equal rows per rank)")
    if steps is None:
        return "\n".join([f"{label}: {report.rows:,} rows over {report.ranks} ranks x {report.micro_batches} "
                          "micro-batches", *([report.note] if report.note else []), "", *lines, "", said,
                          balance_verdict(report)])
    s = steps.by_attention
    title = (f"{label}: step 1 of {s.steps:,}, {report.rows:,} rows over {s.ranks} ranks x {s.micro_batches} "
             f"micro-batches x {rows_word(s.rows_per_micro_batch)}"
             + (f"; {s.left_over:,} rows left over after the last whole step" if s.left_over else ""))
    return "\n".join([title, *([s.note] if s.note else []), "", *lines, "", "In this step, " + said + ".",
                      step_verdict(steps)])
