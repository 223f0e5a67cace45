"""Packing changes the training schedule, not only its speed.

A trainer takes a fixed number of rows per optimizer step. Packed rows carry more real tokens
than padded ones (the row ratio: the same data in fewer rows), so with the same rows per step:

- an epoch takes that many times fewer steps;
- each optimizer step carries that many times more real tokens;
- a warmup or decay given in steps covers that many times more data, and ``max_steps`` means
  that many times more epochs.

The worked example, four rows per step, a two-step warmup:

>>> from packing_core.packing.strategies import make_plan
>>> lengths = [120, 90, 300, 40, 55, 30, 210, 65]
>>> pad, cut = (make_plan(lengths, 512, s).metrics() for s in ("pad", "concat-cut"))
>>> s = compare_schedules(pad, cut, rows_per_step=4, warmup_steps=2)
>>> (s.padded.steps_per_epoch, s.packed.steps_per_epoch), (s.padded.tokens_per_step, s.packed.tokens_per_step)
((2, 1), (455.0, 910.0))
>>> round(s.row_ratio, 1), s.hold_rows_per_step
(4.0, 1)

Hold the tokens per optimizer step fixed (fewer packed rows per step, ``hold_rows_per_step``),
or keep the rows and retune: divide the step counts, the warmup included, by the row ratio, and
revisit the learning rate, which was tuned for smaller steps.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from packing_core._validate import InputError, whole_number
from packing_core.packing.plan import PlanMetrics


@dataclass(frozen=True)
class Schedule:
    """One plan's epoch in optimizer steps, at a fixed number of rows per step."""

    strategy: str
    rows: int                 # rows in one epoch
    real_tokens: int          # real tokens in one epoch
    rows_per_step: int
    steps_per_epoch: int      # ceil(rows / rows_per_step)
    tokens_per_step: float    # real tokens per optimizer step (mean over the epoch)
    warmup_steps: int
    warmup_tokens: float      # real tokens the warmup covers
    warmup_share: float       # warmup steps / steps per epoch (above 1: longer than an epoch)

    def to_dict(self) -> dict:
        return asdict(self)


def epoch_schedule(m: PlanMetrics, rows_per_step: int, warmup_steps: int = 0) -> Schedule:
    """``m``'s epoch in optimizer steps of ``rows_per_step`` rows (the last step may be short)."""
    rows_per_step = whole_number(rows_per_step, "rows_per_step", hint="per-device batch x accumulation x ranks")
    warmup_steps = whole_number(warmup_steps, "warmup_steps", minimum=0, hint="e.g. 500")
    if m.rows == 0:
        raise InputError(f"the {m.strategy} plan has no rows: give it some documents")
    steps = -(-m.rows // rows_per_step)
    per_step = m.real_tokens / steps
    return Schedule(m.strategy, m.rows, m.real_tokens, rows_per_step, steps, per_step, warmup_steps,
                    warmup_steps * per_step, warmup_steps / steps)


@dataclass(frozen=True)
class ScheduleComparison:
    """Padding against packing, at the same rows per step: what moves, and what to hold fixed."""

    padded: Schedule
    packed: Schedule
    row_ratio: float           # padded rows / packed rows: real tokens per row, packed over padded
    hold_rows_per_step: int    # packed rows per step that keep the padded run's tokens per step
    hold_warmup_steps: int     # packed warmup steps that cover the padded warmup's tokens

    def to_dict(self) -> dict:
        return {"padded": self.padded.to_dict(), "packed": self.packed.to_dict(), "row_ratio": self.row_ratio,
                "hold_rows_per_step": self.hold_rows_per_step, "hold_warmup_steps": self.hold_warmup_steps,
                "sentence": self.sentence}

    @property
    def sentence(self) -> str:
        """The comparison in words, every number from the two plans."""
        p, k = self.padded, self.packed
        return (f"With {p.rows_per_step:,} rows per optimizer step, {p.strategy} takes {p.steps_per_epoch:,} steps per "
                f"epoch of {p.tokens_per_step:,.0f} real tokens each; {k.strategy} packs the same data into "
                f"{k.rows:,} rows, {k.steps_per_epoch:,} steps of {k.tokens_per_step:,.0f} tokens: "
                f"{k.tokens_per_step / p.tokens_per_step:.1f}x the tokens per step. A warmup of {p.warmup_steps:,} "
                f"steps covers {p.warmup_tokens:,.0f} tokens padded ({p.warmup_share:.0%} of the epoch) but "
                f"{k.warmup_tokens:,.0f} packed ({k.warmup_share:.0%} of it), and max_steps runs "
                f"{self.row_ratio:.1f}x as many epochs. Hold the tokens per step fixed with "
                f"{self.hold_rows_per_step:,} packed rows per step, or keep {p.rows_per_step:,} rows, divide the step "
                f"counts by {self.row_ratio:.1f} (a warmup of {self.hold_warmup_steps:,} steps covers the same tokens) "
                "and retune the learning rate, which was tuned for smaller steps.")


def compare_schedules(padded: PlanMetrics, packed: PlanMetrics, rows_per_step: int,
                      warmup_steps: int = 0) -> ScheduleComparison:
    """The same data padded and packed, at the same rows per step (see the module doc)."""
    p, k = epoch_schedule(padded, rows_per_step, warmup_steps), epoch_schedule(packed, rows_per_step, warmup_steps)
    ratio = (padded.rows / padded.real_tokens) / (packed.rows / packed.real_tokens)   # per real token
    return ScheduleComparison(p, k, ratio, max(1, int(np.round(rows_per_step / ratio))),
                              int(np.ceil(warmup_steps * p.tokens_per_step / k.tokens_per_step)))


def lr_by_tokens(s: Schedule, epochs: float = 1.0, points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """``(real tokens seen, learning rate / peak)``: linear warmup over ``warmup_steps``, then cosine decay
    to zero at the end of ``epochs``, both counted in steps, as trainers count them.

    >>> from packing_core.packing.strategies import make_plan
    >>> tokens, lr = lr_by_tokens(epoch_schedule(make_plan([100] * 8, 512, "pad").metrics(), 2, warmup_steps=2), points=5)
    >>> tokens.tolist(), lr.round(2).tolist()
    ([0.0, 200.0, 400.0, 600.0, 800.0], [0.0, 0.5, 1.0, 0.5, 0.0])
    """
    total = max(1, int(round(s.steps_per_epoch * epochs)))
    step = np.linspace(0, total, points)
    warm = max(s.warmup_steps, 0)
    decay = np.clip((step - warm) / max(total - warm, 1), 0, 1)
    lr = np.where(step < warm, step / max(warm, 1), 0.5 * (1 + np.cos(np.pi * decay)))
    return step * s.tokens_per_step, lr
