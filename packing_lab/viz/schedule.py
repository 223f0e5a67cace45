"""What packing does to the training run, drawn: the schedule, bucketing's loss, the positions trained.

Each builder reads one result of ``analysis`` or ``experiments`` and draws its numbers as they are.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from packing_lab.advice.schedule import lr_by_tokens
from packing_lab.viz.style import ALERT_COLOUR, PACKED_COLOUR, PADDED_COLOUR, apply_layout


def schedule_figure(comparison, title: str | None = None) -> go.Figure:
    """The learning rate against the real tokens seen, padded and packed, both with the same warmup in steps.

    >>> from packing_lab.advice.schedule import compare_schedules
    >>> from packing_core.packing.strategies import make_plan
    >>> pad, cut = (make_plan([120, 90, 300, 40], 512, s).metrics() for s in ("pad", "concat-cut"))
    >>> [t.name for t in schedule_figure(compare_schedules(pad, cut, 2, warmup_steps=1)).data]
    ['pad: warmup 1 steps = 275 tokens', 'concat-cut: warmup 1 steps = 550 tokens']
    """
    fig = go.Figure()
    for s, colour in ((comparison.padded, PADDED_COLOUR), (comparison.packed, PACKED_COLOUR)):
        tokens, lr = lr_by_tokens(s)
        fig.add_trace(go.Scatter(x=tokens, y=lr, mode="lines", line=dict(color=colour, width=3),
                                 name=f"{s.strategy}: warmup {s.warmup_steps:,} steps = {s.warmup_tokens:,.0f} tokens",
                                 hovertemplate="%{x:,.0f} tokens: learning rate %{y:.2f} of its peak<extra></extra>"))
    fig.update_xaxes(title="real tokens trained (one epoch)", gridcolor="#eee")
    fig.update_yaxes(title="learning rate / peak", range=[0, 1.05], gridcolor="#eee")
    return apply_layout(fig, title=title, height=320, showlegend=True)


def bucket_loss_figure(demo, title: str | None = None) -> go.Figure:
    """The loss each step logged: random batches against length buckets, the batch's mean length on hover.

    >>> from packing_lab.demos.bucket_loss import BucketDemo, BucketRun
    >>> d = BucketDemo(BucketRun("random batches", (2.0, 1.0), (7.0, 7.0)), BucketRun("length buckets", (2.0, 1.5), (5.0, 9.0)))
    >>> [t.name for t in bucket_loss_figure(d).data]
    ['random batches', 'length buckets']
    """
    fig = go.Figure()
    for run, colour in ((demo.shuffled, PACKED_COLOUR), (demo.bucketed, ALERT_COLOUR)):
        steps = np.arange(1, len(run.losses) + 1)
        fig.add_trace(go.Scatter(x=steps, y=run.losses, mode="lines", name=run.order, line=dict(color=colour, width=2),
                                 customdata=np.asarray(run.mean_length),
                                 hovertemplate="step %{x}: loss %{y:.3f} (documents of %{customdata:.1f} tokens)"
                                               "<extra></extra>"))
    fig.update_xaxes(title="optimizer step", gridcolor="#eee")
    fig.update_yaxes(title="training loss (nats)", gridcolor="#eee")
    return apply_layout(fig, title=title, height=320, showlegend=True)


def positions_figure(trained, title: str | None = None) -> go.Figure:
    """Trained tokens per position bin: positions reset per document against positions counting along the row.

    >>> from packing_lab.advice.longest import trained_positions
    >>> from packing_core.packing.strategies import make_plan
    >>> fig = positions_figure(trained_positions(make_plan([40] * 98 + [400, 500], 512, "bfd"), bins=4))
    >>> [t.name for t in fig.data], fig.data[0].y.tolist()
    (['positions reset per document', 'positions along the row (no reset)'], [4176, 256, 256, 132])
    """
    e = trained.edges
    labels = [f"{a:,}-{b - 1:,}" for a, b in zip(e[:-1], e[1:])]
    fig = go.Figure([
        go.Bar(x=labels, y=trained.reset, name="positions reset per document", marker_color=PACKED_COLOUR,
               hovertemplate="positions %{x}: %{y:,} trained tokens<extra></extra>"),
        go.Bar(x=labels, y=trained.continuous, name="positions along the row (no reset)", marker_color=PADDED_COLOUR,
               hovertemplate="positions %{x}: %{y:,} trained tokens<extra></extra>"),
    ])
    fig.update_xaxes(title="position id")
    fig.update_yaxes(title="trained tokens (log)", type="log", gridcolor="#eee")
    return apply_layout(fig, title=title, height=320, barmode="group", showlegend=True)


MAX_BATCH_BARS = 100    # bars of max_seqlen_figure at most: a plan of millions of batches is drawn in runs


def max_seqlen_figure(share, title: str | None = None) -> go.Figure:
    """Each batch's ``max_seqlen`` (the longest piece) beside its mean piece length.

    >>> from packing_lab.advice.longest import longest_share
    >>> from packing_core.packing.strategies import make_plan
    >>> [t.name for t in max_seqlen_figure(longest_share(make_plan([40] * 98 + [400, 500], 512, "bfd"), 4)).data]
    ['max_seqlen (the longest piece)', 'mean piece']
    >>> len(max_seqlen_figure(longest_share(make_plan([40] * 20_000, 512, "bfd"), 4)).data[0].y)   # 400 batches
    100
    """
    top, mean = np.asarray(share.batch_max_seqlen), np.asarray(share.batch_mean_len, dtype=np.float64)
    n = len(top)
    if n > MAX_BATCH_BARS:      # a bounded figure: each bar the largest max_seqlen of a run of batches, its mean
        edges = np.linspace(0, n, MAX_BATCH_BARS + 1).astype(np.int64)
        top = np.maximum.reduceat(top, edges[:-1])
        mean = np.add.reduceat(mean, edges[:-1]) / np.diff(edges)
        b, unit = edges[:-1], f"batch ({n / MAX_BATCH_BARS:,.0f} a bar)"
    else:
        b, unit = np.arange(n), "batch"
    fig = go.Figure([
        go.Bar(x=b, y=top, name="max_seqlen (the longest piece)", marker_color=ALERT_COLOUR,
               hovertemplate="batch %{x}: max_seqlen %{y:,}<extra></extra>"),
        go.Scatter(x=b, y=mean, name="mean piece", mode="lines",
                   line=dict(color=PACKED_COLOUR, width=2), hovertemplate="batch %{x}: mean piece %{y:.0f}<extra></extra>"),
    ])
    fig.update_xaxes(title=f"{unit}, in plan order")
    fig.update_yaxes(title="tokens", gridcolor="#eee")
    return apply_layout(fig, title=title, height=300, showlegend=True)
