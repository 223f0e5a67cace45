"""Attention over packed documents, six ways: ``attend(q, k, v, cu_seqlens, ..., causal=True)``.

Every backend takes the same packed input: q, k, v of shape ``[T, H, D]`` with the
documents laid end to end (no pads) and ``cu_seqlens``, their boundary offsets
(``lengths [3, 2] -> cu_seqlens [0 3 5]``). Backends (``BACKENDS``):

- ``varlen``: a flash-attention kernel that reads ``cu_seqlens`` directly (CUDA only).
- ``flex``: PyTorch's FlexAttention, a compiled tiled kernel that skips the empty tiles of
  a block mask built from ``cu_seqlens`` (:mod:`.flex`; CPU and CUDA, needs a compiler).
- ``segments``: one causal SDPA per document (small documents of equal length batched
  into one call). Exact, no ``[T, T]`` mask: the CPU path.
- ``dense``: SDPA with the materialised block-diagonal mask (:mod:`.masks`): the reference.
- ``causal_only``: one causal triangle over each whole row: the bug. Later documents
  attend to earlier ones.
- ``padded``: every document alone in its own row of ``max_seqlen``: the baseline.

Causality is a flag of its own (``causal``, default True), as it is in the kernels: torch 2.13's
``torch.nn.attention.varlen.varlen_attn(..., window_size=(-1, -1))`` defaults to full attention
("(-1, -1) for full attention (default), (-1, 0) for causal attention"), and flash-attn's
``flash_attn_varlen_func(..., causal=False, ...)`` (``flash_attn/flash_attn_interface.py``) too.
With ``causal=False`` each document reads all of itself, its future included: every document
still computes as it would alone, so alone vs packed cannot see it; the causality check
(:mod:`packing_core.verify.causality`) does.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import torch
import torch.nn.functional as F

from packing_core._validate import InputError
from packing_core.attention.flex import flex_attend, flex_unavailable
from packing_core.attention.masks import allowed, segments_from_cu
from packing_core.attention.tiles import DEFAULT_TILE

BACKENDS = ("varlen", "flex", "segments", "dense", "causal_only", "padded")


# Documents with at most this many elements per tensor (length x heads x head_dim) are
# batched with others of the same length; larger ones run alone (see _segments).
_GROUP_ELEMENTS = 4096


# Rows of the dense mask processed at once: bounds the [rows, 1, L, L] mask in memory.
_DENSE_CHUNK = 16


def available_backends(device="cpu") -> list[str]:
    """Backends that run on ``device``: ``varlen`` needs CUDA and a flash kernel, ``flex``
    a C++ compiler (CPU) or Triton (CUDA): :func:`.flex.flex_unavailable` says which is missing."""
    device = torch.device(device)
    names = [b for b in BACKENDS if b != "varlen" and (b != "flex" or flex_unavailable(device) is None)]
    if device.type == "cuda" and varlen_function() is not None:
        names.insert(0, "varlen")
    return names


def _check_cu(cu_seqlens, total: int, name: str = "cu_seqlens") -> list[int]:
    cu_np = torch.as_tensor(cu_seqlens).cpu().numpy()
    cu = cu_np.tolist()
    if len(cu) < 2 or cu[0] != 0 or cu[-1] != total or (np.diff(cu_np) < 0).any():
        raise InputError(
            f"{name} must rise from 0 to the token count {total}, got {cu[:8]}"
            f"{'...' if len(cu) > 8 else ''}: build it as [0, *cumsum(lengths)]")
    return cu


def _to_bhld(x: torch.Tensor) -> torch.Tensor:
    """[n, L, H, D] -> [n, H, L, D] (a view: SDPA accepts the strides)."""
    return x.transpose(1, 2)


def _segments(q, k, v, cu: list[int], scale, causal: bool = True) -> torch.Tensor:
    """SDPA per document (causal unless ``causal=False``), on zero-copy views; small documents batched by length."""
    T, H, D = q.shape
    out = torch.empty_like(q)
    starts = np.asarray(cu[:-1], dtype=np.int64)
    lengths = np.asarray(cu[1:], dtype=np.int64) - starts
    # A small document costs more in call overhead than in arithmetic, so equal lengths
    # share one call (paying a gather and a scatter). A large one gets a view of its own:
    # measured on CPU, batching large documents only adds the copies.
    small = lengths * H * D <= _GROUP_ELEMENTS
    for a, n in zip(starts[~small].tolist(), lengths[~small].tolist()):
        view = [_to_bhld(t[a:a + n][None]) for t in (q, k, v)]
        o = F.scaled_dot_product_attention(*view, is_causal=causal, scale=scale)
        out[a:a + n] = o[0].transpose(0, 1)
    for n in np.unique(lengths[small]).tolist():
        if n == 0:
            continue
        first = torch.from_numpy(starts[small & (lengths == n)]).to(q.device)
        idx = (first[:, None] + torch.arange(n, device=q.device)).reshape(-1)
        shape = (len(first), n, H, D)
        qs, ks, vs = (_to_bhld(t.index_select(0, idx).view(shape)) for t in (q, k, v))
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=scale)
        out.index_copy_(0, idx, o.transpose(1, 2).reshape(-1, H, D))
    return out


def _dense(q, k, v, cu: list[int], row_cu: list[int], scale, causal: bool = True) -> torch.Tensor:
    """SDPA with the materialised block-diagonal mask (causal unless ``causal=False``), row by row."""
    T, H, D = q.shape
    out = torch.empty_like(q)
    seg_all = segments_from_cu(torch.tensor(cu, device=q.device), T)
    rows = list(zip(row_cu[:-1], row_cu[1:]))
    for c in range(0, len(rows), _DENSE_CHUNK):
        chunk = rows[c:c + _DENSE_CHUNK]
        width = max(b - a for a, b in chunk)
        # Rows of unequal width are padded at the end. Pads share one segment past every
        # document: real tokens never see them, and each pad sees itself, so no softmax row
        # is empty (no NaN).
        qb = q.new_zeros(len(chunk), width, H, D)
        kb, vb = torch.zeros_like(qb), torch.zeros_like(qb)
        seg = torch.full((len(chunk), width), len(cu), dtype=torch.long, device=q.device)
        for r, (a, b) in enumerate(chunk):
            qb[r, :b - a], kb[r, :b - a], vb[r, :b - a] = q[a:b], k[a:b], v[a:b]
            seg[r, :b - a] = seg_all[a:b]
        mask = allowed(seg, causal_flag=causal)   # [rows, width, width]: the rule of .masks (causal=False: whole blocks)
        o = F.scaled_dot_product_attention(_to_bhld(qb), _to_bhld(kb), _to_bhld(vb),
                                           attn_mask=mask[:, None], scale=scale)
        o = o.transpose(1, 2)
        for r, (a, b) in enumerate(chunk):
            out[a:b] = o[r, :b - a]
    return out


def _padded(q, k, v, cu: list[int], max_seqlen: int, scale, causal: bool = True) -> torch.Tensor:
    """Pad each document to ``max_seqlen`` as its own row, causal SDPA, unpad."""
    T, H, D = q.shape
    starts = torch.tensor(cu[:-1], device=q.device)
    lengths = torch.tensor(cu[1:], device=q.device) - starts
    pos = torch.arange(max_seqlen, device=q.device)
    valid = pos[None, :] < lengths[:, None]                       # [B, L]
    idx = torch.where(valid, starts[:, None] + pos, 0).reshape(-1)
    shape = (len(starts), max_seqlen, H, D)
    keep = valid.reshape(-1, 1, 1).to(q.dtype)
    qb, kb, vb = (_to_bhld((t.index_select(0, idx) * keep).view(shape)) for t in (q, k, v))
    # Pads sit after the real tokens, so the causal triangle alone keeps them unseen; without it, a key mask does.
    keys = None if causal else valid[:, None, None, :]
    o = F.scaled_dot_product_attention(qb, kb, vb, is_causal=causal, attn_mask=keys, scale=scale)
    return o.transpose(1, 2).reshape(-1, H, D)[valid.reshape(-1)]


def varlen_function():
    """The varlen kernel available here: flash_attn's, torch's, or None."""
    try:
        from flash_attn import flash_attn_varlen_func
        return flash_attn_varlen_func
    except ImportError:
        pass
    try:
        from torch.nn.attention.varlen import varlen_attn
        return varlen_attn
    except ImportError:
        return None


def varlen_kwargs(fn, scale: float | None = None, head_dim: int = 64, causal: bool = True
                  ) -> tuple[dict, float | None]:
    """Keyword arguments that make torch's ``varlen_attn`` causal (or not), read from its signature.

    Releases disagree: some take ``is_causal=True``, later ones ``window_size=(-1, 0)``
    (unlimited left, nothing right; its default ``(-1, -1)`` is full attention). Returns
    ``(kwargs, q_factor)``; ``q_factor`` is set when the kernel has no ``scale`` argument and
    the scale must be folded into q.
    """
    params = inspect.signature(fn).parameters
    if "is_causal" in params:
        kwargs = {"is_causal": causal}
    elif "window_size" in params:
        kwargs = {"window_size": (-1, 0) if causal else (-1, -1)}   # a tuple: the kernel compares == (-1, 0)
    else:
        raise InputError(f"torch {torch.__version__} varlen_attn takes neither is_causal nor "
                         "window_size: use backend='segments' instead")
    if scale is None:
        return kwargs, None
    if "scale" in params:
        return {**kwargs, "scale": scale}, None
    return kwargs, scale * math.sqrt(head_dim)   # the kernel divides by sqrt(D) itself


def _varlen(q, k, v, cu_seqlens, max_seqlen: int, scale, causal: bool = True) -> torch.Tensor:
    fn = varlen_function()
    if fn is None:
        raise InputError(f"backend 'varlen' needs flash_attn or torch>=2.10 (found torch "
                         f"{torch.__version__}): use backend='segments' instead")
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise InputError(f"backend 'varlen' runs flash kernels in float16/bfloat16, got {q.dtype}: "
                         "cast q, k, v with .to(torch.bfloat16) or use backend='segments'")
    cu = torch.as_tensor(cu_seqlens, device=q.device, dtype=torch.int32)
    if fn.__module__.startswith("flash_attn"):
        return fn(q, k, v, cu, cu, max_seqlen, max_seqlen, softmax_scale=scale, causal=causal)
    kwargs, prescale = varlen_kwargs(fn, scale, q.shape[-1], causal)
    if prescale is not None:
        q = q * prescale
    return fn(q.contiguous(), k.contiguous(), v.contiguous(), cu, cu, max_seqlen, max_seqlen, **kwargs)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens, max_seqlen: int,
           backend: str = "segments", *, row_offsets=None, scale: float | None = None,
           tile: int = DEFAULT_TILE, causal: bool = True) -> torch.Tensor:
    """Attention over packed documents, causal unless ``causal=False``; returns ``[T, H, D]`` like ``q``.

    ``cu_seqlens`` (int32 ``[n_docs + 1]``) marks the documents, ``row_offsets`` the
    rows they were packed into (one row of all T when None): only ``dense`` and
    ``causal_only`` look at rows. ``max_seqlen`` is the longest document, or for
    ``padded`` the row width every document is padded to. ``tile`` is the block size of
    ``flex`` (the others ignore it). ``causal=False`` lets each document read all of itself, as
    the varlen kernels do by default; ``causal_only`` ignores it (it is the row-wide bug already).

    >>> q = torch.randn(5, 2, 4)
    >>> out = attend(q, q, q, torch.tensor([0, 3, 5], dtype=torch.int32), 3, "segments")
    >>> torch.allclose(out[3:], attend(q[3:], q[3:], q[3:], torch.tensor([0, 2]), 2, "dense"))
    True
    """
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if q.dim() != 3 or k.shape != q.shape or v.shape != q.shape:
        raise InputError(f"q, k, v must all be packed [T, H, D], got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}: drop the batch dimension")
    T = q.shape[0]
    if backend == "varlen":
        if q.device.type != "cuda":
            raise InputError(f"backend 'varlen' needs a CUDA device, tensors are on {q.device}: "
                             f"use backend='segments' (available here: "
                             f"{', '.join(available_backends(q.device))})")
        _check_cu(cu_seqlens, T)
        return _varlen(q, k, v, cu_seqlens, int(max_seqlen), scale, causal)
    cu = _check_cu(cu_seqlens, T)
    if backend == "flex":
        return flex_attend(q, k, v, torch.tensor(cu, dtype=torch.int32, device=q.device),
                           scale=scale, tile=tile, causal=causal)
    if backend == "segments":
        return _segments(q, k, v, cu, scale, causal)
    if backend == "padded":
        longest = max(b - a for a, b in zip(cu, cu[1:]))
        if max_seqlen < longest:
            raise InputError(f"max_seqlen={max_seqlen} is shorter than the longest document "
                             f"({longest}): pass max_seqlen >= {longest}")
        return _padded(q, k, v, cu, int(max_seqlen), scale, causal)
    row_cu = [0, T] if row_offsets is None else _check_cu(row_offsets, T, "row_offsets")
    if backend == "causal_only":
        # The bug: the row is one causal triangle, document boundaries are ignored.
        return _segments(q, k, v, row_cu, scale)
    return _dense(q, k, v, cu, row_cu, scale, causal)

