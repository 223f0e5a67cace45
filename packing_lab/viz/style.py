"""The lab's visual language: one palette, colour codes, the shared heatmap and layout helpers.

One colour per role (``ROLES``): pads grey, a leak red, an alert violet, the correct or
fixed run green, a reference line near-black. One colour per document: document ``d`` is
``PALETTE[d % len(PALETTE)]`` in the token strips, the masks and the logit differences, so a
document is recognisable from one picture to the next, and no document colour is a role's.

Every grid is one heatmap trace over *colour codes* (never one shape per cell)::

    codes  -2 outside the row   -1 pad   0..13 document d % 14   14 leak

>>> colour_codes([0, 1, 15, -1]).tolist()
[0, 1, 1, -1]

Wide grids are downsampled by a stride (one cell per k tokens) so 2,048 tokens stay usable.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

# One meaning per colour. Each role has one colour, no two roles share one, and the document
# palette holds none of them: red is only ever a leak, green only the correct (or fixed) run.
ROLES = {
    "outside": "#ffffff",     # a slot outside a row; a masked cell
    "pad": "#d0d0d0",         # a pad token
    "leak": "#d62728",        # something read or crossed a document edge; the run with the mask off
    "alert": "#7b3294",       # a warning that is not a leak: a document split at a row edge, one over the context
    "fixed": "#1b9e3e",       # the correct run, or a bug's fixed version
    "packing": "#4e79a7",     # a packing strategy (in charts of strategies, never beside documents)
    "padding": "#bab0ac",     # a padding strategy
    "reference": "#222222",   # a line to compare with: a document's end, the context, a tolerance, a bound
}

# Each document of one figure its own colour: 14, more than any row the lessons draw holds.
# A figure with more documents cycles (document d gets PALETTE[d % 14], so neighbours in a row
# still differ) and names every document in its hover label.
PALETTE = ("#f28e2b", "#76b7b2", "#edc948", "#b07aa1", "#9c755f", "#17becf", "#ff9da7",
           "#bcbd22", "#a0cbe8", "#2f6f6b", "#ffbe7d", "#8c6d31", "#e377c2", "#5a5fd6")

EMPTY_COLOUR = ROLES["outside"]
PAD_COLOUR = ROLES["pad"]
LEAK_COLOUR = ROLES["leak"]
ALERT_COLOUR = ROLES["alert"]
FIXED_COLOUR = ROLES["fixed"]
PACKED_COLOUR, PADDED_COLOUR = ROLES["packing"], ROLES["padding"]
REFERENCE_COLOUR = ROLES["reference"]

# st.metric's delta colours by role (Streamlit's own names): a delta is coloured by what it
# means, never by its sign alone. A broken run's better-looking number is "neutral".
DELTA_COLOURS = {"leak": "red", "fixed": "green", "alert": "violet", "neutral": "gray"}


# Lines that are not documents (plans, orders) take role colours, never a document's.
SERIES = (PACKED_COLOUR, REFERENCE_COLOUR, PADDED_COLOUR)


EMPTY, PAD, LEAK = -2, -1, len(PALETTE)
ALERT = LEAK   # the heatmap code's older name: a cell that crossed a document edge


_CODE_COLOURS = (EMPTY_COLOUR, PAD_COLOUR, *PALETTE, LEAK_COLOUR)  # codes -2 .. len(PALETTE) in order


# Text on the white figure, whatever the page's theme (a figure is a white card even on a dark page):
# titles, labels and legends near-black (15:1 on white), tick labels dark grey (7.8:1); WCAG asks 4.5:1,
# and a projector washes the light greys out first (plotly in Streamlit's theme drew ticks at 3.7:1).
TEXT_COLOUR = "#262730"
TICK_COLOUR = "#4f5260"
PAPER_COLOUR = "#ffffff"
FONT = dict(family="Inter, Segoe UI, sans-serif", size=13, color=TEXT_COLOUR)


def contrast_ratio(foreground: str, background: str = PAPER_COLOUR) -> float:
    """WCAG 2 contrast of two ``#rrggbb`` colours, 1 to 21: ``round(contrast_ratio("#767676"), 1) == 4.5``.

    >>> round(contrast_ratio(TICK_COLOUR), 1), round(contrast_ratio("#808495"), 1)
    (7.8, 3.7)
    """
    def luminance(colour: str) -> float:
        channels = [int(colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    hi, lo = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def swatch_text(colour: str, text: str) -> str:
    """A label whose colour is a square before dark text, never the text itself (a yellow word on white reads
    at 1.6:1): ``swatch_text("#f28e2b", "document 0")``."""
    return f"<span style='color:{colour}'>■</span> {text}"


def doc_colour(doc: int) -> str:
    """``doc_colour(0) == doc_colour(14) == PALETTE[0]``; a pad (-1) is grey."""
    return PAD_COLOUR if doc < 0 else PALETTE[int(doc) % len(PALETTE)]


def colour_codes(doc_ids) -> np.ndarray:
    """Document ids -> colour codes: ``[0, 1, 15, -1] -> [0, 1, 1, -1]`` (-1 stays a pad)."""
    d = np.asarray(doc_ids, dtype=np.int64)
    return np.where(d >= 0, d % len(PALETTE), PAD)


def figure_codes(doc_ids) -> np.ndarray:
    """Colour codes for the documents of one figure: no two of them share a colour while they fit the palette.

    Ids that already get distinct colours keep ``d % len(PALETTE)`` (the colour they have in
    every other figure). Otherwise the documents are numbered in reading order (row by row),
    so that neighbours differ and colours repeat only ``len(PALETTE)`` documents apart:

    >>> figure_codes([[3, 17, -1]]).tolist()        # 3 and 17 would both be PALETTE[3]
    [[0, 1, -1]]
    >>> figure_codes([[3, 5]]).tolist()
    [[3, 5]]
    """
    d = np.asarray(doc_ids, dtype=np.int64)
    real = d >= 0
    ids = np.unique(d[real])
    if len(np.unique(ids % len(PALETTE))) == len(ids):
        return np.where(d == EMPTY, EMPTY, colour_codes(d))
    seen = d[real]                                  # row-major: the reading order
    _, first = np.unique(seen, return_index=True)   # position of each id's first appearance
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(ids))
    out = np.full(d.shape, PAD, dtype=np.int64)
    out[real] = rank[np.searchsorted(ids, seen)] % len(PALETTE)
    return np.where(real, out, np.where(d == EMPTY, EMPTY, PAD))


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


TITLE_CHARS = 40   # a title's line: fits a figure in half of a 1024-pixel projector's page
LEGEND_ROW_PX = 600   # the width a legend row gets in a full-width figure at 1024 pixels


def wrap_title(title: str, width: int = TITLE_CHARS) -> str:
    """Break a long title into lines of at most ``width`` characters, at spaces (plotly never wraps).

    >>> wrap_title("concat-cut: one stream, cut every 512 tokens", 30)
    'concat-cut: one stream, cut<br>every 512 tokens'
    >>> wrap_title("segments<br>1,234 cells: 8.0x fewer", 30)
    'segments<br>1,234 cells: 8.0x fewer'
    """
    if "<br>" in title:   # lines the caller broke stay broken; each is wrapped on its own
        return "<br>".join(wrap_title(part, width) for part in title.split("<br>"))
    lines, line = [], ""
    for word in title.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join([*lines, line])


def apply_layout(fig: go.Figure, *, title: str | None, height: int, top: int | None = None, **kw) -> go.Figure:
    """Title top left (wrapped to fit half a projector's page), legend under the x axis, a white card with
    dark text in any theme (``TEXT_COLOUR``, ``TICK_COLOUR``: at least 7:1 on white).

    The title hangs from the top edge and subplot titles sit under it, each in a band of its own, so a
    wrapped title never runs into the first panel's title.
    """
    if title:
        title = wrap_title(title)
    title_lines = title.count("<br>") + 1 if title else 0
    subplot_titles = [a for a in fig.layout.annotations if a.yanchor == "bottom" and a.yref == "paper"]
    sub_lines = 0
    if len(subplot_titles) > 1:   # side by side, each gets its share of the width
        chars = max(16, int(TITLE_CHARS * 1.6 / len(subplot_titles)))
        for a in subplot_titles:
            a.text = wrap_title(a.text, chars)
    if subplot_titles:
        sub_lines = max(a.text.count("<br>") + 1 for a in subplot_titles)
    needed = (20 + 20 * title_lines if title else 8) + (17 * sub_lines + 6 if sub_lines else 0)
    base = (40 if title else 12) if top is None else top
    top = max(base + (19 * (title_lines - 1) if title_lines else 0), needed)
    height = height + top - base
    # The legend sits in its own strip at the figure's foot, sized for the rows it wraps into
    # at a projector's width, so it never covers the x axis.
    names = [t.name for t in fig.data if t.name and t.showlegend is not False]
    legend_rows = max(1, math.ceil(sum(7 * len(n) + 44 for n in names) / LEGEND_ROW_PX))
    bottom, legend_px = 40, 22 * legend_rows + 8
    fig.update_layout(title=dict(text=title, x=0, xanchor="left", y=1, yref="container", yanchor="top",
                                 pad=dict(t=16), font=dict(size=15, color=TEXT_COLOUR)) if title else None,
                      height=height + legend_px, margin=dict(l=10, r=10, t=top, b=bottom + legend_px),
                      font=FONT, plot_bgcolor=PAPER_COLOUR, paper_bgcolor=PAPER_COLOUR,
                      legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, x=0,
                                  xanchor="left", font=dict(color=TEXT_COLOUR)), **kw)
    fig.update_xaxes(tickfont=dict(color=TICK_COLOUR), title_font=dict(color=TEXT_COLOUR))
    fig.update_yaxes(tickfont=dict(color=TICK_COLOUR), title_font=dict(color=TEXT_COLOUR))
    for a in fig.layout.annotations:
        if a.font.color is None:
            a.font.color = TEXT_COLOUR
    return fig
