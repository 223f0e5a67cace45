"""Alone against packed, on one attention layer: the check that sees what the tensors cannot.

``check_batch`` reads a batch's tensors; ``loss_vs_answers`` counts its loss positions. Neither
can see a bug that lives only in who may read whom, such as the loss mask used as the
attention mask (prompt tokens stop being keys). This check runs one attention layer with
random q, k and v over every row as a kernel would see it (its ``cu_seqlens``, plus any key
restriction the batch carries), runs every piece alone, and compares the outputs.

>>> from packing_core.batch.packed import PackedBatch
>>> from packing_lab.zoo import broken_batch
>>> good = PackedBatch.from_documents([[1, 2, 3, 4], [5, 6, 7]], 8, "next-fit", prompt_lengths=[2, 1])
>>> alone_vs_packed_attention(good).equivalent
True
>>> alone_vs_packed_attention(broken_batch(good, "prompts-cut-from-attention")).equivalent
False

It has no position encoding, so it judges the mask only, not the position ids.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from packing_core.attention.semantics import packed_attention

TOLERANCE = 1e-5   # float32 attention over a few hundred keys agrees to about 1e-7


@dataclass(frozen=True)
class AttentionCheck:
    """Max |output alone - output packed| for each document piece of a batch."""

    max_abs_diff: tuple[float, ...]   # one per piece, in cu_seqlens order
    tolerance: float

    @property
    def equivalent(self) -> bool:
        return all(d <= self.tolerance for d in self.max_abs_diff)

    @property
    def differing(self) -> tuple[int, ...]:
        """The pieces whose packed output is not their alone output."""
        return tuple(i for i, d in enumerate(self.max_abs_diff) if d > self.tolerance)

    def to_dict(self) -> dict:
        return {"max_abs_diff": list(self.max_abs_diff), "tolerance": self.tolerance,
                "equivalent": self.equivalent, "differing": list(self.differing)}


def alone_vs_packed_attention(batch, *, heads: int = 2, head_dim: int = 16, seed: int = 0,
                              tolerance: float = TOLERANCE) -> AttentionCheck:
    """Compare each piece's attention output alone with its output inside the packed rows.

    The packed side reads the batch as a varlen kernel does (``attention.packed_attention``:
    its ``cu_seqlens``, and any keys the batch hides in ``key_mask``). The alone side runs each
    piece, as ``piece_ids`` lay it out, through causal attention by itself.
    """
    pieces = batch.piece_ids.numpy()
    valid = pieces >= 0
    rows, width = pieces.shape
    kernel = packed_attention(batch, "varlen")

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(rows, heads, width, head_dim, generator=g) for _ in range(3))
    diffs = np.zeros(int(pieces.max()) + 1 if valid.any() else 0)
    for r in range(rows):
        mask = kernel.allowed(r)
        mask |= np.eye(width, dtype=bool) & ~valid[r][:, None]   # a pad reads itself: no empty softmax row
        packed = F.scaled_dot_product_attention(q[r:r + 1], k[r:r + 1], v[r:r + 1], attn_mask=torch.from_numpy(mask))[0]
        for piece in np.unique(pieces[r][valid[r]]):
            idx = np.flatnonzero(pieces[r] == piece)
            a, b = int(idx[0]), int(idx[-1]) + 1
            alone = F.scaled_dot_product_attention(q[r:r + 1, :, a:b], k[r:r + 1, :, a:b], v[r:r + 1, :, a:b],
                                                   is_causal=True)[0]
            diffs[piece] = float((alone - packed[:, a:b]).abs().max())
    return AttentionCheck(tuple(float(d) for d in diffs), float(tolerance))
