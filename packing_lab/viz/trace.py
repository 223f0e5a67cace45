"""A plan being built: the rows after the first ``shown`` placements of a :class:`PlanTrace`.

Every row of the finished plan has its place from the start, so the picture never jumps while
it fills: rows not opened yet are blank, an open row is framed at the context, each placed
piece is a bar in its document's colour (labelled with the document), and the piece placed
last is outlined in the reference colour.
"""
from __future__ import annotations

import plotly.graph_objects as go

from packing_core._validate import InputError
from packing_lab.viz.highlight import frame
from packing_lab.viz.style import REFERENCE_COLOUR, apply_layout, doc_colour

ROW_PX = 30


def trace_figure(trace, shown: int, title: str | None = None, highlight: int | None = None) -> go.Figure:
    """Rows after the first ``shown`` steps of ``trace`` (0: nothing placed yet; ``len(trace.steps)``: the plan);
    ``highlight`` frames the pieces of that document placed so far."""
    n = len(trace.steps)
    if not 0 <= shown <= n:
        raise InputError(f"step {shown} does not exist: this trace has steps 0..{n}")
    rows, context = trace.rows, trace.context
    placed = trace.steps[:shown]
    fill = placed[-1].fill if placed else ()
    fig = go.Figure()
    for r in range(len(fill)):    # the open rows, framed at the context
        fig.add_shape(type="rect", x0=0, x1=context, y0=r - 0.42, y1=r + 0.42, line=dict(color="#888", width=1),
                      fillcolor="rgba(0,0,0,0)", layer="below")
    if placed:
        last = len(placed) - 1
        fig.add_trace(go.Bar(
            y=[s.row for s in placed], x=[s.length for s in placed], base=[s.offset for s in placed],
            orientation="h", width=0.8, showlegend=False,
            marker=dict(color=[doc_colour(s.doc) for s in placed],
                        line=dict(color=[REFERENCE_COLOUR if k == last else "white" for k in range(len(placed))],
                                  width=[4 if k == last else 1 for k in range(len(placed))])),
            text=[f"{s.doc}" for s in placed], textposition="inside", insidetextanchor="middle",
            textfont=dict(color="#111", size=13),
            customdata=[(s.doc, s.length, s.start, s.index + 1) for s in placed],
            hovertemplate="document %{customdata[0]}: %{customdata[1]} tokens at slot %{base} (step "
                          "%{customdata[3]})<extra></extra>"))
    for s in placed:
        if s.doc == highlight:
            frame(fig, s.offset, s.offset + s.length, s.row - 0.45, s.row + 0.45)
    fig.update_yaxes(range=[rows - 0.5, -0.5], tickmode="array", tickvals=list(range(rows)),
                     ticktext=[f"row {r}" for r in range(rows)], showgrid=False, zeroline=False)
    fig.update_xaxes(range=[0, context], title=f"slot (a row holds {context:,})", showgrid=False, zeroline=False)
    return apply_layout(fig, title=title, height=70 + ROW_PX * max(rows, 1), uniformtext=dict(minsize=10, mode="hide"))
