"""The data-parallel balance figure: each rank's attention cost, as a sampler deals rows and balanced.

A step waits for the slowest rank, so the picture to read is the tallest bar against the
dashed mean: the gap is time every other rank spends waiting.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from packing_core.packing.balance import BalanceReport
from packing_lab.viz.style import PACKED_COLOUR, PADDED_COLOUR, REFERENCE_COLOUR, apply_layout


def balance_figure(report: BalanceReport, title: str | None = None, height: int = 380) -> go.Figure:
    """Grouped bars per rank: attention cost (sum of len^2) before and after balancing, with the mean.

    >>> from packing_core.packing.balance import balance_rows
    >>> fig = balance_figure(balance_rows((np.array([4, 4, 4, 4]), np.array([16, 4, 16, 4])), 2))
    >>> [t.name for t in fig.data]
    ['in sampler order (max/mean 1.60)', 'balanced by attention cost (max/mean 1.00)']
    """
    ranks = [f"rank {r}" for r in range(report.ranks)]
    fig = go.Figure()
    for split, name, colour in ((report.before, "in sampler order", PADDED_COLOUR),
                                (report.after, "balanced by attention cost", PACKED_COLOUR)):
        fig.add_trace(go.Bar(x=ranks, y=split.rank_attention, marker_color=colour,
                             name=f"{name} (max/mean {split.attention_imbalance:.2f})",
                             customdata=np.stack([split.rank_tokens], axis=-1),
                             hovertemplate="%{x}: attention %{y:,.0f}, tokens %{customdata[0]:,}<extra></extra>"))
    fig.add_hline(y=float(report.before.rank_attention.mean()), line_dash="dash", line_color=REFERENCE_COLOUR,
                  annotation_text="mean", annotation_position="top left")
    fig.update_layout(barmode="group", yaxis_title="attention cost (sum of len\u00b2)")
    return apply_layout(fig, title=title or f"{report.rows:,} rows over {report.ranks} ranks x "
                        f"{report.micro_batches} micro-batches", height=height)
