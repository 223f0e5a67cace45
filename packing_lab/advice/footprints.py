"""What each kernel computes over a batch, counted and drawn: the Benchmark's tile figure.

The cells come from :mod:`packing_core.analysis.costs` (full squares, its one convention), so the
picture and the bounds the Benchmark judges a kernel by are the same numbers. The padded panel
draws each row's upper triangle as computed, then masked: what torch's CPU kernel does at 512 tokens
and below; a GPU causal kernel skips it (see ``costs.CONVENTION_NOTE``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core.analysis.costs import attention_cells
from packing_core.attention.tiles import BOUND_LABELS, DEFAULT_TILE, tile_spans
from packing_core.packing.plan import cu_seqlens_from_lengths
from packing_core.packing.strategies import make_plan

SKIPPED, WASTED, NEEDED = 0, 1, 2   # codes of a footprint's grid


@dataclass(frozen=True, eq=False)
class KernelFootprint:
    """Which query-key cells one kernel computes over a batch, counted and drawn.

    ``cells`` is the kernel's bound (what :func:`benchmark_bounds` and the benchmark use);
    ``grid`` is the picture: one entry per ``stride x stride`` block of token pairs,
    sampled at its centre, :data:`SKIPPED` (never computed), :data:`WASTED` (computed,
    masked) or :data:`NEEDED` (computed and allowed by the block-diagonal causal mask).
    """

    kernel: str        # "padded SDPA", "segments", "flex, 128-token tiles", "dense mask"
    bound: str         # what ``cells`` counts (BOUND_LABELS)
    cells: int
    ratio: float       # padded SDPA's cells / these
    tokens: int        # tokens along each axis of this kernel's layout (pads included)
    stride: int
    grid: np.ndarray   # int8 [tokens // stride, tokens // stride]

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "bound": self.bound, "cells": self.cells,
                "ratio": self.ratio, "tokens": self.tokens, "stride": self.stride}


def _stride(tokens: int, max_side: int) -> int:
    """The smallest power of two that keeps a side within ``max_side`` (it divides every tile >= it)."""
    s = 1
    while -(-tokens // s) > max_side:
        s *= 2
    return s


def _grid(tokens: int, stride: int, computed, needed) -> np.ndarray:
    centre = np.arange(0, tokens, stride) + stride // 2
    centre = np.minimum(centre, tokens - 1)
    i, j = centre[:, None], centre[None, :]
    c, n = computed(i, j), needed(i, j)
    return np.where(c & n, NEEDED, np.where(c, WASTED, SKIPPED)).astype(np.int8)


def kernel_footprints(lengths, context: int, tiles=(DEFAULT_TILE, 64), *, strategy: str = "bfd",
                      max_side: int = 256) -> list[KernelFootprint]:
    """What padded SDPA, ``segments``, ``flex`` at each tile size and a dense mask compute.

    Padded SDPA puts each document in its own row of ``context`` (the ``pad`` plan) and
    computes every row's square; the others run the ``strategy`` plan's pieces end to end.
    Four tickets at context 256 in 128-token tiles: flex computes 7 tiles, 114,688 cells,
    where the documents' squares hold 64,696:

    >>> fp = kernel_footprints([114, 60, 200, 90], 256, tiles=(128,))
    >>> [(f.kernel, f.cells, round(f.ratio, 2)) for f in fp]  # doctest: +NORMALIZE_WHITESPACE
    [('padded SDPA', 262144, 1.0), ('segments', 64696, 4.05),
     ('flex, 128-token tiles', 114688, 2.29), ('dense mask', 196608, 1.33)]
    """
    pad = make_plan(lengths, context, "pad")
    packed = make_plan(lengths, context, strategy)
    padded_cells = attention_cells(pad, "padded")
    pieces = packed.piece_len
    cu = cu_seqlens_from_lengths(pieces, np.int64)
    total = int(cu[-1])
    doc = np.repeat(np.arange(len(pieces)), pieces)
    row = np.repeat(packed.piece_row, pieces)

    def causal_same(ids):
        return lambda i, j: (ids[i] == ids[j]) & (j <= i)

    out = []
    # padded: document d fills tokens [d * context, d * context + len) of its own row
    n_docs = pad.n_rows
    pad_len = np.bincount(pad.piece_row, weights=pad.piece_len, minlength=n_docs).astype(np.int64)
    pos = np.arange(n_docs * context)
    pad_row, pad_real = pos // context, (pos % context) < pad_len[pos // context]
    s = _stride(len(pos), max_side)
    grid = _grid(len(pos), s, lambda i, j: pad_row[i] == pad_row[j],
                 lambda i, j: (pad_row[i] == pad_row[j]) & (j <= i) & pad_real[i] & pad_real[j])
    out.append(KernelFootprint("padded SDPA", BOUND_LABELS["padded"], padded_cells, 1.0,
                               len(pos), s, grid))
    s = _stride(total, max_side)
    needed = causal_same(doc)
    seg_cells = attention_cells(packed, "segments")
    out.append(KernelFootprint("segments", BOUND_LABELS["segments"], seg_cells, padded_cells / seg_cells,
                               total, s, _grid(total, s, lambda i, j: doc[i] == doc[j], needed)))
    for tile in tiles:
        spans = tile_spans(cu, tile)     # = attention_cells(packed, "flex", tile=tile), and the picture's tiles
        touched = spans.dense() > 0
        out.append(KernelFootprint(f"flex, {tile}-token tiles", BOUND_LABELS["flex"].replace("tile²", f"{tile}²"),
                                   spans.cells, padded_cells / spans.cells, total, s,
                                   _grid(total, s, lambda i, j, t=tile, m=touched: m[i // t, j // t], needed)))
    dense_cells = attention_cells(packed, "dense")
    out.append(KernelFootprint("dense mask", BOUND_LABELS["dense"], dense_cells, padded_cells / dense_cells,
                               total, s, _grid(total, s, lambda i, j: row[i] == row[j], needed)))
    return out
