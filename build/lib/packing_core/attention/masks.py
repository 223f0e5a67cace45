"""The block-causal rule, once: small composable predicates over (query i, key j).

A packed row needs the block-diagonal causal mask, ``causal & same_document``::

    lengths [3, 2] -> cu_seqlens [0 3 5] -> segments [0 0 0 1 1]

    (1 = may attend, rule: j <= i and segment[i] == segment[j])
            j: 0 1 2 3 4
        i=0    1 . . . .
        i=1    1 1 . . .
        i=2    1 1 1 . .
        i=3    . . . 1 .      <- document 1 starts: it sees nothing of document 0
        i=4    . . . 1 1

>>> block_causal_mask([0, 3, 5]).int().tolist()[3]
[0, 0, 0, 1, 0]

The plain causal triangle alone would give row 3 ``1 1 1 1 .``: the mask bug.

Every kernel, check and picture of the lab draws its mask from :func:`block_causal` here: the
dense reference backend, what an attention implementation lets a query read
(``EffectiveAttention.allowed``), the alone-vs-packed check and the figures. The predicates
take torch tensors or numpy arrays alike (``segments[..., i]`` indexes the last axis, so a
``[rows, T]`` array gives ``[rows, T, T]``), and :func:`allowed` returns the kind it is given:

>>> allowed(np.array([0, 0, -1])).astype(int).tolist()     # -1: a pad, which reads nothing
[[1, 0, 0], [1, 1, 0], [0, 0, 0]]

Materialise a mask only for pictures and the dense reference; kernels take ``cu_seqlens``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from packing_core._validate import InputError

MaskPredicate = Callable[[Any, Any], Any]   # (query index i, key index j) -> bool, torch or numpy


def causal(i, j):
    """Query ``i`` may read key ``j`` when ``j`` is not in its future."""
    return j <= i


def same_document(segments) -> MaskPredicate:
    """Predicate: tokens ``i`` and ``j`` belong to the same segment (``segments[..., i] == segments[..., j]``)."""
    def predicate(i, j):
        return segments[..., i] == segments[..., j]
    return predicate


def in_segment(segments) -> MaskPredicate:
    """Predicate: the query belongs to a segment at all (``segments >= 0``; -1 marks a pad or a skipped token)."""
    def predicate(i, j):
        return segments[..., i] >= 0
    return predicate


def readable_keys(key_ok, *, reads_itself: bool = False) -> MaskPredicate:
    """Predicate: key ``j`` may be read (``key_ok[..., j]``); with ``reads_itself`` a query always reads itself."""
    def predicate(i, j):
        ok = key_ok[..., j]
        return ok | (i == j) if reads_itself else ok
    return predicate


def and_masks(*predicates: MaskPredicate) -> MaskPredicate:
    """Intersection of mask predicates: ``and_masks(causal, same_document(seg))``."""
    if not predicates:
        raise InputError("and_masks needs at least one predicate, got none: pass e.g. causal")

    def predicate(i, j):
        out = predicates[0](i, j)
        for p in predicates[1:]:
            out = out & p(i, j)
        return out
    return predicate


def block_causal(segments, key_ok=None, *, reads_itself: bool = False, causal_flag: bool = True) -> MaskPredicate:
    """The one rule: ``j <= i``, the same segment, a query that has one, and (if given) a readable key.

    ``segments`` ``[..., T]`` numbers the segment each token attends within (-1: none);
    ``key_ok`` ``[..., T]`` (None: every key) restricts the keys, as a 2D padding mask does.
    ``causal_flag=False`` drops ``j <= i``: what a varlen kernel called without its causal flag reads
    (each document whole, its future included).
    """
    predicates = [causal] if causal_flag else []
    predicates += [same_document(segments), in_segment(segments)]
    if key_ok is not None:
        predicates.append(readable_keys(key_ok, reads_itself=reads_itself))
    return and_masks(*predicates)


def materialise(predicate: MaskPredicate, total: int, device=None) -> torch.Tensor:
    """Evaluate a predicate on every (i, j) pair: bool ``[total, total]``, True = may attend."""
    idx = torch.arange(total, device=device)
    return predicate(idx[:, None], idx[None, :])


def allowed(segments, key_ok=None, *, reads_itself: bool = False, causal_flag: bool = True):
    """bool ``[..., T, T]``, True where query i may read key j: :func:`block_causal` materialised.

    A numpy ``segments`` gives a numpy mask, a torch tensor a torch one (on its device).

    >>> allowed(torch.tensor([0, 0, 1])).int().tolist()
    [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    >>> allowed(np.array([0, 0, 0]), np.array([False, True, True]), reads_itself=True).astype(int).tolist()
    [[1, 0, 0], [0, 1, 0], [0, 1, 1]]
    >>> allowed(np.array([0, 0, 1]), causal_flag=False).astype(int).tolist()    # no causal flag: the future too
    [[1, 1, 0], [1, 1, 0], [0, 0, 1]]
    """
    T = segments.shape[-1]
    idx = np.arange(T) if isinstance(segments, np.ndarray) else torch.arange(T, device=segments.device)
    return block_causal(segments, key_ok, reads_itself=reads_itself, causal_flag=causal_flag)(idx[:, None], idx[None, :])


def segments_from_cu(cu_seqlens: torch.Tensor, total: int | None = None) -> torch.Tensor:
    """``cu_seqlens [0 3 5] -> segments [0 0 0 1 1]``; tokens past ``cu[-1]`` get id n."""
    cu = torch.as_tensor(cu_seqlens).long()
    lengths = cu[1:] - cu[:-1]
    seg = torch.repeat_interleave(torch.arange(len(lengths), device=cu.device), lengths)
    if total is not None and total > int(cu[-1]):
        tail = torch.full((total - int(cu[-1]),), len(lengths), device=cu.device, dtype=seg.dtype)
        seg = torch.cat([seg, tail])
    return seg


def block_causal_mask(cu_seqlens, total: int | None = None) -> torch.Tensor:
    """Bool ``[total, total]`` mask, True where token i may attend to token j.

    >>> block_causal_mask(torch.tensor([0, 2, 3])).int().tolist()
    [[1, 0, 0], [1, 1, 0], [0, 0, 1]]

    Positions past ``cu_seqlens[-1]`` (a row's pad tail) form one trailing segment,
    so real tokens never see them.
    """
    cu = torch.as_tensor(cu_seqlens)
    end = int(cu[-1])
    total = end if total is None else int(total)
    if total < end:
        raise InputError(f"total={total} is shorter than cu_seqlens[-1]={end}: pass total >= {end}")
    return allowed(segments_from_cu(cu, total))
