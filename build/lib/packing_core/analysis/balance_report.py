"""Balancing data-parallel ranks by what a step costs: the linear layers and attention, for one model shape.

A step waits for the slowest rank. Its cost is ``6 N`` per token through the linear layers plus
``12 n_layer d_model`` per attention cell (``analysis.costs.training_flops``, full squares), so
equal tokens are not quite equal time; how much attention weighs depends on the model and the row
length. Packed rows run padding-free (an unpadding varlen kernel), so the linear layers pay per
real token; a padded row pays its width.

    >>> from packing_core.packing.strategies import make_plan
    >>> plan = make_plan([512, 128, 128, 128, 128, 512, 128, 128, 128, 128], 512, "next-fit")
    >>> sb = step_balance(plan, 2, shape="SmolLM2-135M")
    >>> round(sb.attention_share, 3), round(slowest_rank_cut(sb.by_attention), 3)
    (0.076, 0.375)
    >>> print(step_verdict(sb))   # doctest: +NORMALIZE_WHITESPACE
    balancing by attention cost cuts the slowest rank's attention cost by 38 %; with the linear layers
    counted (SmolLM2-135M, attention 8 % of a step), its step FLOPs fall by 4.36 %, as much as
    balancing by the step's cost (tokens and Σ len² together). Attention is a small share of this step:
    balance by the step's cost; attention alone is worth balancing only where it is a large share (long
    rows, small models)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core.analysis.costs import ModelShape, model_shape, training_flops
from packing_core.packing.balance import BalanceReport, RankSplit, balance_rows, row_loads
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
    """One plan's rows over ranks, balanced by attention alone and by the step's cost, judged by step FLOPs."""

    shape: ModelShape
    attention_share: float        # attention's share of the whole plan's step FLOPs
    by_attention: BalanceReport   # ``after``: balanced by attention cost
    by_step: BalanceReport        # ``after``: balanced by the step's cost (linear + attention)
    row_linear: np.ndarray        # per row: the tokens (or slots) the linear layers pay for

    def rank_flops(self, split: RankSplit) -> np.ndarray:
        """Each rank's step FLOPs under one assignment."""
        linear = np.bincount(split.rank, weights=self.row_linear, minlength=len(split.rank_tokens))
        return training_flops(linear, split.rank_attention.astype(np.float64), self.shape)

    @property
    def slowest(self) -> tuple[float, float, float]:
        """The slowest rank's step FLOPs: as a sampler deals the rows, balanced by attention, by the step's cost."""
        return (float(self.rank_flops(self.by_attention.before).max()),
                float(self.rank_flops(self.by_attention.after).max()),
                float(self.rank_flops(self.by_step.after).max()))

    def to_dict(self) -> dict:
        before, attention, step = self.slowest
        return {"model_shape": self.shape.to_dict(), "attention_share": self.attention_share,
                "slowest_rank_flops": {"before": before, "balanced_by_attention": attention,
                                       "balanced_by_step": step},
                "attention_cut": slowest_rank_cut(self.by_attention), "verdict": step_verdict(self),
                "by_attention": self.by_attention.to_dict(), "by_step": self.by_step.to_dict()}


def step_balance(plan: Plan, ranks: int, micro_batches: int = 1, *, shape: ModelShape | str = DEFAULT_SHAPE,
                 fit: bool = True) -> StepBalance:
    """Balance ``plan``'s rows by attention and by the step's cost for ``shape`` (see the module doc)."""
    shape = model_shape(shape)
    tokens, attention = row_loads(plan)
    linear = (tokens if plan.packed else plan.row_width).astype(np.float64)
    step = training_flops(linear, attention.astype(np.float64), shape)
    total = float(step.sum())
    share = float(training_flops(0.0, attention.astype(np.float64), shape).sum()) / total if total else 0.0
    return StepBalance(shape, share, balance_rows(plan, ranks, micro_batches, fit=fit),
                       balance_rows(plan, ranks, micro_batches, fit=fit, by=step), linear)


def _change(after: float, before: float) -> str:
    change = after / before - 1 if before else 0.0
    if abs(change) < 5e-5:
        return "do not change (under 0.01 %)"
    return f"{'fall' if change < 0 else 'rise'} by {abs(change):.2%}".replace("%", " %")


def step_verdict(sb: StepBalance) -> str:
    """The balance section's verdict: attention's cut, the step's change, and which cost to balance by."""
    before, by_attention, by_step = sb.slowest
    cut = slowest_rank_cut(sb.by_attention)
    head = (f"balancing by attention cost cuts the slowest rank's attention cost by {cut:.0%}".replace("%", " %")
            if cut >= 0.005 else "balancing by attention cost changes the slowest rank's attention cost by less "
                                 "than 1 %")
    share = f"{sb.attention_share:.0%}".replace("%", " %")
    said = (f"{head}; with the linear layers counted ({sb.shape.name}, attention {share} of a step), its step "
            f"FLOPs {_change(by_attention, before)}")
    if by_step < by_attention * (1 - 5e-5):
        said += f"; balancing by the step's cost (tokens and Σ len² together) makes them {_change(by_step, before)}"
    else:
        said += ", as much as balancing by the step's cost (tokens and Σ len² together)"
    if sb.attention_share >= ATTENTION_HEAVY:
        return said + ". Attention is most of this step: balancing by attention cost is the right call"
    return (said + ". Attention is a small share of this step: balance by the step's cost; attention alone is worth "
            "balancing only where it is a large share (long rows, small models)")


def format_balance(report: BalanceReport, label: str, steps: StepBalance | None = None) -> str:
    """One line per rank, the max/mean imbalance before -> after, and with ``steps`` each rank's step FLOPs."""
    b, a = report.before, report.after
    head = ["rank", "tokens before", "attention before", "tokens after", "attention after"]
    cells = [[str(r), f"{b.rank_tokens[r]:,}", f"{b.rank_attention[r]:,}", f"{a.rank_tokens[r]:,}",
              f"{a.rank_attention[r]:,}"] for r in range(report.ranks)]
    if steps is not None:
        head += ["step FLOPs before", "after", "balanced by step"]
        flops = [steps.rank_flops(s) for s in (steps.by_attention.before, steps.by_attention.after,
                                               steps.by_step.after)]
        cells = [row + [f"{f[r]:.4g}" for f in flops] for r, row in enumerate(cells)]
    cells = [head] + cells
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in cells]
    verdict = step_verdict(steps) if steps is not None else balance_verdict(report)
    return "\n".join([f"{label}: {report.rows:,} rows over {report.ranks} ranks x {report.micro_batches} micro-batches",
                      *([report.note] if report.note else []), "", *lines, "",
                      f"max/mean: tokens {b.token_imbalance:.2f} -> {a.token_imbalance:.2f}, attention "
                      f"{b.attention_imbalance:.2f} -> {a.attention_imbalance:.2f} (balanced by attention cost, "
                      "equal rows per rank)", verdict])
