"""Attention masks as small composable predicates over (query i, key j).

A packed row needs the block-diagonal causal mask, ``causal & same_document``::

    lengths [3, 2] -> cu_seqlens [0 3 5]

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
Materialise a mask only for pictures and the dense reference; kernels take ``cu_seqlens``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from packing_core._validate import InputError

MaskPredicate = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def causal(i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """Query ``i`` may read key ``j`` when ``j`` is not in its future."""
    return j <= i


def same_document(segment_ids: torch.Tensor) -> MaskPredicate:
    """Predicate: tokens ``i`` and ``j`` belong to the same document."""
    def predicate(i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        return segment_ids[i] == segment_ids[j]
    return predicate


def and_masks(*predicates: MaskPredicate) -> MaskPredicate:
    """Intersection of mask predicates: ``and_masks(causal, same_document(seg))``."""
    if not predicates:
        raise InputError("and_masks needs at least one predicate, got none: pass e.g. causal")

    def predicate(i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        out = predicates[0](i, j)
        for p in predicates[1:]:
            out = out & p(i, j)
        return out
    return predicate


def materialise(predicate: MaskPredicate, total: int, device=None) -> torch.Tensor:
    """Evaluate a predicate on every (i, j) pair: bool ``[total, total]``, True = may attend."""
    idx = torch.arange(total, device=device)
    return predicate(idx[:, None], idx[None, :])


def segment_ids_from_cu(cu_seqlens: torch.Tensor, total: int | None = None) -> torch.Tensor:
    """``cu_seqlens [0 3 5] -> segment_ids [0 0 0 1 1]``; tokens past ``cu[-1]`` get id n."""
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
    seg = segment_ids_from_cu(cu, total)
    return materialise(and_masks(causal, same_document(seg)), total, device=cu.device)

