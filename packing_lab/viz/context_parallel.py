"""Figures of a packed row cut over context-parallel ranks: the cut, the ring's steps, the balance per scheme.

- :func:`cp_cut_figure`: the padded row (each document a colour, pads grey) over the slots each rank holds;
- :func:`ring_steps_figure`: one mask per rank and ring step, the keys it reads from the rank it came from;
- :func:`cp_balance_figure`: each rank's share of the causal work, one group of bars per scheme.

Pure plotly from :mod:`packing_core.parallel` values; the colours are :mod:`packing_lab.viz.style`'s.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from packing_lab.viz.rows import sparse_labels
from packing_lab.viz.style import (
    PAD_COLOUR,
    PALETTE,
    REFERENCE_COLOUR,
    apply_layout,
    code_heatmap,
    colour_codes,
    legend_swatch,
)

SCHEME_COLOURS = {"contiguous": PALETTE[0], "zigzag-row": PALETTE[1], "zigzag-document": PALETTE[3]}
MAX_STEP_PANELS = 16      # a ring of more ranks shows its first ranks' steps: 4 x 4 panels fit a projector


def cp_cut_figure(split, row: int = 0, title: str | None = None) -> go.Figure:
    """Row ``row`` of the padded batch (zigzag-document: the stream), and under it the rank that holds each slot.

    >>> from packing_core.batch.packed import PackedBatch
    >>> from packing_core.parallel.split import split_batch
    >>> fig = cp_cut_figure(split_batch(PackedBatch.from_documents([[1] * 7, [2] * 5], 16), 2))
    >>> [t.name for t in fig.data][-2:]
    ['rank 0', 'rank 1']
    """
    W = split.input_ids.shape[1]
    owner = np.full(W, -1)
    for rb in split.ranks:
        cols = rb.global_index[row if split.scheme != "zigzag-document" else 0]
        owner[cols] = rb.rank
    piece = split.piece_ids[row]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.5, 0.5])
    x = np.arange(W)
    labels = sparse_labels(np.where(piece >= 0, split.position_ids[row], -1).astype(str))
    fig.add_trace(code_heatmap(colour_codes(piece)[None], x=x, y=["documents"], gaps=True,
                               text=np.where(piece >= 0, labels, "")[None],
                               show_text=W <= 48, customdata=piece[None],
                               hovertemplate="slot %{x}: document %{customdata}, position %{text}<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Heatmap(z=owner[None], x=x, y=["rank"], zmin=-0.5, zmax=max(split.cp - 0.5, 0.5),
                             colorscale=_rank_scale(split.cp), showscale=False, xgap=1, ygap=2,
                             text=owner.astype(str)[None], texttemplate="%{text}" if W <= 48 else None,
                             hovertemplate="slot %{x}: rank %{z}<extra></extra>"), row=2, col=1)
    legend_swatch(fig, "pad", PAD_COLOUR)
    for r in range(split.cp):
        legend_swatch(fig, f"rank {r}", _rank_colour(r, split.cp))
    fig.update_xaxes(title_text="slot of the padded row" if split.scheme != "zigzag-document" else
                     "slot of the padded stream", row=2, col=1)
    what = {"contiguous": "each row cut in N windows", "zigzag-row": "each row cut in 2N chunks",
            "zigzag-document": "each document cut in 2N chunks"}[split.scheme]
    return apply_layout(fig, title=title or f"CP {split.cp}, {split.scheme}: {what}; {split.pads_added} pads added",
                        height=230)


RANK_COLOURS = ("#6baed6", "#9ecae1", "#c6dbef", "#e3eef8")   # blues light enough for dark digits (6:1 and more)


def _rank_colour(r: int, cp: int) -> str:
    return RANK_COLOURS[r % len(RANK_COLOURS)] if cp <= len(RANK_COLOURS) else PALETTE[r % len(PALETTE)]


def _rank_scale(cp: int) -> list:
    if cp == 1:
        return [[0, _rank_colour(0, 1)], [1, _rank_colour(0, 1)]]
    scale = []
    for r in range(cp):
        scale += [[r / cp, _rank_colour(r, cp)], [(r + 1) / cp, _rank_colour(r, cp)]]
    return scale


def ring_steps_figure(steps, cp: int, title: str | None = None) -> go.Figure:
    """One panel per rank (rows) and ring step (columns): the mask that step applies, its section and pairs.

    A coloured cell: the query (row) reads the key (column) of the rank the keys came from.
    """
    shown = min(cp, int(np.sqrt(MAX_STEP_PANELS)))
    grid = {(s.rank, s.step): s for s in steps if s.rank < shown and s.step < shown}
    titles = [f"rank {r} ← {grid[r, k].source}: {grid[r, k].section} ({grid[r, k].pairs})"
              for r in range(shown) for k in range(shown)]
    fig = make_subplots(rows=shown, cols=shown, subplot_titles=titles, horizontal_spacing=0.04,
                        vertical_spacing=0.09 if shown > 2 else 0.16)
    for (r, k), s in grid.items():
        z = np.where(s.mask, 1, 0).astype(float)
        fig.add_trace(go.Heatmap(z=z, zmin=0, zmax=1, colorscale=[[0, "#f4f5f7"], [1, PALETTE[3]]],
                                 showscale=False, hovertemplate="query %{y}, key %{x}<extra></extra>"),
                      row=r + 1, col=k + 1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    for a in fig.layout.annotations:
        a.font.size = 11
    note = "" if shown == cp else f" (the first {shown} ranks and steps)"
    return apply_layout(fig, title=title or f"The ring, CP {cp}: step s brings rank r the keys of rank r - s{note}",
                        height=130 * shown + 40)


def cp_balance_figure(balances, title: str | None = None) -> go.Figure:
    """Each rank's share of the causal work per scheme (one CP size); the even share dashed.

    >>> from packing_core.packing.strategies import make_plan
    >>> from packing_core.parallel.balance import cp_balance
    >>> [t.name for t in cp_balance_figure(cp_balance(make_plan([16], 16, "bfd"), 2)).data]
    ['contiguous (slowest 1.47x mean)', 'zigzag-row (slowest 1.00x mean)', 'zigzag-document (slowest 1.00x mean)']
    """
    cp = balances[0].cp
    ranks = [f"rank {r}" for r in range(cp)]
    fig = go.Figure()
    for b in balances:
        fig.add_trace(go.Bar(x=ranks, y=b.shares, name=f"{b.scheme} (slowest {b.slowest:.2f}x mean)",
                             marker_color=SCHEME_COLOURS[b.scheme], customdata=b.work,
                             hovertemplate="%{x}: %{y:.1%} of the work (%{customdata:,.0f} pairs)<extra></extra>"))
    fig.add_hline(y=1 / cp, line_dash="dash", line_color=REFERENCE_COLOUR, annotation_text="even share",
                  annotation_position="top left")
    fig.update_layout(barmode="group", yaxis_title="share of the causal work", yaxis_tickformat=".0%")
    return apply_layout(fig, title=title or f"Causal work per rank at CP {cp}", height=300)
