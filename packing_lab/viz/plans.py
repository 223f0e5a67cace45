"""Figures of lengths and plans: the token strip of a plan, histograms, strategy bars, benchmarks.

Colours and the shared heatmap helper come from :mod:`packing_lab.viz.style`; the
per-token pictures of one packed row live in :mod:`packing_lab.viz.rows`.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from packing_core._validate import InputError
from packing_core.analysis.costs import benchmark_bounds
from packing_core.packing.registry import PACKING_STRATEGIES
from packing_lab.viz.highlight import frame_pieces, pick_markers
from packing_lab.viz.style import (
    ALERT_COLOUR,
    EMPTY,
    PACKED_COLOUR,
    PAD,
    PAD_COLOUR,
    PADDED_COLOUR,
    REFERENCE_COLOUR,
    SERIES,
    apply_layout,
    code_heatmap,
    doc_colour,
    figure_codes,
    legend_swatch,
    stride_for,
)

MAX_POINTS = 2000  # markers or line points per trace, whatever the data


def plan_grid(plan, first_row: int = 0, max_rows: int = 32, stride: int = 1):
    """Per-slot document ids and token indices of rows ``first_row ..`` of a plan.

    Returns ``(rows, doc, token)``: ``doc`` is -1 on pads and -2 past a row's width. With
    ``stride`` k only every k-th slot is computed, so the grid has ``width / k`` columns
    whatever the context (a context of 2**28 must not build a 2**28-wide grid).
    """
    if not 0 <= first_row < plan.n_rows:
        raise InputError(f"first_row {first_row} does not exist: the plan has rows 0..{plan.n_rows - 1}")
    rows = np.arange(first_row, min(plan.n_rows, first_row + max_rows))
    width = int(plan.row_width[rows].max())
    slot = np.arange(0, width, max(1, int(stride)))
    doc = np.where(slot[None, :] < plan.row_width[rows][:, None], PAD, EMPTY).astype(np.int64)
    token = np.full_like(doc, -1)
    b = plan.row_bounds()
    for i, r in enumerate(rows):  # at most max_rows rows; per row, one search per shown slot
        sl = slice(int(b[r]), int(b[r + 1]))
        order = np.argsort(plan.piece_offset[sl], kind="stable")
        off, length = plan.piece_offset[sl][order], plan.piece_len[sl][order]
        if len(off) == 0:
            continue
        j = np.maximum(np.searchsorted(off, slot, side="right") - 1, 0)
        inside = (slot >= off[j]) & (slot < off[j] + length[j])
        doc[i, inside] = plan.piece_doc[sl][order][j[inside]]
        token[i, inside] = plan.piece_start[sl][order][j[inside]] + slot[inside] - off[j[inside]]
    return rows, doc, token


def plan_strip(plan, *, first_row: int = 0, max_rows: int = 32, max_cols: int = 1024,
               title: str | None = None, show_ticks: bool = True, row_height: int = 30,
               highlight: int | None = None, pickable: bool = False) -> go.Figure:
    """Rows of a plan as coloured token strips: documents in colour, pads grey, ticks at document ends.

    A piece that does not finish its document (split at a row edge) ends in a violet (alert) tick;
    ``highlight`` frames every piece of that document in the rows shown; ``pickable`` lets a click on a piece
    select its document (``highlight.pick_markers``).
    """
    if not 0 <= first_row < plan.n_rows:
        raise InputError(f"first_row {first_row} does not exist: the plan has rows 0..{plan.n_rows - 1}")
    width = int(plan.row_width[first_row:first_row + max_rows].max())
    k = stride_for(width, max_cols)
    rows, doc, token = plan_grid(plan, first_row, max_rows, stride=k)
    x = np.arange(0, width, k)
    labels = np.where(doc >= 0, np.char.add(np.char.add("document ", doc.astype(str)),
                                            np.char.add(", token ", token.astype(str))),
                      np.where(doc == PAD, "pad", "outside the row"))
    codes = np.where(doc == EMPTY, EMPTY, figure_codes(doc))   # documents of one figure never share a colour
    fig = go.Figure(code_heatmap(
        codes, x=x, y=rows, text=labels, gaps=k == 1 and width <= 256,
        hovertemplate="row %{y}, slot %{x}<br>%{text}<extra></extra>"))
    if show_ticks:
        b = plan.row_bounds()
        sl = slice(int(b[rows[0]]), int(b[rows[-1] + 1]))
        end = plan.piece_offset[sl] + plan.piece_len[sl]
        finishes = plan.piece_start[sl] + plan.piece_len[sl] == plan.lengths[plan.piece_doc[sl]]
        for mask, name, colour in ((finishes, "document ends", REFERENCE_COLOUR),
                                   (~finishes, "document split here", ALERT_COLOUR)):
            shown = np.flatnonzero(mask)
            mask = shown[:: stride_for(len(shown), MAX_POINTS)]  # tiny documents: a bounded number of ticks
            if len(mask):
                fig.add_trace(go.Scatter(
                    x=end[mask] - 0.5, y=plan.piece_row[sl][mask], mode="markers", name=name,
                    marker=dict(symbol="line-ns", size=max(8, min(26, row_height - 4)),
                                line=dict(width=3, color=colour), color=colour),
                    customdata=plan.piece_doc[sl][mask],
                    hovertemplate=f"{name}: document %{{customdata}} at slot %{{x:.0f}}<extra></extra>"))
    legend_swatch(fig, "pad", PAD_COLOUR)
    step = max(1, len(rows) // 12)  # at most ~12 row labels
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=rows[::step],
                     ticktext=[f"row {r}" for r in rows[::step]], showgrid=False)
    fig.update_xaxes(title=f"slot{f' (1 cell = {k} tokens)' if k > 1 else ''}", showgrid=False,
                     range=[-0.5, width - 0.5])
    shown = (plan.piece_row >= rows[0]) & (plan.piece_row <= rows[-1])
    if pickable and shown.any():
        pick_markers(fig, plan.piece_offset[shown] + plan.piece_len[shown] / 2 - 0.5, plan.piece_row[shown],
                     plan.piece_doc[shown])
    if highlight is not None:
        mine = (plan.piece_doc == highlight) & (plan.piece_row >= rows[0]) & (plan.piece_row <= rows[-1])
        frame_pieces(fig, zip(plan.piece_row[mine], plan.piece_offset[mine], plan.piece_len[mine]))
    return apply_layout(fig, title=title, height=110 + row_height * len(rows))


def length_histogram_figure(hist, title: str | None = None) -> go.Figure:
    """Bars from a :class:`~packing_core.analysis.stats.Histogram`, the context as a dashed line."""
    centres = (hist.edges[:-1] + hist.edges[1:]) / 2
    widths = np.diff(hist.edges)
    over = hist.edges[:-1] > hist.context  # report.length_histogram puts an edge at context + 0.5
    colours = np.where(over, ALERT_COLOUR, PACKED_COLOUR)
    fig = go.Figure(go.Bar(
        x=centres, y=hist.counts, width=widths, marker=dict(color=colours, line=dict(width=0)),
        customdata=np.stack([hist.edges[:-1], hist.edges[1:]], axis=1), name="documents",
        hovertemplate="%{customdata[0]:.0f} to %{customdata[1]:.0f} tokens: %{y:,} documents<extra></extra>"))
    fig.add_vline(x=hist.context, line=dict(color=REFERENCE_COLOUR, dash="dash", width=2),
                  annotation_text=f"context {hist.context}", annotation_position="top right")
    if hist.clipped:
        fig.add_annotation(x=centres[-1], y=hist.counts[-1], text=f"+ {hist.clipped:,} longer",
                           showarrow=True, arrowhead=0, ay=-30, font=dict(size=11))
    fig.update_xaxes(title="tokens per document", showgrid=False)
    fig.update_yaxes(title="documents", gridcolor="#eee")
    return apply_layout(fig, title=title, height=320, bargap=0, showlegend=False)


def strategy_figure(rows, title: str | None = None) -> go.Figure:
    """Utilisation, and the attention FLOP ratio against padding to the context, of every strategy.

    Two bars per strategy on the right, both against padded rows run by a kernel that computes
    the pads: with a kernel that skips masked blocks (varlen fed cu_seqlens, one call per
    document; FlexAttention a little more) and with a materialised dense mask, which computes
    every cell of each row. A strategy that splits documents is marked ✂ (its hover says how many):
    the cut is what buys its ratio.
    """
    names = [r.strategy for r in rows]
    colours = [PACKED_COLOUR if n in PACKING_STRATEGIES else PADDED_COLOUR for n in names]
    fig = make_subplots(1, 2, subplot_titles=("utilisation (real tokens / slots)",
                                              "attention FLOP ratio vs padded rows, pads computed"),
                        horizontal_spacing=0.16)
    util = np.array([r.utilisation for r in rows])
    skip = np.array([r.attention_ratio for r in rows])
    dense = np.array([r.dense_mask_ratio for r in rows])
    # inside a long bar, outside a short one: an outside "100.0%" ran into the right panel's names at 1024 px
    fig.add_trace(go.Bar(y=names, x=util, orientation="h", marker_color=colours, showlegend=False,
                         text=[f"{u:.1%}" for u in util], textposition="auto", insidetextanchor="end", textangle=0,
                         cliponaxis=False, hovertemplate="%{y}: %{x:.1%}<extra></extra>"), 1, 1)
    # The mark stays short so the label fits beside its bar at a projector's width; the hover and
    # the page's caption say how many documents the cut splits.
    split_note = [" ✂" if r.docs_split and r.strategy == "concat-cut" else "" for r in rows]
    split_hover = [f" ({r.docs_split:,} docs split)" if n else "" for r, n in zip(rows, split_note)]
    fig.add_trace(go.Bar(y=names, x=skip, orientation="h", marker_color=colours, name="kernel skips masked blocks",
                         showlegend=False, text=[f"{s:.1f}x{n}" for s, n in zip(skip, split_note)],
                         textposition="outside", textangle=0, cliponaxis=False, customdata=split_hover,
                         hovertemplate="%{y}: %{x:.2f}x fewer attention FLOPs (kernel skips masked blocks)"
                                       "%{customdata}<extra></extra>"), 1, 2)
    fig.add_trace(go.Bar(y=names, x=dense, orientation="h", marker_color=PAD_COLOUR, name="dense mask",
                         showlegend=False, text=[f"{d:.1f}x" for d in dense], textposition="outside",
                         textangle=0, cliponaxis=False,
                         hovertemplate="%{y}: %{x:.2f}x fewer attention FLOPs (materialised dense mask)"
                                       "<extra></extra>"), 1, 2)
    fig.update_xaxes(range=[0, 1.18], tickvals=[0, 0.25, 0.5, 0.75, 1], tickformat=".0%",
                     gridcolor="#eee", row=1, col=1)
    fig.update_xaxes(gridcolor="#eee", range=[0, float(max(skip.max(), dense.max())) * 1.45], row=1, col=2)
    fig.update_yaxes(autorange="reversed")
    legend_swatch(fig, "packing", PACKED_COLOUR)
    legend_swatch(fig, "padding (one sample per row)", PADDED_COLOUR)
    legend_swatch(fig, "second bar: same plan with a dense mask (every cell computed)", PAD_COLOUR)
    # room above the panel titles for plotly's toolbar, which covered the right one on hover
    return apply_layout(fig, title=title, height=140 + 44 * len(rows), top=100 if title else 70,
                        barmode="group")


def bills_figure(bills: dict, title: str | None = None) -> go.Figure:
    """Each bill of a plan beside padding every sample to the context: ``bills`` maps a bill's name to
    ``(padded, this plan)``; both bars are drawn as a share of the padded bill, labelled with the ratio.

    >>> [t.name for t in bills_figure({"linear layers (slots)": (4096, 1024)}).data]
    ['padded to the context', 'this plan']
    """
    names = list(bills)
    share = [plan / padded if padded else 0.0 for padded, plan in bills.values()]
    fig = go.Figure([
        go.Bar(y=names, x=[1.0] * len(names), orientation="h", name="padded to the context",
               marker_color=PADDED_COLOUR, customdata=[padded for padded, _ in bills.values()],
               hovertemplate="%{y}, padded: %{customdata:,}<extra></extra>"),
        go.Bar(y=names, x=share, orientation="h", name="this plan", marker_color=PACKED_COLOUR,
               customdata=[plan for _, plan in bills.values()],
               text=[f"{1 / s:.1f}x fewer" if s else "" for s in share], textposition="outside", cliponaxis=False,
               hovertemplate="%{y}, this plan: %{customdata:,}<extra></extra>"),
    ])
    fig.update_xaxes(range=[0, 1.3], tickvals=[0, 0.25, 0.5, 0.75, 1], tickformat=".0%", gridcolor="#eee",
                     title="share of the padded bill")
    fig.update_yaxes(autorange="reversed")
    return apply_layout(fig, title=title, height=120 + 44 * len(names), barmode="group")


def slot_use_figure(rows, title: str | None = None) -> go.Figure:
    """Stacked bars: real tokens and pads per strategy, in slots."""
    names = [r.strategy for r in rows]
    real = np.array([r.slots - r.pad_tokens for r in rows])
    pads = np.array([r.pad_tokens for r in rows])
    fig = go.Figure([
        go.Bar(y=names, x=real, orientation="h", name="real tokens", marker_color=PACKED_COLOUR,
               hovertemplate="%{y}: %{x:,} real tokens<extra></extra>"),
        go.Bar(y=names, x=pads, orientation="h", name="pads", marker_color=PAD_COLOUR,
               text=[f"{p / max(1, p + r):.0%} pads" for p, r in zip(pads, real)], textposition="inside",
               hovertemplate="%{y}: %{x:,} pads<extra></extra>"),
    ])
    fig.update_xaxes(title="slots", gridcolor="#eee")
    fig.update_yaxes(autorange="reversed")
    return apply_layout(fig, title=title, height=110 + 40 * len(rows), barmode="stack")


def benchmark_figure(result: dict, title: str | None = None) -> go.Figure:
    """Tokens/s of the padded baseline and each packed backend, each beside its own FLOP bound.

    A backend's bound is padded tokens/s x (padded FLOPs / that backend's FLOPs): ``dense``
    computes every cell of each packed row, the others one square per document
    (``analysis.costs.benchmark_bounds``). The goal line is each backend's ``goal_factor`` x its bound.
    """
    padded = result.padded.tokens_per_s
    names = ["padded"] + list(result.backends)
    tps = [padded] + [r.tokens_per_s for r in result.backends.values()]
    colours = [PADDED_COLOUR] + [PACKED_COLOUR] * (len(names) - 1)
    bounds = benchmark_bounds(result)
    fig = go.Figure(go.Bar(x=names, y=tps, marker_color=colours, name="measured",
                           text=[f"{t:,.0f}" for t in tps], textposition="outside",
                           hovertemplate="%{x}: %{y:,.0f} tokens/s<extra></extra>"))
    bx = list(bounds)
    by = [padded * bounds[b] for b in bx]
    fig.add_trace(go.Scatter(x=bx, y=by, mode="markers+text", name="FLOP bound",
                             marker=dict(symbol="line-ew", size=40, line=dict(width=3, color=REFERENCE_COLOUR)),
                             text=[f"bound {bounds[b]:.1f}x" for b in bx], textposition="top center",
                             hovertemplate="%{x}: bound %{y:,.0f} tokens/s<extra></extra>"))
    goals = [result.backends[b].goal_factor for b in bx]
    fig.add_trace(go.Scatter(x=bx, y=[y * f for y, f in zip(by, goals)], mode="markers",
                             name="goal: " + ", ".join(sorted({f"{f:.0%}" for f in goals})) + " of the bound",
                             marker=dict(symbol="line-ew", size=40, line=dict(width=1, color=REFERENCE_COLOUR))))
    fig.update_yaxes(title="attention tokens per second", gridcolor="#eee", rangemode="tozero",
                     range=[0, max(max(tps), max(by, default=0)) * 1.22])
    return apply_layout(fig, title=title, height=380, showlegend=True)


def row_order_figure(orders: dict, title: str | None = None) -> go.Figure:
    """Longest document per row, in row order: one panel per plan (``{label: RowOrder}``), stacked on one row axis
    and one length axis, so no line hides another (bfd's falling line is the point; a shuffle's noise is its own).

    At most ``MAX_POINTS`` points per line: beyond that, each point is the longest of a
    block of rows (a spike never vanishes).
    """
    n = max(1, len(orders))
    fig = make_subplots(rows=n, cols=1, shared_xaxes=True, shared_yaxes=True, vertical_spacing=0.12 if n > 1 else 0,
                        subplot_titles=list(orders))
    top = 1
    for i, (label, order) in enumerate(orders.items()):
        longest = np.asarray(order.longest)
        k = stride_for(len(longest), MAX_POINTS)
        if k > 1:
            longest = np.maximum.reduceat(longest, np.arange(0, len(longest), k))
        top = max(top, int(longest.max()) if len(longest) else 1)
        fig.add_trace(go.Scattergl(
            x=np.arange(len(longest)) * k, y=longest, mode="lines", name=label, showlegend=False,
            line=dict(width=1.5, color=SERIES[i % len(SERIES)]),
            hovertemplate="row %{x}: longest document %{y} tokens<extra>" + label + "</extra>",
        ), row=i + 1, col=1)
    fig.update_yaxes(range=[0, top * 1.05], nticks=3)
    fig.update_xaxes(title_text="row (the order batches are drawn in)", row=n, col=1)
    fig.update_yaxes(title_text="longest document", row=(n + 1) // 2, col=1)
    for a in fig.layout.annotations:   # each panel's name at its top left, where the eye starts
        a.update(x=0, xanchor="left", font=dict(size=13))
    return apply_layout(fig, title=title, height=60 + 105 * n)



def mixture_figure(mixtures: dict, title: str | None = None) -> go.Figure:
    """Each batch's token share per source, stacked, one panel per row order (``{label: SourceMixture}``), with the
    corpus's shares as dashed lines: bfd's sorted rows drift from them, shuffled rows stay near."""
    n = max(1, len(mixtures))
    fig = make_subplots(rows=n, cols=1, shared_xaxes=True, vertical_spacing=0.14 if n > 1 else 0,
                        subplot_titles=list(mixtures))
    for i, (label, mix) in enumerate(mixtures.items()):
        x = np.arange(len(mix.batches))
        cumulative = np.cumsum(mix.corpus)
        for j, name in enumerate(mix.names):
            colour = doc_colour(j)
            fig.add_trace(go.Scatter(
                x=x, y=mix.batches[:, j], mode="lines", stackgroup=f"s{i}", name=name, legendgroup=name,
                showlegend=i == 0, line=dict(width=0.5, color=colour), fillcolor=colour,
                hovertemplate=f"batch %{{x}}: {name} %{{y:.0%}} of the tokens<extra>{label}</extra>"), row=i + 1, col=1)
            if j < len(mix.names) - 1:      # the corpus's boundary between this source and the next
                fig.add_hline(y=float(cumulative[j]), line=dict(color=REFERENCE_COLOUR, dash="dash", width=1),
                              row=i + 1, col=1)
    fig.update_yaxes(range=[0, 1], tickformat=".0%", nticks=3)
    fig.update_xaxes(title_text="batch (the order they are read in)", row=n, col=1)
    fig.update_yaxes(title_text="share of tokens", row=(n + 1) // 2, col=1)
    for a in fig.layout.annotations:
        if a.text in mixtures:
            a.update(x=0, xanchor="left", font=dict(size=13))
    return apply_layout(fig, title=title, height=80 + 100 * n)
