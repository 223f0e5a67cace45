"""Figures of one packed row: attention masks, token tracks (ids, positions, targets, loss) and
the per-token logit differences of a verification report. Pure plotly, no Streamlit.

Colours follow :mod:`packing_lab.viz.style`: document ``d`` in ``PALETTE[d % 10]``, pads grey,
red where something crosses a document edge. A row of 64 tokens shows every token's
character and value; a row of 2,048 is downsampled (one cell per k tokens) and shows colour.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from packing_core._validate import InputError
from packing_core.attention.masks import same_document
from packing_core.batch.packed import IGNORE_INDEX
from packing_lab.viz.highlight import centres, frame, frame_span, pick_markers, span
from packing_lab.viz.style import (
    EMPTY,
    EMPTY_COLOUR,
    LEAK,
    LEAK_COLOUR,
    PAD,
    PAD_COLOUR,
    REFERENCE_COLOUR,
    apply_layout,
    code_heatmap,
    colour_codes,
    doc_colour,
    downsample_codes,
    legend_swatch,
    stride_for,
    swatch_text,
    wrap_title,
)

TEXT_UP_TO = 96   # tokens: up to this row width every cell shows its character or value
PLOT_PX = 460     # a track's plot area at a projector's 1024 pixels beside the sidebar (its names wrapped at the left)


def sparse_labels(labels, plot_px: int = PLOT_PX, font_px: int = 11) -> np.ndarray:
    """A track's labels thinned until they fit their cells: numbers wider than a cell show every k-th value
    (0 always, so each document's start), a run of one repeated number shows once; characters all stay.

    >>> sparse_labels([str(i) for i in range(64)])[:8].tolist()
    ['0', '', '', '3', '', '', '6', '']
    >>> sparse_labels(["3", "3", "3", "4", "4"], plot_px=20).tolist()
    ['3', '', '', '4', '']
    """
    labels = np.asarray(labels).astype(str)
    if not len(labels):
        return labels
    cell = plot_px / len(labels)
    numeric = np.char.isdigit(np.char.lstrip(labels, "-"))
    repeated = np.r_[False, labels[1:] == labels[:-1]]
    out = np.where(repeated & numeric, "", labels)
    widest = int(np.char.str_len(labels).max())
    every = int(np.ceil((0.6 * font_px * widest + 3) / cell))
    if widest > 1 and every > 1 and numeric.any():
        values = np.where(numeric, np.char.lstrip(labels, "-"), "0").astype(np.int64)
        out = np.where(numeric & (values % every != 0), "", out)
    return out



def token_labels(ids) -> np.ndarray:
    """Byte token ids as readable characters: ``[72, 105, 32, 10] -> ['H', 'i', '␣', '·']``."""
    ids = np.asarray(ids, dtype=np.int64)
    printable = (ids >= 33) & (ids < 127)
    chars = np.array([chr(i) for i in range(128)], dtype=object)
    out = np.where(printable, chars[np.clip(ids, 0, 127)], "·")
    out = np.where(ids == 32, "␣", out)
    return out.astype(str)


# ---------------------------------------------------------------- masks
def mask_figure(masks: dict, doc_ids, position_ids, *, max_side: int = 128,
                title: str | None = None, highlight: int | None = None, pickable: bool = False) -> go.Figure:
    """Attention masks side by side: query i (row) may read key j (column) where a cell is coloured.

    ``masks`` maps a panel title to a bool ``[L, L]`` array. An allowed cell takes the
    query's document colour when both tokens share a document, red when it reads another
    document (a leak); pads are grey, forbidden cells white. Hover names both tokens.
    ``highlight`` frames that document's own block in every panel, and dashes the band of its
    queries (every key they could read); ``pickable`` lets a click on a document's block select it.
    """
    doc = np.asarray(doc_ids, dtype=np.int64)
    pos = np.asarray(position_ids, dtype=np.int64)
    L = len(doc)
    k = stride_for(L, max_side)
    idx = np.arange(0, L, k)
    every = np.arange(L)
    same = same_document(doc)(every[:, None], every[None, :])   # the rule's own predicate (attention.masks)
    pad = (doc[:, None] < 0) | (doc[None, :] < 0)
    d = doc[idx]
    custom = np.stack(np.broadcast_arrays(d[:, None], pos[idx][:, None], d[None, :], pos[idx][None, :]),
                      axis=-1).astype(np.int32)
    fig = make_subplots(1, len(masks), subplot_titles=list(masks), horizontal_spacing=0.06)
    for c, (name, allowed) in enumerate(masks.items(), start=1):
        a = np.asarray(allowed, dtype=bool)
        if a.shape != (L, L):
            raise InputError(f"mask {name!r} has shape {a.shape}, expected ({L}, {L}) for {L} tokens")
        codes = np.where(pad, PAD, np.where(a, np.where(same, colour_codes(doc)[:, None], LEAK), EMPTY))
        codes = downsample_codes(codes, k, axes=(0, 1))
        fig.add_trace(code_heatmap(
            codes, x=idx, y=idx, customdata=custom, gaps=k == 1 and L <= 96,
            hovertemplate=("query token %{y}: document %{customdata[0]}, position %{customdata[1]}<br>"
                           "key token %{x}: document %{customdata[2]}, position %{customdata[3]}"
                           "<extra></extra>")), 1, c)
    legend_swatch(fig, "reads its own document", doc_colour(0))
    legend_swatch(fig, "reads another document (leak)", LEAK_COLOUR)
    legend_swatch(fig, "masked", EMPTY_COLOUR)
    legend_swatch(fig, "pad (document -1)", PAD_COLOUR)
    unit = f" (1 cell = {k}x{k} tokens)" if k > 1 else ""
    fig.update_yaxes(autorange="reversed", title=f"query token i{unit}", showgrid=False, scaleanchor=None)
    fig.update_xaxes(title="key token j", showgrid=False)
    for c in range(2, len(masks) + 1):
        fig.update_yaxes(title=None, col=c)
    docs, mid = centres(doc)
    for c in range(1, len(masks) + 1) if pickable and len(docs) else ():
        pick_markers(fig, mid, mid, docs, row=1, col=c)
    found = span(doc, highlight) if highlight is not None else None
    if found is not None:
        lo, hi = found[0] - 0.5, found[1] - 0.5
        for c in range(1, len(masks) + 1):
            frame(fig, lo, hi, lo, hi, row=1, col=c)
            frame(fig, -0.5, L - 0.5, lo, hi, dash="dot", row=1, col=c)
    return apply_layout(fig, title=title, height=520 if len(masks) < 3 else 420, top=80 if title else 40)


# ---------------------------------------------------------------- token tracks
@dataclass(frozen=True)
class Track:
    """One horizontal strip of a row: a colour code and a label per token."""

    name: str
    codes: np.ndarray   # int [L]: colour codes (see plots)
    labels: np.ndarray  # str [L]: shown in the cell (narrow rows) and on hover


def tracks_figure(tracks: list[Track], *, max_cols: int = 1024, title: str | None = None,
                  show_text: bool | None = None) -> go.Figure:
    """Tracks stacked on one token axis: a single heatmap, one row per track."""
    if not tracks:
        raise InputError("tracks_figure needs at least one Track")
    L = len(tracks[0].codes)
    if any(len(t.codes) != L or len(t.labels) != L for t in tracks):
        raise InputError(f"every track must have {L} tokens, got {[len(t.codes) for t in tracks]}")
    k = stride_for(L, max_cols)
    show = L <= TEXT_UP_TO if show_text is None else show_text
    names = [t.name for t in tracks]
    codes = downsample_codes(np.stack([t.codes for t in tracks]), k)
    labels = np.stack([np.asarray(t.labels, dtype=str) for t in tracks])[:, ::k]
    # grey says "pad" (the word would crowd the cells); wide numbers thin out to fit a projector's cells
    shown = np.stack([sparse_labels(row) for row in np.where(codes == PAD, "", labels)])
    heat = code_heatmap(codes, x=np.arange(0, L, k), y=names, text=shown, show_text=show and k == 1,
                        gaps=k == 1 and L <= 256, customdata=labels,
                        hovertemplate="token %{x}, %{y}: %{customdata}<extra></extra>")
    heat.textfont = dict(size=13 if L <= 40 else 11 if L <= 72 else 9)   # black or white by cell: plotly's own
    fig = go.Figure(heat)
    # each name on two short lines: the cells get the width a projector needs
    fig.update_yaxes(autorange="reversed", showgrid=False, tickvals=names,
                     ticktext=[wrap_title(n, 18) for n in names])
    fig.update_xaxes(title=f"token in the row{f' (1 cell = {k} tokens)' if k > 1 else ''}", showgrid=False)
    return apply_layout(fig, title=title, height=90 + 34 * len(tracks))


def pickable_tracks(fig: go.Figure, tracks: list[Track], doc, highlight: int | None, pickable: bool) -> go.Figure:
    """A tracks figure with ``highlight``'s tokens framed on every track, and (``pickable``) a click on a document's
    first track selecting it."""
    if pickable:
        docs, mid = centres(doc)
        if len(docs):
            pick_markers(fig, mid, [tracks[0].name] * len(docs), docs)
    return frame_span(fig, doc, highlight, y0=-0.5, y1=len(tracks) - 0.5)


def _doc_track(name: str, doc: np.ndarray, labels, on=None) -> Track:
    """Document colour where ``on`` (default: every real token), white elsewhere, grey on pads."""
    codes = colour_codes(doc)
    if on is not None:
        codes = np.where((doc >= 0) & ~np.asarray(on, dtype=bool), EMPTY, codes)
    return Track(name, codes, np.asarray(labels).astype(str))


def layout_figure(batch, row: int, *, continuous_positions=None, title: str | None = None,
                  highlight: int | None = None, pickable: bool = False) -> go.Figure:
    """Tokens, piece_ids, position_ids (and, if given, the continuous ones) of one row.

    ``continuous_positions`` (int [width]) adds the buggy track: cells where it differs
    from the reset positions turn red. A real token without a piece (-1) is red too.
    """
    doc = batch.document_ids[row].numpy()
    seg = batch.piece_ids[row].numpy()
    pos = batch.position_ids[row].numpy()
    valid = doc >= 0  # a real token, even when a bug took it out of its piece (piece_ids -1)
    tokens = np.where(valid, token_labels(batch.input_ids[row].numpy()), "pad")
    tracks = [
        _doc_track("tokens", doc, tokens),
        _doc_track("piece_ids", doc, seg),
        _doc_track("position_ids (reset)", doc, pos),
    ]
    if continuous_positions is not None:
        cont = np.asarray(continuous_positions, dtype=np.int64)
        t = _doc_track("position_ids (continuous)", doc, np.where(valid, cont, 0))
        tracks.append(Track(t.name, np.where(valid & (cont != pos), LEAK, t.codes), t.labels))
    tracks[1] = Track(tracks[1].name, np.where(valid & (seg < 0), LEAK, tracks[1].codes), tracks[1].labels)
    return pickable_tracks(tracks_figure(tracks, title=title), tracks, doc, highlight, pickable)


def targets_figure(batch, row: int, naive, *, title: str | None = None, highlight: int | None = None,
                   pickable: bool = False) -> go.Figure:
    """Input -> target pairs: the naive row shift (red where it crosses a document edge),
    the batch's own targets, the answer tokens and the loss mask, as separate tracks.

    ``naive`` is a :class:`~packing_lab.zoo.planted.NaiveTargets` of the same row (of the batch
    as built, so a planted bug shows in the ``targets`` track only).
    """
    doc = batch.document_ids[row].numpy()
    valid = doc >= 0
    ids = batch.input_ids[row].numpy()
    loss = batch.loss_mask[row].numpy()
    answer = batch.answer_mask[row].numpy()

    def target_track(name, tgt, alert=None):
        has = tgt != IGNORE_INDEX
        labels = np.where(has, token_labels(np.where(has, tgt, 0)), np.where(valid, "–", "pad"))
        codes = np.where(valid & ~has, EMPTY, colour_codes(doc))
        if alert is not None:
            codes = np.where(alert, LEAK, codes)
        return Track(name, codes, labels)

    tracks = [
        _doc_track("input token", doc, np.where(valid, token_labels(ids), "pad")),
        target_track("row-shifted target (bug)", naive.naive, naive.crosses),
        target_track("targets (batch)", batch.targets[row].numpy()),
        _doc_track("loss_mask", doc, np.where(loss, "1", "0"), on=loss),
    ]
    if (valid & ~answer).any():  # instruction data: show which tokens are prompt (P) and answer (A)
        tracks.insert(3, _doc_track("answer tokens (A) / prompt (P)", doc,
                                    np.where(answer, "A", np.where(valid, "P", "pad")), on=answer))
    return pickable_tracks(tracks_figure(tracks, title=title), tracks, doc, highlight, pickable)


# ---------------------------------------------------------------- verification
def logit_diff_figure(token_diffs, cu_seqlens, tolerance: float, *, floor: float | None = None,
                      title: str | None = None) -> go.Figure:
    """Per-token max |logit alone - logit packed| along the row, log scale, one colour per document.

    Document boundaries are dotted lines, the tolerance a dashed one. Exact zeros (the
    first document under a causal mask) are drawn at ``floor`` so the log axis can show them.
    """
    diffs = np.asarray(token_diffs, dtype=np.float64)
    cu = np.asarray(cu_seqlens, dtype=np.int64)
    if len(cu) < 2 or cu[0] != 0 or cu[-1] != len(diffs):
        raise InputError(f"cu_seqlens must run from 0 to {len(diffs)} tokens, got {cu.tolist()[:8]}")
    floor = tolerance / 1000 if floor is None else floor
    doc = np.repeat(np.arange(len(cu) - 1), np.diff(cu))
    shown = np.maximum(diffs, floor)
    fig = go.Figure(go.Bar(
        x=np.arange(len(diffs)), y=shown, marker=dict(color=[doc_colour(int(d)) for d in doc], line=dict(width=0)),
        customdata=np.stack([doc, np.arange(len(diffs)) - cu[doc], diffs], axis=1),
        hovertemplate=("token %{x} (document %{customdata[0]}, position %{customdata[1]})<br>"
                       "max |Δlogit| = %{customdata[2]:.2e}<extra></extra>")))
    for b in cu[1:-1]:
        fig.add_vline(x=b - 0.5, line=dict(color=REFERENCE_COLOUR, dash="dot", width=1))
    fig.add_hline(y=tolerance, line=dict(color=REFERENCE_COLOUR, dash="dash", width=2))
    # annotations on a log axis take log10 coordinates (add_hline's own label would not)
    fig.add_annotation(x=0, xref="paper", xanchor="left", y=np.log10(tolerance), yanchor="bottom",
                       text=f"tolerance {tolerance:.1e}", showarrow=False, font=dict(color=REFERENCE_COLOUR))
    for d in range(len(cu) - 1):    # inside the plot's top, every other one a line lower: neighbours never overlap
        fig.add_annotation(x=(cu[d] + cu[d + 1] - 1) / 2, y=1.0, yref="paper", yanchor="top", yshift=-22 * (d % 2),
                           text=swatch_text(doc_colour(d), f"doc {d}"), showarrow=False, bgcolor="white")
    top = max(float(shown.max()), tolerance) * 1000   # headroom above the bars for the document labels
    fig.update_yaxes(type="log", title="max |Δlogit| (log)", range=[np.log10(floor) - 0.3, np.log10(top)],
                     dtick=1, exponentformat="power", gridcolor="#eee")
    fig.update_xaxes(title="token in the packed row", showgrid=False)
    return apply_layout(fig, title=title, height=330, top=70 if title else 40, bargap=0.05, showlegend=False)
