"""One document picked out in a figure: a frame around each of its cells' spans, in every figure of a step.

A frame is a plotly rectangle named ``HIGHLIGHT`` (a page, or a browser test, finds it in
``layout.shapes``), drawn above the cells in the reference colour, so the document's own colour
stays visible inside it; nothing else of the figure changes.

>>> import plotly.graph_objects as go
>>> fig = frame_span(go.Figure(), [0, 0, 1, 1, 1, -1], 1, y0=-0.5, y1=0.5)
>>> [(s.name, s.x0, s.x1) for s in fig.layout.shapes]
[('highlight', 1.5, 4.5)]
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from packing_lab.viz.style import REFERENCE_COLOUR

HIGHLIGHT = "highlight"
LINE = dict(color=REFERENCE_COLOUR, width=3)


def frame(fig: go.Figure, x0: float, x1: float, y0: float, y1: float, *, dash: str | None = None,
          row: int | None = None, col: int | None = None) -> go.Figure:
    """A frame named ``HIGHLIGHT`` from (x0, y0) to (x1, y1), in subplot (row, col) when given."""
    fig.add_shape(type="rect", x0=float(x0), x1=float(x1), y0=float(y0), y1=float(y1), name=HIGHLIGHT, layer="above",
                  line=dict(LINE, dash=dash) if dash else LINE, fillcolor="rgba(0,0,0,0)",
                  **({"row": row, "col": col} if row is not None else {}))
    return fig


def span(doc_ids, doc: int) -> tuple[int, int] | None:
    """``(first, last + 1)`` of the tokens of ``doc`` in a row's document ids, or None when it has none there."""
    at = np.flatnonzero(np.asarray(doc_ids) == doc)
    return (int(at[0]), int(at[-1]) + 1) if len(at) else None


def frame_span(fig: go.Figure, doc_ids, doc: int | None, *, y0: float, y1: float, **where) -> go.Figure:
    """Frame the tokens of ``doc`` (a row's ``doc_ids``) across ``y0 .. y1``: a track figure's columns."""
    found = span(doc_ids, doc) if doc is not None else None
    if found is not None:
        frame(fig, found[0] - 0.5, found[1] - 0.5, y0, y1, **where)
    return fig


def frame_pieces(fig: go.Figure, pieces, *, height: float = 0.5) -> go.Figure:
    """Frame each ``(row, start slot, length)`` piece of a document in a strip of rows."""
    for row, start, length in pieces:
        frame(fig, start - 0.5, start + length - 0.5, row - height, row + height)
    return fig


def pick_markers(fig: go.Figure, xs, ys, docs, *, row: int | None = None, col: int | None = None) -> go.Figure:
    """Invisible points, one per document (at ``xs``, ``ys``), that a click selects: a page that reads the chart's
    selection (``st.plotly_chart(on_select=...)``) learns which document was clicked from their ``customdata``.
    A heatmap's cells cannot be selected in plotly; points can."""
    fig.add_trace(go.Scatter(x=[float(x) for x in xs], y=list(ys), customdata=[int(d) for d in docs], mode="markers",
                             marker=dict(size=18, opacity=0), showlegend=False, name="pick",
                             hovertemplate="document %{customdata}: click to pick it out<extra></extra>"),
                  **({"row": row, "col": col} if row is not None else {}))
    return fig


def centres(doc_ids) -> tuple[np.ndarray, np.ndarray]:
    """``(documents, centre token)`` of each document of a row's ``doc_ids`` (pads, -1, left out).

    >>> [a.tolist() for a in centres([0, 0, 1, 1, 1, -1])]
    [[0, 1], [0.5, 3.0]]
    """
    doc = np.asarray(doc_ids)
    docs = np.unique(doc[doc >= 0])
    return docs, np.array([np.flatnonzero(doc == d).mean() for d in docs])
