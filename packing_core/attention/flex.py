"""The ``flex`` backend: PyTorch's FlexAttention over packed documents.

FlexAttention runs a compiled, tiled kernel (C++ on CPU, Triton on CUDA) and skips every
``tile x tile`` square of the score matrix that a *block mask* marks empty. torch's own
``create_block_mask(mask_mod, ...)`` finds those squares by evaluating the mask predicate
on all ``T x T`` token pairs (``torch/nn/attention/flex_attention.py``: ``create_mask``,
then ``_convert_mask_to_block_mask`` sums each tile), which at 29k tokens is 860 million
evaluations. Documents packed end to end need none of that: each query tile reads one
contiguous run of key tiles (:mod:`.tiles`), so :func:`block_mask_from_cu` writes the
block mask straight from ``cu_seqlens``, one entry per tile, and the same
``mask_mod`` (``same document & causal``) only runs inside the partial tiles::

    lengths [3, 9], tile 4    kv tile 0 1 2     P partial: the mask_mod runs
                   q tile 0       P . .         F full: no cell masked, no mask_mod
                   q tile 1       P P .         . skipped: never computed
                   q tile 2       P F P

>>> bm = block_mask_from_cu(torch.tensor([0, 3, 12]), tile=4)
>>> bm.kv_num_blocks.tolist(), bm.full_kv_num_blocks.tolist()
([[[1, 2, 2]]], [[[0, 0, 1]]])

Compilation: the kernel is compiled by ``torch.compile(..., dynamic=True)``, once per
*shape class*, the first time it is seen (device, dtype, heads, head size, tile; the token
count is symbolic, so new lengths reuse the kernel). That first call logs that it
compiles and how long it took (:func:`compile_records`). With automatic dynamic shapes
(torch.compile's default) torch 2.13's CPU template failed to build on the second
length it saw, so the shape stays symbolic from the start. The call is compiled whole
(``fullgraph=True``): when dynamo cannot trace it (a ``mask_mod`` that reads an index's
value is the known case, see :func:`packing_core.attention.masks._at`), torch would run
``flex_attention`` unfused instead, materialising every ``[T, T]`` score
(``torch/_higher_order_ops/flex_attention.py``: ``sdpa_dense`` -> ``math_attention``), 110 GB
for 41,000 tokens of 16 heads; compiled whole, it raises. Without a C++ compiler
(CPU) or Triton (CUDA) the backend is unavailable: :func:`flex_unavailable` says why in
one line, and every other backend still works.
"""
from __future__ import annotations

import importlib.util
import logging
import shutil
import threading
import time
import types
from dataclasses import asdict, dataclass

import numpy as np
import torch

from packing_core._validate import InputError
from packing_core.attention.masks import and_masks, causal, same_document
from packing_core.attention.tiles import DEFAULT_TILE, tile_spans

log = logging.getLogger(__name__)

_lock = threading.Lock()
_kernels: dict[tuple, object] = {}
_records: dict[tuple, "CompileRecord"] = {}


@dataclass(frozen=True)
class CompileRecord:
    """One shape class's compilation: what it was, and the seconds its first call took."""

    device: str
    dtype: str
    heads: int
    head_dim: int
    tile: int
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def _cxx_candidates() -> list[str]:
    """The C++ compilers inductor searches, in its order (``torch._inductor.config.cpp.cxx``).

    ``None`` there means "install gcc with conda", which inductor does only when
    ``TORCH_INDUCTOR_INSTALL_GXX`` is set (``cpp_builder.cpp_compiler_search``): not here.
    """
    from torch._inductor import config
    cxx = config.cpp.cxx
    return [c for c in (cxx if isinstance(cxx, (list, tuple)) else (cxx,)) if c]


def flex_unavailable(device="cpu") -> str | None:
    """Why ``flex`` cannot run on ``device``, in one line, or None when it can."""
    device = torch.device(device)
    if importlib.util.find_spec("torch.nn.attention.flex_attention") is None:
        return (f"backend 'flex' needs torch >= 2.5 with FlexAttention (found {torch.__version__}): "
                "use backend='segments'")
    if device.type == "cpu":
        names = _cxx_candidates()
        if not any(shutil.which(c) for c in names):
            return (f"backend 'flex' compiles a C++ kernel on CPU and found no C++ compiler "
                    f"(looked for {', '.join(names) or 'none configured'}; set CXX or install g++): "
                    "use backend='segments'")
        return None
    if device.type == "cuda":
        if importlib.util.find_spec("triton") is None:
            return "backend 'flex' compiles a Triton kernel on CUDA and triton is not installed: " \
                   "pip install triton, or use backend='varlen' or 'segments'"
        return None
    return f"backend 'flex' runs on cpu or cuda, not {device.type}: use backend='segments'"


def document_mask_mod(document_ids: torch.Tensor, *, is_causal: bool = True):
    """FlexAttention's ``mask_mod`` for packed documents: same document and not in the future.

    The predicates of :mod:`packing_core.attention.masks` (``causal & same_document``), in the
    ``(batch, head, q_idx, kv_idx)`` signature FlexAttention calls; ``is_causal=False`` keeps
    only ``same_document`` (each document reads all of itself).
    """
    rule = and_masks(causal, same_document(document_ids)) if is_causal else same_document(document_ids)

    def mask_mod(b, h, q_idx, kv_idx):
        return rule(q_idx, kv_idx)
    return mask_mod


def _runs(start: np.ndarray, count: np.ndarray, n: int, fill: np.ndarray | int = 0) -> np.ndarray:
    """``[len(start), n]`` int32: row r is ``start[r], start[r] + 1, ...`` for ``count[r]`` entries, then ``fill``."""
    col = np.arange(n, dtype=np.int32)
    out = start.astype(np.int32)[:, None] + col
    np.copyto(out, np.asarray(fill, dtype=np.int32)[..., None] if np.ndim(fill) else np.int32(fill),
              where=col >= count[:, None])
    return out


def _kv_side(first: np.ndarray, full_from: np.ndarray):
    """Row-major (query tile -> key tiles) block lists, ascending, as FlexAttention stores them.

    Row i's partial tiles are ``first .. min(full_from, i) - 1`` and the diagonal ``i``
    (written as the run's fill), its full tiles ``full_from .. i - 1``.
    """
    n = len(first)
    rows = np.arange(n)
    below = np.minimum(full_from, rows) - first             # partial tiles left of the diagonal
    n_part = np.where(first <= rows, below + 1, 0)         # ... plus the diagonal tile
    n_full = np.maximum(rows - full_from, 0)
    return n_part, _runs(first, below, n, fill=rows), n_full, _runs(full_from, n_full, n)


def _q_side(first: np.ndarray, full_from: np.ndarray):
    """Column-major (key tile -> query tiles) lists, for the backward pass.

    ``first`` and ``min(full_from, row)`` both rise with the row, so each column's rows
    are found by two binary searches: partial rows are the diagonal and
    ``[max(S, j + 1), P)``, full rows ``[j + 1, S)``.
    """
    n = len(first)
    cols = np.arange(n)
    reads = np.searchsorted(first, cols, side="right")                          # P: first <= j
    ends = np.searchsorted(np.minimum(full_from, cols), cols, side="right")     # S: partial end <= j
    diag = first <= cols
    lo = np.maximum(ends, cols + 1)
    n_below = np.maximum(reads - lo, 0)
    # The diagonal comes first (it is the smallest row), then the rows below it.
    q = _runs(np.where(diag, lo - 1, lo), n_below + diag, n)
    q[diag, 0] = cols[diag]
    n_full = np.maximum(ends - (cols + 1), 0)
    return n_below + diag, q, n_full, _runs(cols + 1, n_full, n)


def _whole_document_side(cu: np.ndarray, tile: int, total: int, grid: int):
    """Block lists without causality: each query tile reads every key tile its documents touch.

    The pad tail (``cu[-1] .. total``) is one document more. Query tile ``i`` touches key tiles
    ``first .. last`` (the tiles of its first document's first token and its last document's
    last token); when it lies inside one document, the key tiles inside that document,
    ``lo .. hi``, are full and the one or two tiles at the run's ends partial. "Tiles ``i`` and
    ``j`` share a document" is symmetric, so the column-major lists equal the row-major ones.
    """
    bounds = np.append(cu, total) if total > cu[-1] else cu
    n = -(-total // tile)
    start = np.arange(n, dtype=np.int64) * tile
    stop = np.minimum(start + tile, total)
    first_doc = np.searchsorted(bounds, start, side="right") - 1      # skips empty documents
    last_doc = np.searchsorted(bounds, stop - 1, side="right") - 1
    first = bounds[first_doc] // tile
    last = (bounds[last_doc + 1] - 1) // tile
    inside = (first_doc == last_doc) & (start + tile <= bounds[first_doc + 1])
    lo = np.where(inside, -(-bounds[first_doc] // tile), last + 1)
    hi = np.where(inside, bounds[first_doc + 1] // tile - 1, last)
    before, after = lo - first, last - hi           # partial tiles left and right of the full run
    col = np.arange(grid, dtype=np.int64)
    part = np.where(col < before[:, None], first[:, None] + col, hi[:, None] + 1 + col - before[:, None])
    part = np.where(col < (before + after)[:, None], part, 0)
    n_full = hi - lo + 1
    full = np.where(col < n_full[:, None], lo[:, None] + col, 0)

    def rows(a, fill=0):   # grid rows past the tiles read nothing
        return np.concatenate([a, np.full((grid - n,) + a.shape[1:], fill, a.dtype)])
    return rows(before + after), rows(part), rows(n_full), rows(full)


def block_mask_from_cu(cu_seqlens, tile: int = DEFAULT_TILE, device=None, *, mask_mod=None,
                       total: int | None = None, grid: int | None = None, causal: bool = True):
    """FlexAttention ``BlockMask`` for packed documents, from ``cu_seqlens`` alone.

    Equal to ``create_block_mask(document_mask_mod(ids, is_causal=causal), 1, 1, T, T,
    BLOCK_SIZE=tile)`` (the tests check it on random boundaries) at one entry per tile instead
    of one predicate call per token pair. ``total`` adds a pad tail after ``cu_seqlens[-1]``
    (its tokens form one document of their own; causal, tiles of pads alone are skipped);
    ``grid`` (>= the tile count) adds empty tile rows, which the kernel never reads.
    ``causal=False``: each document reads all of itself, so a query tile reads the whole run
    of key tiles its documents touch (:func:`_whole_document_side`), never the rest of the row.
    """
    from torch.nn.attention.flex_attention import BlockMask

    cu_t = torch.as_tensor(cu_seqlens)
    device = cu_t.device if device is None else torch.device(device)
    cu = cu_t.cpu().numpy().astype(np.int64)
    spans = tile_spans(cu, tile, total)
    total, n = spans.total, spans.n_tiles
    grid = n if grid is None else int(grid)
    if grid < n:
        raise InputError(f"grid={grid} is smaller than the {n} tiles of {total} tokens: pass grid >= {n}")
    if mask_mod is None:
        lengths = np.diff(np.append(cu, total))             # the pad tail is one more document
        ids = torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32),
                                      torch.from_numpy(lengths))
        mask_mod = document_mask_mod(ids.to(device), is_causal=causal)

    def tensor(a):
        return torch.from_numpy(np.asarray(a, dtype=np.int32)).to(device)[None, None]

    if causal:
        rows = np.arange(n, grid)
        first = np.concatenate([spans.first_kv, rows + 1])     # empty rows: no key tile at all
        full_from = np.concatenate([spans.full_from, rows])
        kv_n, kv, full_n, full = _kv_side(first, full_from)
        q_n, q, qfull_n, qfull = _q_side(first, full_from)
    else:
        kv_n, kv, full_n, full = q_n, q, qfull_n, qfull = _whole_document_side(cu, tile, total, grid)
    return BlockMask(seq_lengths=(total, total),
                     kv_num_blocks=tensor(kv_n), kv_indices=tensor(kv),
                     full_kv_num_blocks=tensor(full_n), full_kv_indices=tensor(full),
                     q_num_blocks=tensor(q_n), q_indices=tensor(q),
                     full_q_num_blocks=tensor(qfull_n), full_q_indices=tensor(qfull),
                     BLOCK_SIZE=(tile, tile), mask_mod=mask_mod)


def _symbolic_sizes(tokens: int, heads: int, head_dim: int, tile: int) -> tuple[int, int]:
    """Token count and tile-grid size that stay symbolic in the compiled kernel.

    Dynamo gives equal sizes one symbol ("duck shaping"), and heads and head size are
    static in ``flex_attention``: 8 tiles beside a head size of 8 became the constant 8,
    the next length recompiled, and in torch 2.13 that CPU rebuild failed (a C++ error in
    the generated kernel). So the token count steps past 0, 1, the heads and the head size
    (one zero pad token, when needed), and the grid (extra empty tile rows) past those and
    the token count.
    """
    static = {0, 1, heads, head_dim}
    total = tokens
    while total in static:
        total += 1
    grid = -(-total // tile)
    while grid in static or grid == total:
        grid += 1
    return total, grid


def compile_records() -> tuple[CompileRecord, ...]:
    """Every shape class compiled in this process so far, with its first call's seconds."""
    return tuple(_records.values())


def _flex_call(q, k, v, block_mask):
    from torch.nn.attention.flex_attention import flex_attention
    return flex_attention(q, k, v, block_mask=block_mask)


def _kernel(key: tuple):
    """The compiled kernel of one shape class, compiled through a function of its own.

    Dynamo keeps compiled code and its dynamic-shape decisions per code object. Sharing one
    across shape classes made the second class a *recompile*, and sharing ``flex_attention``
    itself with transformers' ``torch.compile(flex_attention)`` did the same; in torch 2.13
    on CPU such a recompile failed to build (a C++ error in the generated kernel). So each
    shape class gets a fresh code object, and its first compile is always a first compile.
    """
    fn = _kernels.get(key)
    if fn is None:
        code = _flex_call.__code__.replace(co_name=f"_flex_call_{len(_kernels)}")
        fresh = types.FunctionType(code, _flex_call.__globals__, code.co_name)
        fn = _kernels[key] = torch.compile(fresh, dynamic=True, fullgraph=True)
    return fn


def flex_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens, *,
                scale: float | None = None, tile: int = DEFAULT_TILE, causal: bool = True) -> torch.Tensor:
    """FlexAttention over packed ``[T, H, D]`` documents, causal unless ``causal=False``; ``[T, H, D]`` like ``q``.

    The block mask is built here from ``cu_seqlens`` (:func:`block_mask_from_cu`), causal or
    not: either way the kernel computes only the tiles a document touches.
    """
    reason = flex_unavailable(q.device)
    if reason is not None:
        raise InputError(reason)
    T, H, D = q.shape
    if scale is not None and scale != D ** -0.5:
        # A scale is a constant of the compiled kernel, and a new constant recompiled it
        # (which failed to build on CPU): the kernel keeps its default 1/sqrt(D), q carries the rest.
        q = q * (scale * D ** 0.5)
    # Strides and autograd are compiled in too: one layout ([T, H, D] contiguous), and a
    # class of its own for calls that build a graph for backward.
    q, k, v = (t if t.is_contiguous() else t.contiguous() for t in (q, k, v))
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if not grad:   # FlexAttention refuses CPU inputs that require grad even under no_grad
        q, k, v = (t.detach() for t in (q, k, v))
    if grad and q.device.type == "cpu":   # flex_attention._validate_device refuses it too, as a traceback
        raise InputError(f"backend 'flex' has no backward pass on CPU in torch {torch.__version__}: "
                         "run it under torch.no_grad(), or train with backend='segments'")
    total, grid = _symbolic_sizes(T, H, D, tile)
    if total > T:
        q, k, v = (torch.cat([t, t.new_zeros(total - T, H, t.shape[-1])]) for t in (q, k, v))
    block_mask = block_mask_from_cu(cu_seqlens, tile, q.device, total=total, grid=grid, causal=causal)
    # [T, H, D] viewed as [1, H, T, D]: token-major strides, which the kernel reads as they are.
    qv, kv, vv = (t.transpose(0, 1)[None] for t in (q, k, v))
    key = (q.device.type, str(q.dtype).removeprefix("torch."), H, D, tile, grad) + (() if causal else ("full",))
    if key in _records:
        with torch.set_grad_enabled(grad):   # grad mode is compiled in too: keep it a function of the key
            out = _kernel(key)(qv, kv, vv, block_mask)
    else:
        with _lock:   # one thread compiles a shape class; the others wait and reuse it
            fresh = key not in _records
            if fresh:
                log.warning("flex: compiling FlexAttention for %s %s, %d heads x %d, %d-token tiles%s "
                            "(first call of this shape class)", *key[:5], ", with autograd" if grad else "")
            start = time.perf_counter()
            with torch.set_grad_enabled(grad):
                out = _kernel(key)(qv, kv, vv, block_mask)
            if fresh:
                device, dtype, heads, head_dim, tile_size = key[:5]
                record = CompileRecord(str(device), str(dtype), int(heads), int(head_dim), int(tile_size),
                                       seconds=time.perf_counter() - start)
                _records[key] = record
                log.warning("flex: compiled in %.1f s; later calls of this shape class reuse it",
                            record.seconds)
    return out[0].transpose(0, 1)[:T]
