"""Figures of a bug zoo reproduction: what went wrong, beside the fix, from the reproduction's own arrays.

:func:`zoo_figures` draws each part a :class:`~packing_lab.zoo.ZooResult` carries
(``result.drawn``), one figure each:

- ``logits``: per-token max |Δlogit| against each document alone, broken and fixed, log scale;
- ``mask``: the keys each query reads, broken and fixed (the shared ``mask_figure``);
- ``targets``: the token trained at each position, broken and fixed;
- ``positions``: the position ids, and the sequences the model's code finds in them;
- ``weights``: each document's share of the gradient;
- ``layers``: each layer beyond attention, its output against the document alone, per token;
- ``launch``: each document's length against max_seqlen and the queries flash-attn's blocks cover.

Colours are the roles of :mod:`packing_lab.viz.style`: the broken run is the leak colour when
its documents read each other, the alert colour when it is wrong in another way; the fix is
the fixed colour; a cell that differs from the fix is circled in the alert colour, and a
target that crosses a document edge is the leak colour.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from packing_core.batch.packed import IGNORE_INDEX
from packing_lab.viz.mixers import layer_diff_figure
from packing_lab.viz.rows import Track, mask_figure, tracks_figure
from packing_lab.viz.style import (
    ALERT_COLOUR,
    EMPTY,
    FIXED_COLOUR,
    LEAK,
    LEAK_COLOUR,
    REFERENCE_COLOUR,
    apply_layout,
    colour_codes,
    doc_colour,
    swatch_text,
)

DIFFERS = "differs from the fix"   # the name of the circles that mark it


def broken_colour(result) -> str:
    """The leak colour when the broken setup lets a query read another document, else the alert colour."""
    m, doc = result.broken_mask, result.document_ids
    if m is None or doc is None:
        return ALERT_COLOUR
    real = (doc[:, None] >= 0) & (doc[None, :] >= 0)
    return LEAK_COLOUR if bool((m & real & (doc[:, None] != doc[None, :])).any()) else ALERT_COLOUR


def zoo_figures(result) -> dict[str, go.Figure]:
    """One figure per part the reproduction carries, in the order of ``result.drawn``."""
    builders = {"logits": logits_figure, "mask": masks_figure, "targets": targets_figure,
                "positions": positions_figure, "weights": weights_figure, "layers": layers_figure,
                "launch": launch_figure}
    return {part: builders[part](result) for part in result.drawn}


def _labels(result, n: int) -> np.ndarray:
    tokens = np.asarray(result.tokens, dtype=object)
    return tokens.astype(str) if len(tokens) == n else np.arange(n).astype(str)


def _boundaries(doc: np.ndarray) -> np.ndarray:
    """Indices where a new document (or the pads) starts."""
    return np.flatnonzero(np.diff(doc) != 0) + 1


# ---------------------------------------------------------------- logits
def logits_figure(result) -> go.Figure:
    """Per-token max |Δlogit| vs each document alone: the broken run and the fixed one, log scale.

    Exact zeros (a first document, which causality already isolates) sit on a floor a thousand
    times under the tolerance, so the log axis shows them; hover gives the measured value.
    """
    broken = np.asarray(result.broken_token_diffs, dtype=np.float64)
    fixed = np.asarray(result.fixed_token_diffs, dtype=np.float64)
    tol = float(result.tolerance)
    floor = tol / 1000
    x = np.arange(len(broken))
    labels = _labels(result, len(broken))
    fig = go.Figure()
    for name, y, colour in (("broken", broken, broken_colour(result)), ("fixed", fixed, FIXED_COLOUR)):
        fig.add_trace(go.Scatter(
            x=x, y=np.maximum(y, floor), customdata=np.stack([y, labels.astype(object)], axis=1).tolist(),
            mode="lines+markers", name=name, line=dict(color=colour, width=2), marker=dict(color=colour, size=5),
            hovertemplate=f"{name}: token %{{x}} %{{customdata[1]}}<br>max |Δlogit| = %{{customdata[0]:.2e}}"
                          "<extra></extra>"))
    doc = np.asarray(result.document_ids)
    for b in _boundaries(doc):
        fig.add_vline(x=b - 0.5, line=dict(color=REFERENCE_COLOUR, dash="dot", width=1))
    for i, d in enumerate(np.unique(doc[doc >= 0])):   # short documents: every other label a line lower
        at = np.flatnonzero(doc == d)
        fig.add_annotation(x=(at[0] + at[-1]) / 2, y=1.0, yref="paper", yanchor="top", yshift=-22 * (i % 2),
                           showarrow=False, text=swatch_text(doc_colour(d), f"doc {d}"), bgcolor="white")
    fig.add_hline(y=tol, line=dict(color=REFERENCE_COLOUR, dash="dash", width=2))
    fig.add_annotation(x=0, xref="paper", xanchor="left", y=np.log10(tol), yanchor="bottom", showarrow=False,
                       text=f"tolerance {tol:.1e}", font=dict(color=REFERENCE_COLOUR))
    top = max(float(broken.max(initial=0)), tol) * 1000   # headroom above the lines for the document labels
    fig.update_yaxes(type="log", title="max |Δlogit| vs alone (log)", range=[np.log10(floor) - 0.3, np.log10(top)],
                     dtick=1, exponentformat="power", gridcolor="#eee")
    fig.update_xaxes(title="token in the packed row", showgrid=False)
    return apply_layout(fig, title=f"Logits against each document alone: broken max {broken.max(initial=0):.2g}, "
                                   f"fixed max {fixed.max(initial=0):.1e}", height=340, top=80)


# ---------------------------------------------------------------- layers beyond attention
def layers_figure(result) -> go.Figure:
    """Each layer's output against the document alone, per token, broken and fixed (:mod:`.mixers`)."""
    return layer_diff_figure(result.layer_kinds, result.broken_layer_diffs, result.fixed_layer_diffs,
                             document_ids=result.document_ids, tolerance=result.tolerance,
                             names=("broken", "fixed"), title="Each layer's output against the document alone")


# ---------------------------------------------------------------- mask
def masks_figure(result) -> go.Figure:
    """The keys each query reads, broken and fixed: red cells read another document."""
    doc = np.asarray(result.document_ids, dtype=np.int64)
    idx = np.arange(len(doc))
    starts = np.r_[0, _boundaries(doc)]
    position = idx - starts[np.searchsorted(starts, idx, side="right") - 1]   # index within its document
    return mask_figure({"broken": result.broken_mask, "fixed": result.fixed_mask}, doc, position,
                       title="Which keys each query reads")


# ---------------------------------------------------------------- token tracks
def _differs_overlay(fig: go.Figure, x, track: str) -> None:
    """Circles in the alert colour over the cells of ``track`` that differ from the fix."""
    x = np.asarray(x)
    fig.add_trace(go.Scatter(
        x=x, y=[track] * len(x), mode="markers", name=DIFFERS, showlegend=True,
        marker=dict(symbol="circle-open", size=16, color=ALERT_COLOUR, line=dict(width=2)),
        hovertemplate="token %{x}: differs from the fix<extra></extra>"))


ZOOM_TOKENS = 24   # a wider row opens zoomed on its first difference (drag to pan), so each cell's text reads


def _window(differs: np.ndarray, n: int) -> tuple[int, int] | None:
    """The ``ZOOM_TOKENS`` tokens a row of more opens on: around its first difference (None: the whole row)."""
    at = np.flatnonzero(differs)
    if n <= ZOOM_TOKENS or not len(at):
        return None
    hi = min(n, max(int(at[0]) - ZOOM_TOKENS // 3, 0) + ZOOM_TOKENS)
    return hi - ZOOM_TOKENS, hi


def _zoomed_title(title: str, window, n: int) -> str:
    return title if window is None else f"{title}<br>tokens {window[0]} to {window[1] - 1} of {n} (drag to pan)"


def _zoom(fig: go.Figure, window) -> None:
    if window is not None:
        fig.update_xaxes(range=[window[0] - 0.5, window[1] - 0.5])
        fig.data[0].textfont.size = 10


def _show_pad_values(fig: go.Figure, tracks: list[Track]) -> None:
    """Values on pad cells too, for tracks where a pad's value is the point (its position, its sequence)."""
    heat = fig.data[0]
    if heat.text is None:
        return
    text = [list(row) for row in heat.text]
    for i, t in enumerate(tracks):
        if t.name.startswith(("position_ids", "sequence found")):
            text[i] = list(np.asarray(t.labels, dtype=str))
    heat.text = text


def _token_track(result, n: int) -> Track:
    doc = np.asarray(result.document_ids, dtype=np.int64)
    return Track("input token", colour_codes(doc), np.where(doc >= 0, _labels(result, n), "pad"))


def targets_figure(result) -> go.Figure:
    """The token trained at each position (``–``: none), broken and fixed; red where it crosses an edge."""
    doc = np.asarray(result.document_ids, dtype=np.int64)
    broken, fixed = np.asarray(result.broken_targets), np.asarray(result.fixed_targets)
    n = len(doc)
    labels = _labels(result, n)
    ids = None if result.input_ids is None else np.asarray(result.input_ids)
    next_doc = np.r_[doc[1:], -2]

    def track(name, tgt):
        has = tgt != IGNORE_INDEX
        is_next = np.zeros(n, bool) if ids is None else np.r_[tgt[:-1] == ids[1:], False]
        text = np.where(has, np.where(is_next, np.append(labels[1:], ""), tgt.astype(str)), "–")
        crosses = has & is_next & (next_doc != doc)
        codes = np.where(crosses, LEAK, np.where(has, colour_codes(doc), EMPTY))
        return Track(name, codes, text)

    window = _window(broken != fixed, n)
    fig = tracks_figure([_token_track(result, n), track("target (broken)", broken), track("target (fixed)", fixed)],
                        title=_zoomed_title(f"Targets: {int((broken != fixed).sum())} differ from the fix", window, n))
    _differs_overlay(fig, np.flatnonzero(broken != fixed), "target (broken)")
    _zoom(fig, window)
    return fig


def positions_figure(result) -> go.Figure:
    """Position ids broken and fixed (``none``: a token given no position), and the sequences found in them."""
    doc = np.asarray(result.document_ids, dtype=np.int64)
    n = len(doc)
    fixed = np.asarray(result.fixed_position_ids)
    given = np.asarray(result.broken_position_ids)
    has = np.arange(n) < len(given)
    broken = np.r_[given, np.zeros(n - len(given), dtype=given.dtype)]
    tracks = [_token_track(result, n),
              Track("position_ids (broken)", np.where(has, colour_codes(doc), EMPTY),
                    np.where(has, broken.astype(str), "none")),
              Track("position_ids (fixed)", colour_codes(doc), fixed.astype(str))]
    if result.broken_segments is not None:
        for name, seg in (("sequence found (broken)", result.broken_segments),
                          ("sequence found (fixed)", result.fixed_segments)):
            seg = np.asarray(seg)
            tracks.append(Track(name, colour_codes(seg), seg.astype(str)))
    differs = ~has | (broken != fixed)
    title = f"Position ids: {int(differs.sum())} of {n} differ from the fix"
    if result.broken_segments is not None:
        title += (f"; {int(np.max(result.broken_segments)) + 1} sequences found "
                  f"(fixed {int(np.max(result.fixed_segments)) + 1})")
    window = _window(differs, n)
    fig = tracks_figure(tracks, title=_zoomed_title(title, window, n))
    _show_pad_values(fig, tracks)
    _differs_overlay(fig, np.flatnonzero(differs), "position_ids (broken)")
    if result.broken_segments is not None:
        seg_differs = np.asarray(result.broken_segments) != np.asarray(result.fixed_segments)
        _differs_overlay(fig, np.flatnonzero(seg_differs), "sequence found (broken)")
        fig.data[-1].showlegend = False
    _zoom(fig, window)
    return fig


# ---------------------------------------------------------------- weights
def weights_figure(result) -> go.Figure:
    """Each document's share of the gradient under the broken rule and the fixed one."""
    fig = go.Figure()
    for name, w, colour in (("broken", result.broken_weights, broken_colour(result)),
                            ("fixed", result.fixed_weights, FIXED_COLOUR)):
        w = np.asarray(w, dtype=np.float64)
        fig.add_trace(go.Bar(x=list(result.weight_labels), y=w, name=name, marker_color=colour,
                             text=[f"{v:.3f}" for v in w], textposition="outside",
                             hovertemplate=f"{name}: %{{x}}<br>weight %{{y:.3f}}<extra></extra>"))
    top = max(float(np.max(result.broken_weights)), float(np.max(result.fixed_weights)), 1e-9)
    fig.update_yaxes(title="share of the gradient", range=[0, 1.2 * top], gridcolor="#eee")
    return apply_layout(fig, title="How much each document counts", height=320, barmode="group")


# ---------------------------------------------------------------- a varlen launch
def launch_figure(result) -> go.Figure:
    """Each document's length, beside max_seqlen broken and as built, and the queries flash-attn's blocks cover."""
    doc = np.asarray(result.document_ids)
    ids = np.unique(doc[doc >= 0])
    lengths = [int((doc == d).sum()) for d in ids]
    fig = go.Figure(go.Bar(x=lengths, y=[f"doc {d}" for d in ids], orientation="h", name="document length",
                           marker_color=[doc_colour(d) for d in ids], text=lengths, textposition="outside",
                           hovertemplate="%{y}: %{x} tokens<extra></extra>"))
    for name, launch, colour in (("broken", result.broken_launch, ALERT_COLOUR),
                                 ("as built", result.fixed_launch, FIXED_COLOUR)):
        fig.add_trace(go.Scatter(x=[int(launch[0])] * 2, y=[-0.5, len(ids) - 0.5], mode="lines", name=f"max_seqlen, "
                                 f"{name} ({int(launch[0])})", line=dict(color=colour, width=3, dash="dash")))
    covered = int(result.broken_launch[1])
    top = max(max(lengths), int(result.fixed_launch[0])) * 1.3
    if covered <= top:
        fig.add_trace(go.Scatter(x=[covered] * 2, y=[-0.5, len(ids) - 0.5], mode="lines", line=dict(
            color=REFERENCE_COLOUR, width=2, dash="dot"), name=f"queries its blocks cover ({covered})"))
    fig.update_xaxes(title="tokens", range=[0, top], gridcolor="#eee")
    return apply_layout(fig, title="Each document against max_seqlen", height=260)
