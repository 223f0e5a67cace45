"""The lab's visual language: one palette, colour codes, the shared heatmap and layout helpers.

One colour per document everywhere: document ``d`` is ``PALETTE[d % len(PALETTE)]`` in
the token strips, the masks and the logit differences, so a document is recognisable
from one picture to the next. Pads are grey, slots outside a row are white, and red
means something crossed a document edge.

Every grid is one heatmap trace over *colour codes* (never one shape per cell)::

    codes  -2 outside the row   -1 pad   0..9 document d % 10   10 alert (a leak)

>>> colour_codes([0, 1, 11, -1]).tolist()
[0, 1, 1, -1]

Wide grids are downsampled by a stride (one cell per k tokens) so 2,048 tokens stay usable.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
           "#edc948", "#9c755f", "#ff9da7", "#17becf", "#8cd17d")


EMPTY_COLOUR = "#ffffff"
PAD_COLOUR = "#d0d0d0"
ALERT_COLOUR = "#d62728"


EMPTY, PAD, ALERT = -2, -1, len(PALETTE)


_CODE_COLOURS = (EMPTY_COLOUR, PAD_COLOUR, *PALETTE, ALERT_COLOUR)  # codes -2 .. 10 in order


PACKED_COLOUR, PADDED_COLOUR = "#4e79a7", "#bab0ac"


FONT = dict(family="Inter, Segoe UI, sans-serif", size=13)


def doc_colour(doc: int) -> str:
    """``doc_colour(0) == doc_colour(10) == PALETTE[0]``; a pad (-1) is grey."""
    return PAD_COLOUR if doc < 0 else PALETTE[int(doc) % len(PALETTE)]


def colour_codes(doc_ids) -> np.ndarray:
    """Document ids -> colour codes: ``[0, 1, 11, -1] -> [0, 1, 1, -1]`` (-1 stays a pad)."""
    d = np.asarray(doc_ids, dtype=np.int64)
    return np.where(d >= 0, d % len(PALETTE), PAD)


def _colourscale() -> list:
    """A stepped scale: each code gets one flat band, so a code maps to exactly one colour."""
    n = len(_CODE_COLOURS)
    scale = []
    for k, c in enumerate(_CODE_COLOURS):
        scale += [[k / n, c], [(k + 1) / n, c]]
    return scale


_SCALE = _colourscale()


def code_heatmap(codes: np.ndarray, *, x=None, y=None, text=None, show_text: bool = False,
                 hovertemplate: str | None = None, customdata=None, gaps: bool = False,
                 name: str = "") -> go.Heatmap:
    """A heatmap whose integer ``codes`` map through the shared palette (see module doc)."""
    return go.Heatmap(
        z=codes, x=x, y=y, zmin=EMPTY - 0.5, zmax=ALERT + 0.5, colorscale=_SCALE,
        showscale=False, text=text, texttemplate="%{text}" if show_text and text is not None else None,
        textfont=dict(size=11), hovertemplate=hovertemplate, customdata=customdata,
        xgap=1 if gaps else 0, ygap=2 if gaps else 0, name=name,
    )


def stride_for(n: int, max_cells: int) -> int:
    """Tokens per cell so that ``n`` tokens fit in ``max_cells`` cells: ``stride_for(2048, 512) == 4``."""
    return max(1, -(-int(n) // int(max_cells)))


def downsample_codes(codes: np.ndarray, k: int, axes=(-1,)) -> np.ndarray:
    """One cell per ``k`` along ``axes``: the block's first code, or ALERT if any cell alerts.

    A leak never vanishes between the sampled cells:

    >>> downsample_codes(np.array([0, ALERT, 1, 1]), 2).tolist() == [ALERT, 1]
    True
    """
    out = np.asarray(codes)
    if k == 1:
        return out
    for axis in axes:
        moved = np.moveaxis(out, axis, -1)
        n = moved.shape[-1]
        padded = np.pad(moved, [(0, 0)] * (moved.ndim - 1) + [(0, (-n) % k)], constant_values=EMPTY)
        blocks = padded.reshape(*moved.shape[:-1], -1, k)
        pooled = np.where((blocks == ALERT).any(-1), ALERT, blocks[..., 0])
        out = np.moveaxis(pooled, -1, axis)
    return out


def legend_swatch(fig: go.Figure, name: str, colour: str, symbol: str = "square", **kw) -> None:
    """A legend entry without data: tells what a colour means."""
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, showlegend=True,
                             marker=dict(color=colour, symbol=symbol, size=12,
                                         line=dict(color="#888", width=1)), **kw))


def apply_layout(fig: go.Figure, *, title: str | None, height: int, top: int | None = None, **kw) -> go.Figure:
    """Title top left, legend in one line under the x axis (never over the title), white plot."""
    top = (40 if title else 12) if top is None else top
    bottom, legend_px = 40, 30
    plot_px = max(40, height - top - bottom - legend_px)
    fig.update_layout(title=dict(text=title, x=0, xanchor="left", font=dict(size=15)) if title else None,
                      height=height + legend_px, margin=dict(l=10, r=10, t=top, b=bottom + legend_px),
                      font=FONT, plot_bgcolor="white",
                      legend=dict(orientation="h", yanchor="top", y=-(bottom + 14) / plot_px, x=0,
                                  xanchor="left"), **kw)
    return fig

