"""A trainer's batch, one row, with every error and warning ``check_hf_batch`` found marked in red.

Tracks: the document each token belongs to (grey: pad), its position id, its label
(``–`` for -100), and one track per finding that marks the tokens it points at.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from packing_core._validate import InputError
from packing_core.batch.packed import IGNORE_INDEX
from packing_core.check.result import BatchCheck
from packing_lab.viz.rows import Track, pickable_tracks, tracks_figure
from packing_lab.viz.style import EMPTY, LEAK, colour_codes


def hf_batch_figure(check: BatchCheck, row: int = 0, *, title: str | None = None,
                    highlight: int | None = None, pickable: bool = False) -> go.Figure:
    """Row ``row`` of a checked batch: document, position_ids, labels, and a red track per finding;
    ``highlight`` frames that document's tokens on every track."""
    rows = check.shape[0]
    if not 0 <= row < rows:
        raise InputError(f"row {row} is outside the batch's {rows} row(s): pick 0 to {rows - 1}")
    a = check.arrays
    seg = check.row_document_ids[row]
    codes = colour_codes(seg)
    ids = a["input_ids"][row]
    tracks = [Track("input_ids", codes, np.where(seg >= 0, ids.astype(str), "pad"))]
    if "position_ids" in a:
        tracks.append(Track("position_ids", codes, a["position_ids"][row].astype(str)))
    if "labels" in a:
        lab = a["labels"][row]
        counted = lab != IGNORE_INDEX
        tracks.append(Track("labels", np.where(counted, codes, EMPTY), np.where(counted, lab.astype(str), "–")))
    if "attention_mask" in a:
        tracks.append(Track("attention_mask", codes, a["attention_mask"][row].astype(str)))
    for v in check.errors + check.warnings:   # a handful of named findings
        hit = np.zeros(len(seg), dtype=bool)
        slots = [s for name, r, s in check.marks if name == v.name and r == row]
        hit[slots] = True
        tracks.append(Track(v.name, np.where(hit, LEAK, EMPTY), np.where(hit, "!", "")))
    return pickable_tracks(tracks_figure(tracks, title=title), tracks, seg, highlight, pickable)
