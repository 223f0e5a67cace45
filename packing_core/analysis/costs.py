"""What a plan costs, each quantity named for what it is.

Three different bills, in FLOP-proportional units, for the worked example at context 512
(eight documents, padded one per row or cut into two full rows):

>>> from packing_core.packing.strategies import make_plan
>>> lengths = [120, 90, 300, 40, 55, 30, 210, 65]
>>> pad, cut = (make_plan(lengths, 512, s).metrics() for s in ("pad", "concat-cut"))
>>> pad.slots, cut.slots, pad.slots / cut.slots          # slots: what the linear layers pay
(4096, 1024, 4.0)
>>> padded = pad.attention_cost_padded                   # 8 x 512**2
>>> cut.attention_cost_packed, round(padded / cut.attention_cost_packed, 1)   # sum(piece**2)
(166198, 12.6)
>>> cut.attention_cost_padded, round(padded / cut.attention_cost_padded, 1)   # dense mask: 2 x 512**2
(524288, 4.0)

A kernel that reads ``cu_seqlens`` exactly (varlen, one call per document) pays one
square per document. A tiled kernel that skips only whole empty tiles (FlexAttention)
pays every tile a document touches (:func:`tiled_cells`), more than its square when
documents are short against the tile. A materialised block-diagonal mask still computes
every cell of the row's square, masked or not, so it pays ``rows x width**2`` like a
padded batch.

End to end, the standard per-token estimate of training FLOPs (forward and backward) is
``6 N + 12 n_layer d_model T``: the linear layers (N parameters) plus the attention scores
over the T tokens a token attends to. Summed over a plan's slots that is
``6 N x slots + 12 n_layer d_model x (attention cells)``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from packing_core._validate import InputError
from packing_core.analysis.shapes import MODEL_SHAPES, ModelShape  # the presets: data in their own module
from packing_core.attention.tiles import BOUND_LABELS, DEFAULT_TILE, TileSpans, tile_spans
from packing_core.packing.plan import Plan, PlanMetrics, cu_seqlens_from_lengths
from packing_core.packing.registry import PACKING_STRATEGIES

COST_FORMULA = "FLOPs = 6·N·slots + 12·n_layer·d_model·A,  A = Σ len² (block-skipping kernel) or Σ width² (dense mask)"


def attention_cells(m: PlanMetrics, kernel: str = "skips-masked") -> int:
    """Query-key cells the attention scores compute for a plan, under one kind of kernel.

    ``"skips-masked"``: a padded row pays its whole square (the pads are in it), a packed row
    one square per document piece. ``"dense-mask"``: every row pays its whole square.

    >>> from packing_core.packing.strategies import make_plan
    >>> m = make_plan([300, 100], 512, "bfd").metrics()
    >>> attention_cells(m), attention_cells(m, "dense-mask")
    (100000, 262144)
    """
    if kernel == "dense-mask":
        return m.attention_cost_padded
    if kernel != "skips-masked":
        raise InputError(f"kernel must be 'skips-masked' or 'dense-mask', got {kernel!r}")
    return m.attention_cost_packed if m.strategy in PACKING_STRATEGIES else m.attention_cost_padded


def plan_tiles(plan: Plan, tile: int = DEFAULT_TILE) -> TileSpans:
    """The tiles a tiled kernel computes over a plan's pieces, laid end to end row by row.

    That is the sequence the ``flex`` backend sees: ``cu_seqlens`` over the whole
    flattened batch, no pads. Tiles may straddle a row edge, as they do in the kernel.
    """
    return tile_spans(cu_seqlens_from_lengths(plan.piece_len, np.int64), tile)


def tiled_cells(plan: Plan, tile: int = DEFAULT_TILE) -> int:
    """Cells a tiled kernel computes over a plan: tiles touched x tile².

    The worked example, cut into two rows at 512 (910 tokens end to end): Σ piece² is
    166,198; at 128-token tiles the documents touch 16 of the 8 x 8 tiles:

    >>> from packing_core.packing.strategies import make_plan
    >>> cut = make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut")
    >>> plan_tiles(cut, 128).touched, tiled_cells(cut, 128), tiled_cells(cut, 64), tiled_cells(cut, 32)
    (16, 262144, 167936, 122880)

    Σ len² counts each document's whole square; a tiled kernel also skips the tiles above
    the diagonal, so with small tiles its count falls below Σ len² (towards half of it).
    """
    return plan_tiles(plan, tile).cells


def training_flops(slots: int, cells: int, shape: ModelShape) -> float:
    """Forward plus backward FLOPs of one pass over a plan: ``6 N slots + 12 n_layer d_model cells``.

    A 7B shape, one row of 512 tokens each attending to the full row: attention is 2 % of it.

    >>> shape = MODEL_SHAPES["7B"]
    >>> total = training_flops(512, 512**2, shape)
    >>> f"{total:.3g}", round(1 - training_flops(512, 0, shape) / total, 4)
    ('2.11e+13', 0.0195)
    """
    return 6.0 * shape.params * slots + 12.0 * shape.n_layer * shape.d_model * cells


@dataclass(frozen=True)
class EndToEnd:
    """One strategy's training FLOPs for one model shape, against padding every sample to the context."""

    strategy: str
    model: str
    flops: float              # with a kernel that skips masked blocks
    flops_dense_mask: float   # with a materialised block-diagonal mask
    attention_share: float    # attention part of ``flops``
    ratio: float              # pad's FLOPs / ``flops``: the end-to-end saving
    ratio_dense_mask: float   # pad's FLOPs / ``flops_dense_mask``

    def to_dict(self) -> dict:
        return asdict(self)


def end_to_end(rows, shape: ModelShape | str = "SmolLM2-135M") -> list[EndToEnd]:
    """Training FLOPs per strategy of a ``strategy_table`` (which always holds what ``pad`` costs).

    On 7B-sized layers attention is a few percent of the FLOPs at 512 tokens, so the end-to-end
    saving of packing is close to its slot ratio, not to its attention ratio.
    """
    if isinstance(shape, str):
        if shape not in MODEL_SHAPES:
            raise InputError(f"unknown model shape {shape!r}; choose one of {', '.join(MODEL_SHAPES)}")
        shape = MODEL_SHAPES[shape]
    out = []
    for r in rows:
        base_slots = r.slots * r.slot_ratio
        base_cells = r.attention_cost * r.attention_ratio
        base = training_flops(base_slots, base_cells, shape)
        flops = training_flops(r.slots, r.attention_cost, shape)
        dense = training_flops(r.slots, r.dense_mask_cost, shape)
        attn = flops - 6.0 * shape.params * r.slots
        out.append(EndToEnd(r.strategy, shape.name, flops, dense, attn / flops if flops else 0.0,
                            base / flops if flops else float("inf"), base / dense if dense else float("inf")))
    return out


def benchmark_bounds(result) -> dict[str, float]:
    """Each packed backend's true FLOP bound in a ``run_benchmark`` result, against the padded run.

    ``dense`` builds the block-diagonal mask and computes every cell of each packed row, so
    its bound is ``padded rows / packed rows`` (both rows x context**2). ``segments`` and
    ``varlen`` compute one square per document: their bound is ``rows x context**2 / sum(len**2)``.
    ``flex`` computes every tile a document touches: ``rows x context**2 / (tiles x tile**2)``
    (the result's ``plans["bfd"]["tiled_cells"]``). :data:`BOUND_LABELS` names each one.

    ``result`` is a ``BenchmarkResult`` (anything with ``plans``, ``flop_ratio`` and ``backends``):

    >>> from types import SimpleNamespace
    >>> r = SimpleNamespace(flop_ratio=13.1, backends={"segments": None, "dense": None, "flex": None},
    ...                     plans=SimpleNamespace(pad=SimpleNamespace(rows=128, attention_cost=128 * 512**2),
    ...                                           bfd=SimpleNamespace(rows=27, tiled_cells=512 * 128**2)))
    >>> {k: round(v, 2) for k, v in benchmark_bounds(r).items()}
    {'segments': 13.1, 'dense': 4.74, 'flex': 4.0}
    """
    pad, bfd = result.plans.pad, result.plans.bfd
    bounds = {}
    for b in result.backends:
        if b == "dense":
            bounds[b] = pad.rows / bfd.rows
        elif b == "flex":
            bounds[b] = pad.attention_cost / bfd.tiled_cells
        else:
            bounds[b] = float(result.flop_ratio)
    return bounds


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
    from packing_core.packing.strategies import make_plan

    pad = make_plan(lengths, context, "pad")
    packed = make_plan(lengths, context, strategy)
    padded_cells = pad.metrics().attention_cost_padded
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
    seg_cells = packed.metrics().attention_cost_packed
    out.append(KernelFootprint("segments", BOUND_LABELS["segments"], seg_cells, padded_cells / seg_cells,
                               total, s, _grid(total, s, lambda i, j: doc[i] == doc[j], needed)))
    for tile in tiles:
        spans = tile_spans(cu, tile)
        touched = spans.dense() > 0
        out.append(KernelFootprint(f"flex, {tile}-token tiles", BOUND_LABELS["flex"].replace("tile²", f"{tile}²"),
                                   spans.cells, padded_cells / spans.cells, total, s,
                                   _grid(total, s, lambda i, j, t=tile, m=touched: m[i // t, j // t], needed)))
    dense_cells = packed.metrics().attention_cost_padded
    out.append(KernelFootprint("dense mask", BOUND_LABELS["dense"], dense_cells, padded_cells / dense_cells,
                               total, s, _grid(total, s, lambda i, j: row[i] == row[j], needed)))
    return out
