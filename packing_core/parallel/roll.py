"""Multi-token prediction's roll on the ranks: each token's successor, found across the ring's chunks.

Megatron's multi-token prediction rolls ``input_ids`` (and the labels and loss mask) one token left,
inside each document, on each rank's chunks (``megatron/core/transformer/multi_token_prediction.py``
``_roll_tensor_packed_seq``): per document it slices the rank's tensor from ``cu_seqlens[i] // cp`` to
``cu_seqlens[i + 1] // cp``, cuts the slice in two chunks (``torch.chunk(2)``: the first gets the odd
token), rolls each, and fills each chunk's last slot with the first token of the chunk that follows it
in the document: rank r + 1's first chunk, and rank r - 1's second chunk (rank 0's second chunk ends the
document: 0; the last rank's first chunk is followed by its own second chunk). The offsets must be the
*padded* ones: the local tensor is laid out by ``cu_seqlens_padded``. With the real offsets and a
document that is no multiple of 2·CP, the slices fall across documents (NVIDIA/Megatron-LM #4494, #4495)::

    documents of 7 and 5, CP 2; rank 0 holds a0 a1 a6 __ b0 b1 __ __
    padded offsets [0 8 16] // 2 -> slices [0, 4) and [4, 8): a0 a1 | a6 __ and b0 b1 | __ __
    real offsets   [0 7 12] // 2 -> slices [0, 3) and [3, 6): a0 a1 | a6  and __ b0 | b1

>>> from packing_core.batch.packed import PackedBatch
>>> from packing_core.parallel.split import split_batch
>>> s = split_batch(PackedBatch.from_documents([[10, 11, 12, 13, 14, 15, 16], [20, 21, 22, 23, 24]], 16), 2)
>>> rolled_targets(s, "padded")[0].tolist()     # the next token of each, -100 where none is trained
[[11, 12, -100, -100, 21, 22, -100, -100]]
>>> rolled_targets(s, "real")[0].tolist()      # b0's successor is 15, a token of the other document
[[11, 12, -100, -100, 15, -100, -100, -100]]
"""
from __future__ import annotations

import numpy as np

from packing_core._validate import InputError, choice
from packing_core.batch.packed import IGNORE_INDEX

ROLL_OFFSETS = ("padded", "real")


def _chunks(n: int) -> list[tuple[int, int]]:
    """``torch.chunk(x, 2)`` of ``n`` slots as ``(start, length)``: the first takes ceil(n / 2); none for n == 0."""
    if n == 0:
        return []
    first = -(-n // 2)
    return [(0, first)] + ([(first, n - first)] if n - first else [])


def roll_on_ranks(values: list[np.ndarray], cu_seqlens: np.ndarray, cp: int) -> list[np.ndarray]:
    """Each rank's 1-D ``values`` rolled one slot left inside each document, as ``_roll_tensor_packed_seq`` does."""
    out = [v.copy() for v in values]
    cu = np.asarray(cu_seqlens, np.int64)
    for i in range(len(cu) - 1):
        lo, hi = int(cu[i]) // cp, int(cu[i + 1]) // cp
        if hi - lo == 0:
            continue                                   # Megatron skips an empty local slice
        parts = _chunks(hi - lo)
        if len(parts) < 2:
            raise InputError(f"document {i}'s local slice is one token: Megatron's roll indexes a second chunk "
                             "that torch.chunk did not make (an IndexError there)")
        firsts = [[int(v[lo + a]) for a, _ in parts] for v in values]   # what each rank sends: its chunks' heads
        for r in range(cp):
            nxt = firsts[r + 1][0] if r + 1 < cp else firsts[r][1]     # chunk r + 1, or this rank's second chunk
            prev = firsts[r - 1][1] if r > 0 else 0                     # chunk 2N - r, or the document's end
            for (a, n), fill in zip(parts, (nxt, prev)):
                seg = values[r][lo + a: lo + a + n]
                out[r][lo + a: lo + a + n] = np.r_[seg[1:], fill]
    return out


def rolled_targets(split, offsets: str = "padded") -> list[np.ndarray]:
    """Per rank ``[1, L]``: the next token of each slot by the roll, -100 where the rolled loss mask is 0.

    zigzag-document only (the layout Megatron's roll assumes). ``offsets`` ``"padded"`` rolls on
    ``cu_seqlens_padded`` (the fix), ``"real"`` on ``cu_seqlens`` (the bug).
    """
    choice("offsets", offsets, ROLL_OFFSETS)
    if split.scheme != "zigzag-document":
        raise InputError("the multi-token-prediction roll assumes the zigzag-document layout (THD)")
    cu = split.cu_seqlens_padded if offsets == "padded" else split.cu_seqlens
    ids = [rb.input_ids.reshape(-1) for rb in split.ranks]
    trained = [rb.targets.reshape(-1) != IGNORE_INDEX for rb in split.ranks]   # the slot has a successor to learn
    successor = roll_on_ranks(ids, cu, split.cp)
    real = roll_on_ranks([(rb.piece_ids.reshape(-1) >= 0).astype(np.int64) for rb in split.ranks], cu, split.cp)
    return [np.where(t & (r == 1), n, IGNORE_INDEX)[None] for t, n, r in zip(trained, successor, real)]
