"""Which positions each layer kind carries the previous document into, and by how much.

:func:`layer_diff_figure` draws, for each layer kind (attention, convolution, recurrence), one
panel: at each position of the row, the largest |difference| of that layer's output against the
document alone, without the layer's boundary signal (the leak colour) and with it (the fixed
colour), on a log axis whose floor stands for an exact 0. A short convolution of kernel 4 lights
up the first 3 tokens of each later document; a recurrent state lights up every one of them.

    >>> import numpy as np
    >>> fig = layer_diff_figure(("convolution",), np.array([[0, 0, 0.5, 0.2, 0.1, 0]]), np.zeros((1, 6)),
    ...                         document_ids=np.array([0, 0, 1, 1, 1, 1]))
    >>> [t.name for t in fig.data]
    ['without the signal', 'with the signal']
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from packing_lab.viz.style import FIXED_COLOUR, LEAK_COLOUR, REFERENCE_COLOUR, apply_layout, doc_colour, swatch_text


def layer_diff_figure(kinds, broken, fixed=None, *, document_ids=None, tolerance: float | None = None,
                      title: str = "Each layer's output against the document alone",
                      names=("without the signal", "with the signal"), first: int = 0) -> go.Figure:
    """One panel per layer kind: |difference| per position (float [kinds, T]), broken beside fixed, log scale.

    ``document_ids`` (int [T]) draws the document edges and names each document; ``first`` is the
    position the arrays start at in the row (a panel of the last document only starts there).
    """
    broken = np.atleast_2d(np.asarray(broken, dtype=np.float64))
    fixed = None if fixed is None else np.atleast_2d(np.asarray(fixed, dtype=np.float64))
    kinds = tuple(kinds)
    if broken.shape[0] != len(kinds) or (fixed is not None and fixed.shape != broken.shape):
        raise ValueError(f"one row of differences per layer kind: {len(kinds)} kinds, arrays {broken.shape}"
                         f"{'' if fixed is None else f' and {fixed.shape}'}")
    top = max(float(broken.max(initial=0.0)), tolerance or 0.0, 1e-6)
    floor = (tolerance or top * 1e-4) / 100
    x = first + np.arange(broken.shape[1])
    fig = make_subplots(rows=len(kinds), cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=[f"{k}: {int((b > (tolerance or 0)).sum())} position(s) differ, max {b.max():.2g}"
                                        for k, b in zip(kinds, broken)])
    for i, (kind, row) in enumerate(zip(kinds, broken), start=1):
        series = [(names[0], row, LEAK_COLOUR)] + ([] if fixed is None else [(names[1], fixed[i - 1], FIXED_COLOUR)])
        for name, y, colour in series:
            fig.add_trace(go.Bar(x=x, y=np.maximum(y, floor), name=name, marker_color=colour, showlegend=i == 1,
                                 legendgroup=name, customdata=y,
                                 hovertemplate=f"{kind}, {name}: position %{{x}}<br>|Δ| = %{{customdata:.2e}}"
                                               "<extra></extra>"), row=i, col=1)
        fig.update_yaxes(type="log", range=[np.log10(floor), np.log10(top * 10)], dtick=2, exponentformat="power",
                         title="|Δ| (log)", row=i, col=1)
        if tolerance:
            fig.add_hline(y=tolerance, line=dict(color=REFERENCE_COLOUR, dash="dash", width=1), row=i, col=1)
    if document_ids is not None:
        doc = np.asarray(document_ids)
        for b in np.flatnonzero(np.diff(doc) != 0) + 1:
            fig.add_vline(x=first + b - 0.5, line=dict(color=REFERENCE_COLOUR, dash="dot", width=1))
        for d in np.unique(doc[doc >= 0]):
            at = np.flatnonzero(doc == d)
            # inside the first panel's top: the panel's own title sits just above it
            fig.add_annotation(x=first + (at[0] + at[-1]) / 2, y=1.0, yref="paper", yanchor="top", showarrow=False,
                               text=swatch_text(doc_colour(int(d)), f"document {d}"), bgcolor="white")   # dark text
    fig.update_layout(barmode="group")
    fig.update_xaxes(title="position in the row", row=len(kinds), col=1)
    return apply_layout(fig, title=title, height=150 + 150 * len(kinds), top=90)


def hybrid_leak_figure(leak, *, given=(), title: str = "The last document packed after the others, each layer "
                                                        "against alone"):
    """:func:`layer_diff_figure` of :func:`packing_core.models.hybrid.layer_leaks`, over the last document.

    ``given`` names the layer kinds that read their boundary signal in the broken series too (the
    Leakage lab gives attention its mask and the other layers nothing).
    """
    kinds = tuple(leak.without_signal)
    first = int(sum(leak.lengths[:-1]))
    doc = np.full(leak.lengths[-1], len(leak.lengths) - 1)
    broken = np.stack([(leak.with_signal if k in given else leak.without_signal)[k] for k in kinds])
    return layer_diff_figure(kinds, broken, np.stack([leak.with_signal[k] for k in kinds]), document_ids=doc,
                             title=title, first=first)
