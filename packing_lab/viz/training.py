"""The loss curves of the mask-on and mask-off training runs. Pure plotly, no Streamlit.

One colour per run, by role (:data:`packing_lab.viz.style.ROLES`): the correct run in the
"fixed" green, the mask-off run in the red that everywhere means "something crossed a
document edge"; the legend names both. Each run draws::

    thin line     the loss of every step (noisy: one small batch per step)
    thick line    its trailing mean over ``smooth`` steps: what a training log shows
    dashed line   the held-out loss with every document alone: what inference sees
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from packing_core._validate import InputError
from packing_lab.viz.style import FIXED_COLOUR, LEAK_COLOUR, apply_layout

MASK_COLOURS = {"on": FIXED_COLOUR, "off": LEAK_COLOUR}


def trailing_mean(values, window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each step (fewer at the start).

    >>> trailing_mean([4, 2, 3, 1], 2).tolist()
    [4.0, 3.0, 2.5, 2.0]
    """
    v = np.asarray(values, dtype=np.float64)
    if window < 1:
        raise InputError(f"window must be at least 1 step, got {window}: try 10")
    c = np.concatenate([[0.0], np.cumsum(v)])
    k = np.arange(1, len(v) + 1)
    lo = np.maximum(0, k - window)
    return (c[k] - c[lo]) / (k - lo)


def loss_curves_figure(results: Sequence, *, smooth: int = 10, title: str | None = None) -> go.Figure:
    """Training loss per step of each run, plus its loss with every document alone.

    ``results`` are :class:`packing_lab.demos.train.TrainResult` (anything with ``mask``,
    ``losses`` and ``alone_loss``), one per mask. The mask-off curve ends lower while its
    dashed alone line sits higher: the training log flatters the bug. The y axis zooms onto
    the end of training, where the runs part; the first steps run off the top.
    """
    if not results:
        raise InputError("no training runs given: pass the results of train_demo('on') and train_demo('off')")
    fig = go.Figure()
    ends = []   # the values the eye must compare: final smoothed losses and alone lines
    for r in results:
        if r.mask not in MASK_COLOURS:
            raise InputError(f"mask must be 'on' or 'off', got {r.mask!r}: pass results of train_demo")
        losses = np.asarray(r.losses, dtype=np.float64)
        if len(losses) == 0:
            raise InputError(f"the mask-{r.mask} run has no steps: train for at least one step")
        colour, name = MASK_COLOURS[r.mask], f"mask {r.mask}"
        steps = np.arange(1, len(losses) + 1)
        fig.add_trace(go.Scatter(x=steps, y=losses, mode="lines", name=f"{name}: each step",
                                 legendgroup=r.mask, showlegend=False, opacity=0.3,
                                 line=dict(color=colour, width=1),
                                 hovertemplate=f"{name}, step %{{x}}: loss %{{y:.3f}}<extra></extra>"))
        smoothed = trailing_mean(losses, smooth)
        ends += [float(smoothed[-1]), float(np.min(smoothed)), float(r.alone_loss)]
        fig.add_trace(go.Scatter(x=steps, y=smoothed, mode="lines",
                                 name=f"{name}: training loss", legendgroup=r.mask,
                                 line=dict(color=colour, width=3),
                                 hovertemplate=(f"{name}, step %{{x}}: mean of the last {smooth} "
                                                "steps %{y:.3f}<extra></extra>")))
        fig.add_trace(go.Scatter(x=[steps[0], steps[-1]], y=[r.alone_loss] * 2, mode="lines",
                                 name=f"{name}: held-out, each document alone", legendgroup=r.mask,
                                 line=dict(color=colour, width=2, dash="dash"),
                                 hovertemplate=f"{name}: loss alone %{{y:.3f}}<extra></extra>"))
    fig.update_xaxes(title="training step", showgrid=False)
    # Zoom onto the end, where the runs part by a tenth of a nat; the first steps run off the top.
    floor = min(ends) - 0.15
    fig.update_yaxes(title="loss (nats per token)", gridcolor="#eee",
                     range=[max(0.0, floor), floor + 2.5 * (max(ends) + 0.15 - floor)])
    return apply_layout(fig, title=title, height=380, hovermode="x unified")
