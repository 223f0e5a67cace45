"""What a plan costs, for one kernel, under one named convention: the lab's one cost model.

Every cost the lab shows reads this module: the ``report`` and ``balance`` commands and their
JSON, the strategy tables of every page, the Benchmark's bounds and its tile figure. Three bills,
in FLOP-proportional units, for the worked example at context 512 (eight documents, padded one
per row or cut into two full rows):

>>> from packing_core.packing.strategies import make_plan
>>> lengths = [120, 90, 300, 40, 55, 30, 210, 65]
>>> pad, cut = (make_plan(lengths, 512, s).metrics() for s in ("pad", "concat-cut"))
>>> pad.slots, cut.slots, pad.slots / cut.slots          # slots: what the linear layers pay
(4096, 1024, 4.0)
>>> padded = attention_cells(pad)                       # a padded causal kernel: 8 x 512**2
>>> attention_cells(cut), round(padded / attention_cells(cut), 1)   # an unpadding varlen kernel: Σ len²
(166198, 12.6)
>>> attention_cells(cut, "dense"), round(padded / attention_cells(cut, "dense"), 1)   # 2 x 512**2
(524288, 4.0)

**One convention: full squares** (:data:`CONVENTION`). A causal kernel is charged the whole square
of what it attends over, as the standard ``6 N + 12 n_layer d_model T`` estimate of training FLOPs
counts attention and as torch's CPU kernel computes rows up to 512 tokens. A GPU causal kernel
(flash, memory-efficient SDPA, a varlen kernel with its causal flag) skips the upper half of each
square: ``"causal halves"`` counts ``n (n + 1) / 2`` per square for those kernels. The Σ len² ratio
hardly moves between the two; the dense-mask and FlexAttention ratios halve, because a
materialised mask never skips and FlexAttention's tiles are causal under either count:

>>> round(attention_cells(pad, convention=HALVES) / attention_cells(cut, "dense", convention=HALVES), 1)
2.0

End to end, training FLOPs (forward and backward) are ``6 N`` per token through the linear layers
(N parameters) plus ``12 n_layer d_model`` per attention cell: ``6 N x slots + 12 n_layer d_model x
cells``, with the cells counted as above.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from packing_core._validate import InputError, choice, whole_number
from packing_core.analysis.shapes import ModelShape, model_shape  # the presets: data in their own module
from packing_core.attention.tiles import BOUND_LABELS, DEFAULT_TILE, TileSpans, tile_spans
from packing_core.packing.plan import Plan, PlanMetrics, cu_seqlens_from_lengths
from packing_core.packing.registry import PACKING_STRATEGIES

FULL, HALVES = "full squares", "causal halves"
CONVENTIONS = (FULL, HALVES)
CONVENTION = FULL   # the lab's one convention: every figure and ratio it shows is counted this way
CONVENTION_NOTE = (
    "Σ len², padded rows and a dense mask are counted in full squares: a causal kernel is charged the whole "
    "square of each row or document, as torch's CPU kernel computes rows up to 512 tokens and as the standard "
    "6N + 12·n_layer·d_model·T estimate counts. FlexAttention is counted by the tiles it really computes, on or "
    "below the diagonal, on any device. A GPU causal kernel skips the upper half of each square on both sides, "
    "so the Σ len² ratio stays about the same, while the dense-mask and FlexAttention ratios halve.")
COST_FORMULA = ("FLOPs = 6·N·slots + 12·n_layer·d_model·A,  A = attention cells in full squares: Σ len² (an "
                "unpadding varlen kernel), rows x width² (a padded causal kernel or a dense mask)")


@dataclass(frozen=True)
class AttentionKernel:
    """One kind of attention kernel: what it computes, over which layout, and whether it skips the upper half."""

    name: str
    title: str             # what the lab calls it on screen
    computes: str          # one sentence: the cells it computes
    layout: str            # "padded": runs on rows padded to their width; "packed": on the plan's pieces end to end
    skips_upper_half: str  # "yes", "no", or when it does
    bound: str             # the cells formula (BOUND_LABELS)

    def to_dict(self) -> dict:
        return asdict(self)


ATTENTION_KERNELS = {k.name: k for k in (
    AttentionKernel("padded", "a padded causal kernel (SDPA with is_causal over padded rows)",
           "every row's whole square, pads included: rows x width²", "padded",
           "on a GPU (flash, memory-efficient) and on torch's CPU kernel beyond about 512 tokens; not on torch's "
           "CPU kernel at 512 and below", BOUND_LABELS["padded"]),
    AttentionKernel("unpadded", "an unpadding varlen kernel over a padded batch (FlashAttention given an attention_mask)",
           "drops the pads and computes one square per sample: Σ len² of the samples", "padded",
           "yes (transformers passes causal=True)", BOUND_LABELS["segments"]),
    AttentionKernel("varlen", "an unpadding varlen kernel fed cu_seqlens (flash_attn_varlen_func, torch's varlen_attn)",
           "one square per document piece, no pads, no mask matrix: Σ len²", "packed",
           "yes, when asked for causality (causal=True, window_size=(-1, 0)); both default to full attention",
           BOUND_LABELS["varlen"]),
    AttentionKernel("segments", "one SDPA call per document (the lab's segments backend)",
           "one square per document piece: Σ len²", "packed", "as SDPA does: on a GPU, not on torch's CPU kernel "
           "at 512 tokens and below", BOUND_LABELS["segments"]),
    AttentionKernel("flex", "FlexAttention at a tile size", "every tile on or below the diagonal that the "
           "block-diagonal causal mask touches, whole: causal tiles touched x tile²", "packed",
           "yes, by whole tiles, on every device", BOUND_LABELS["flex"]),
    AttentionKernel("dense", "a materialised block-diagonal mask (SDPA with a boolean mask over the packed rows)",
           "every cell of each row's square, masked or not: rows x width²", "packed", "no: the mask is only a "
           "matrix to it", BOUND_LABELS["dense"]),
    # transformers' create_causal_mask (masking_utils.py) over TRL's padding-free batch (sft_trainer.py,
    # DataCollatorForLanguageModeling.torch_call: input_ids = [torch.cat(input_ids)]): see padding_free_cells
    AttentionKernel("padding-free-sdpa", "sdpa or eager over a padding-free batch (TRL's padding_free=True, "
           "DataCollatorWithFlattening): the per-device batch flattened into one row",
           "every cell of one (1, 1, T, T) mask, T the per-device batch's tokens: Σ over batches of T²", "packed",
           "no: the mask is only a matrix to it", "(batch tokens)²"),
)}
# Whose cells halve under the causal-halves count (a flex tile count is causal already; a dense mask never skips).
_HALVE = ("padded", "unpadded", "varlen", "segments")


def own_kernel(strategy: str) -> str:
    """The kernel a strategy's plan is costed with in the tables: packing -> varlen, padding -> padded.

    >>> own_kernel("bfd"), own_kernel("pad-longest")
    ('varlen', 'padded')
    """
    return "varlen" if strategy in PACKING_STRATEGIES else "padded"


def _kernel_name(kernel: str, strategy: str) -> str:
    aliases = {"own": own_kernel(strategy), "skips-masked": own_kernel(strategy), "dense-mask": "dense"}
    name = aliases.get(kernel, kernel)
    if name not in ATTENTION_KERNELS:
        raise InputError(f"kernel must be one of {', '.join(ATTENTION_KERNELS)} (or 'own'), got {kernel!r}")
    return name


def attention_cells(plan: Plan | PlanMetrics, kernel: str = "own", *, convention: str = CONVENTION,
                    tile: int = DEFAULT_TILE, batch_rows: int = 1) -> int:
    """Query-key cells one kernel computes over a plan, counted under ``convention``.

    ``kernel`` is a :data:`ATTENTION_KERNELS` name, or ``"own"``: the plan's own (:func:`own_kernel`). ``flex``
    and ``padding-free-sdpa`` need the :class:`Plan` (its pieces, its rows), the others read the plan's metrics;
    ``batch_rows`` is the per-device batch in rows that ``padding-free-sdpa`` flattens into one row.

    >>> from packing_core.packing.strategies import make_plan
    >>> m = make_plan([300, 100], 512, "bfd").metrics()
    >>> attention_cells(m), attention_cells(m, "dense"), attention_cells(m, convention=HALVES)
    (100000, 262144, 50200)
    """
    choice("convention", convention, CONVENTIONS)
    m = plan.metrics() if isinstance(plan, Plan) else plan
    name = _kernel_name(kernel, m.strategy)
    if name in ("flex", "padding-free-sdpa"):
        if not isinstance(plan, Plan):
            raise InputError(f"{name}'s cells need the plan's pieces: pass the Plan, not its metrics")
        return tiled_cells(plan, tile) if name == "flex" else padding_free_cells(plan, batch_rows)
    if name == "dense" or (name == "padded"):
        squares, tokens = m.attention_cost_padded, m.slots
    else:
        squares, tokens = m.attention_cost_packed, m.real_tokens
    return squares if convention == FULL or name not in _HALVE else (squares + tokens) // 2


def padding_free_cells(plan: Plan, batch_rows: int) -> int:
    """Cells sdpa (or eager) computes when each ``batch_rows`` rows of ``plan`` arrive padding-free, in one row.

    TRL's ``DataCollatorForLanguageModeling(padding_free=True)`` concatenates the per-device batch into one row
    (``trl/trainer/sft_trainer.py``, ``torch_call``: ``input_ids = [torch.cat(input_ids, dim=0)]``), as
    ``DataCollatorWithFlattening`` does. transformers' ``create_causal_mask`` (``masking_utils.py``) finds the
    documents from the restarting ``position_ids`` and, for sdpa, materialises one ``(1, 1, T, T)`` boolean
    mask (packed detection sets ``allow_is_causal_skip = False``); SDPA with a mask computes every cell. TRL
    documents ``padding_free`` as supported only with FlashAttention 2 or 3 (``trl/trainer/sft_config.py``),
    whose varlen kernel reads ``cu_seq_lens`` and computes Σ len². Eight bfd rows of 512, four documents of
    128 each: padded as ``[8, 512]`` rows they cost 8 x 512², padding-free on sdpa 4,096²:

    >>> from packing_core.packing.strategies import make_plan
    >>> rows = make_plan([128] * 32, 512, "bfd")
    >>> attention_cells(rows, "dense"), padding_free_cells(rows, 8), attention_cells(rows, "varlen")
    (2097152, 16777216, 524288)
    """
    batch_rows = whole_number(batch_rows, "batch_rows", hint="the per-device batch in rows, e.g. 8")
    tokens = np.bincount(plan.placed.row, weights=plan.placed.length, minlength=plan.n_rows)
    per_batch = np.add.reduceat(tokens, np.arange(0, plan.n_rows, batch_rows)) if plan.n_rows else tokens
    return int((per_batch.astype(np.int64) ** 2).sum())


def plan_tiles(plan: Plan, tile: int = DEFAULT_TILE) -> TileSpans:
    """The tiles a tiled kernel computes over a plan's pieces, laid end to end row by row.

    That is the sequence the ``flex`` backend sees: ``cu_seqlens`` over the whole
    flattened batch, no pads. Tiles may straddle a row edge, as they do in the kernel.
    """
    return tile_spans(cu_seqlens_from_lengths(plan.piece_len), tile)


def tiled_cells(plan: Plan, tile: int = DEFAULT_TILE) -> int:
    """Cells a tiled kernel computes over a plan: causal tiles touched (on or below the diagonal) x tile².

    The worked example, cut into two rows at 512 (910 tokens end to end): Σ piece² is
    166,198; at 128-token tiles the documents touch 16 of the 8 x 8 tiles:

    >>> from packing_core.packing.strategies import make_plan
    >>> cut = make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut")
    >>> plan_tiles(cut, 128).touched, tiled_cells(cut, 128), tiled_cells(cut, 64), tiled_cells(cut, 32)
    (16, 262144, 167936, 122880)

    Σ len² counts each document's whole square; a tiled kernel also skips the tiles above
    the diagonal, so with small tiles its count falls below Σ len² (towards half of it).
    A padded plan runs with a padding mask: each sample starts its own row at 0, so a sample of
    ``n`` tokens touches the k(k + 1)/2 causal tiles of its ``k = ⌈n / tile⌉`` tiles:

    >>> tiled_cells(make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "pad"), 128) // 128**2
    15
    """
    if plan.packed:
        return plan_tiles(plan, tile).cells
    k = -(-plan.piece_len.astype(np.int64) // tile)
    return int((k * (k + 1) // 2).sum()) * tile * tile


@dataclass(frozen=True)
class MaskMemory:
    """What one kernel builds for one forward call over a micro-batch (shared by every layer), and its cells."""

    kernel: str       # an ATTENTION_KERNELS name, or "eager" / "padding-free-eager" (the additive float masks)
    holds: str        # what it materialises, in words
    shape: tuple[int, ...]
    entries: int
    bytes: int
    cells: int        # the attention cells it computes over the micro-batch, full squares

    def to_dict(self) -> dict:
        return asdict(self)


def mask_memory(plan: Plan, rows=None, *, tile: int = DEFAULT_TILE, float_bytes: int = 2) -> tuple[MaskMemory, ...]:
    """What each kernel materialises for one micro-batch: ``rows`` of ``plan`` (default all), ``B`` rows of ``L``.

    A varlen kernel reads ``cu_seqlens`` (one int32 per piece, plus one). transformers' flex_attention builds a
    ``BlockMask`` over ``[B, 1, L, L]`` in tiles: eight int32 tensors, ``(kv|q)_num_blocks`` of ``(B, 1, L/tile)``
    and ``(kv|q)_indices`` of ``(B, 1, L/tile, L/tile)``, each plain and ``full_`` (``torch/nn/attention/
    flex_attention.py``, ``BlockMask``). ``create_causal_mask`` (transformers ``masking_utils.py``) gives sdpa a
    ``(B, 1, L, L)`` boolean mask (``sdpa_mask``) and eager an additive one of the model's float dtype
    (``eager_mask``: 0 or the dtype's minimum), and the padding-free format one ``(1, 1, T, T)`` for the whole
    batch's ``T`` tokens. Each is built once per forward call and read by every layer. At ``L = 8,192`` one
    row's boolean mask holds 64 M entries before any arithmetic:

    >>> from packing_core.packing.strategies import make_plan
    >>> m = {x.kernel: x for x in mask_memory(make_plan([2048] * 16, 8192, "bfd"))}   # 4 rows of 8,192
    >>> m["varlen"].bytes, m["flex"].bytes, m["dense"].entries // 4, m["eager"].bytes // m["dense"].bytes
    (68, 266240, 67108864, 2)
    >>> m["padding-free-sdpa"].shape, m["padding-free-sdpa"].cells // m["dense"].cells
    ((1, 1, 32768, 32768), 4)
    """
    float_bytes = whole_number(float_bytes, "float_bytes", hint="2 for bf16 or fp16, 4 for float32")
    chosen = np.arange(plan.n_rows) if rows is None else np.asarray(rows, dtype=np.int64).ravel()
    if len(chosen) == 0 or chosen.min() < 0 or chosen.max() >= plan.n_rows:
        raise InputError(f"rows must pick rows of the plan (0..{plan.n_rows - 1}), got {chosen.tolist()[:8]}")
    pieces = np.concatenate([plan.piece_len[plan.row_pieces(int(r))] for r in chosen]).astype(np.int64)
    n, width = len(chosen), int(plan.context)
    tokens, blocks = int(pieces.sum()), -(-width // whole_number(tile, "tile"))
    docs = len(pieces) + 1
    dense, flat = n * width * width, tokens * tokens
    flex = 4 * n * (blocks + blocks * blocks)            # kv and q, each plain and full: 4 x (count + indices)
    return (
        MaskMemory("varlen", f"cu_seqlens: {docs:,} int32", (docs,), docs, 4 * docs, int((pieces ** 2).sum())),
        MaskMemory("flex", f"a BlockMask of {tile}-token tiles: int32 counts and indices", (n, 1, blocks, blocks),
                   flex, 4 * flex, tile_spans(cu_seqlens_from_lengths(pieces), tile).cells),
        MaskMemory("dense", "sdpa: a boolean mask per row", (n, 1, width, width), dense, dense, dense),
        MaskMemory("eager", f"eager: an additive float mask per row ({float_bytes} bytes)", (n, 1, width, width),
                   dense, float_bytes * dense, dense),
        MaskMemory("padding-free-sdpa", "sdpa, padding-free: one boolean mask for the whole batch",
                   (1, 1, tokens, tokens), flat, flat, flat),
        MaskMemory("padding-free-eager", f"eager, padding-free: one float mask ({float_bytes} bytes)",
                   (1, 1, tokens, tokens), flat, float_bytes * flat, flat),
    )


@dataclass(frozen=True)
class KernelCost:
    """One kernel over one plan: its cells and their ratio against padding to the context, in one convention."""

    strategy: str
    kernel: str
    convention: str
    cells: int
    ratio: float          # the padded causal kernel over padding to the context / these cells
    tile: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def kernel_costs(plan: Plan, pad: Plan, kernels=("own", "dense"), *, convention: str = CONVENTION,
                 tile: int = DEFAULT_TILE) -> list[KernelCost]:
    """Each kernel's cells over ``plan`` and its ratio against ``pad`` (padding to the context, padded kernel).

    >>> from packing_core.packing.strategies import make_plan
    >>> lengths = [120, 90, 300, 40, 55, 30, 210, 65]
    >>> pad, bfd = make_plan(lengths, 512, "pad"), make_plan(lengths, 512, "bfd")
    >>> [(c.kernel, c.cells, round(c.ratio, 1)) for c in kernel_costs(bfd, pad, ("varlen", "flex", "dense"))]
    [('varlen', 166350, 12.6), ('flex', 262144, 8.0), ('dense', 524288, 4.0)]
    """
    base = attention_cells(pad, "padded", convention=convention)
    out = []
    for k in kernels:
        name = _kernel_name(k, plan.strategy)
        cells = attention_cells(plan, name, convention=convention, tile=tile)
        out.append(KernelCost(plan.strategy, name, convention, cells, base / cells if cells else float("inf"),
                              tile if name == "flex" else None))
    return out


def training_flops(slots, cells, shape: ModelShape | str):
    """Forward plus backward FLOPs of one pass: ``6 N slots + 12 n_layer d_model cells`` (numbers or arrays).

    A 7B shape, one row of 512 tokens each attending to the full row: attention is 2 % of it.

    >>> shape = model_shape("7B")
    >>> total = training_flops(512, 512**2, shape)
    >>> f"{total:.3g}", round(1 - training_flops(512, 0, shape) / total, 4)
    ('2.11e+13', 0.0195)
    """
    shape = model_shape(shape)
    return 6.0 * shape.params * slots + 12.0 * shape.n_layer * shape.d_model * cells


def attention_share(slots, cells, shape: ModelShape | str) -> float:
    """The attention part of :func:`training_flops`: how much attention weighs in a step.

    >>> round(attention_share(512, 512**2, "7B"), 4)
    0.0195
    """
    total = float(training_flops(slots, cells, shape))
    return float(training_flops(0, cells, shape)) / total if total else 0.0


@dataclass(frozen=True)
class EndToEnd:
    """One strategy's training FLOPs for one model shape, against padding every sample to the context."""

    strategy: str
    model: str
    flops: float              # with the plan's own kernel (full squares)
    flops_dense_mask: float   # with a materialised block-diagonal mask
    attention_share: float    # attention part of ``flops``
    ratio: float              # pad's FLOPs / ``flops``: the end-to-end saving
    ratio_dense_mask: float   # pad's FLOPs / ``flops_dense_mask``
    convention: str = CONVENTION

    def to_dict(self) -> dict:
        return asdict(self)


def end_to_end(rows, shape: ModelShape | str = "SmolLM2-135M") -> list[EndToEnd]:
    """Training FLOPs per strategy of a ``strategy_table`` (which always holds what ``pad`` costs).

    On 7B-sized layers attention is a few percent of the FLOPs at 512 tokens, so the end-to-end
    saving of packing is close to its slot ratio, not to its attention ratio.
    """
    shape = model_shape(shape)
    out = []
    for r in rows:
        base_slots = r.slots * r.slot_ratio
        base_cells = r.attention_cost * r.attention_ratio
        base = training_flops(base_slots, base_cells, shape)
        flops = training_flops(r.slots, r.attention_cost, shape)
        dense = training_flops(r.slots, r.dense_mask_cost, shape)
        out.append(EndToEnd(r.strategy, shape.name, flops, dense, attention_share(r.slots, r.attention_cost, shape),
                            base / flops if flops else float("inf"), base / dense if dense else float("inf")))
    return out


def benchmark_bounds(result) -> dict[str, float]:
    """Each packed backend's FLOP bound in a ``run_benchmark`` result, against the padded run (full squares).

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


def halved_bound(bound: float, kernel: str) -> float:
    """A full-squares bound read for a GPU, whose padded causal kernel skips the upper half.

    The padded baseline's cells halve. ``dense`` and ``flex`` compute the same cells under either
    count, so their bounds halve; ``segments`` and ``varlen`` halve on both sides and keep theirs.

    >>> halved_bound(4.0, "dense"), halved_bound(12.6, "varlen")
    (2.0, 12.6)
    """
    return bound / 2 if kernel in ("dense", "flex") else bound
