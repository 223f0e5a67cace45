"""The price of a small buffer: utilisation of a stream packer against its buffer size.

One line climbs from a buffer of one document (one document a row) to the whole set; a
dashed line is bfd over the same documents (the plan that sees them all at once), and one
marker is TRL's way, bfd inside each window of 1,000 documents.
"""
from __future__ import annotations

import plotly.graph_objects as go

from packing_core.analysis.quality import StreamPrice
from packing_lab.viz.style import ALERT_COLOUR, PACKED_COLOUR, REFERENCE_COLOUR, apply_layout


def buffer_curve_figure(price: StreamPrice, title: str | None = None) -> go.Figure:
    """Utilisation (%) against buffer size (log axis), with bfd over the same documents and TRL's window.

    >>> from packing_core.analysis.quality import stream_price
    >>> fig = buffer_curve_figure(stream_price([300, 200] * 50, 512, sample=40, window=10))
    >>> [t.name for t in fig.data]
    ['stream packer, buffer of N documents', 'TRL: bfd in windows of 10 documents']
    """
    c = price.curve
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=list(c.buffer_sizes), y=[100 * u for u in c.utilisation], mode="lines+markers",
                             name="stream packer, buffer of N documents", line=dict(color=PACKED_COLOUR, width=2),
                             hovertemplate="buffer of %{x:,} documents: %{y:.2f}% of the slots<extra></extra>"))
    fig.add_trace(go.Scatter(x=[price.window], y=[100 * price.window_utilisation], mode="markers",
                             name=f"TRL: bfd in windows of {price.window:,} documents",
                             marker=dict(color=ALERT_COLOUR, size=12, symbol="diamond"),
                             hovertemplate="TRL's window of %{x:,} documents: %{y:.2f}%<extra></extra>"))
    fig.add_hline(y=100 * c.whole_utilisation, line_dash="dash", line_color=REFERENCE_COLOUR,
                  annotation_text=f"bfd over all {price.documents:,} documents: {c.whole_utilisation:.1%}",
                  annotation_position="bottom right")
    fig.update_xaxes(type="log", title_text="buffer size (documents)")
    fig.update_yaxes(title_text="utilisation (%)")
    return apply_layout(fig, title=title or f"Utilisation against buffer size, on {price.basis}", height=340)
