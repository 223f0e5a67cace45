"""What a flash-attn varlen call computes for a given ``max_seqlen``: the grid is sized by it, not by the documents.

flash-attn 2 mirrored here (``csrc/flash_attn``): ``mha_varlen_fwd`` (``flash_api.cpp``) passes ``max_seqlen_q`` as
``params.seqlen_q`` and allocates the output with ``torch::empty``; ``run_flash_fwd``
(``src/flash_fwd_launch_template.h``) launches ``num_m_block = ceil(params.seqlen_q / kBlockM)`` query blocks per
document and head (``dim3 grid(num_m_block, params.b, params.h)``); ``compute_attn_1rowblock``
(``src/flash_fwd_kernel.h``) returns at once for a block past its document's end (``m_block * kBlockM >=
actual_seqlen_q``) and reads each document's real length from ``cu_seqlens``. So an overstated ``max_seqlen`` costs
a few idle blocks (the maintainer: it "won't affect the output", Dao-AILab/flash-attention #1664), while an
understated one launches too few: the queries of a longer document past ``ceil(max_seqlen / kBlockM) x kBlockM``
get no block, and their output rows keep whatever the fresh buffer held. Nothing raises. ``kBlockM`` is 128 in the
forward kernels for head dimensions 32 to 128 on A100 and H100 (``run_mha_fwd_hdim64``, ``run_mha_fwd_hdim128``;
a few shapes use 64), so a small understatement may still be covered by the last block, and a larger one is not:

>>> g = varlen_grid([0, 300, 350], max_seqlen=200)      # documents of 300 and 50 tokens
>>> g.blocks, g.computed.tolist(), g.skipped.tolist()
(2, [256, 50], [44, 0])
>>> varlen_grid([0, 300, 350], max_seqlen=300).skipped_tokens, varlen_grid([0, 300, 350], 260).skipped_tokens
(0, 0)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core._validate import InputError, whole_number

FLASH_BLOCK_M = 128   # flash-attn 2's forward query block for head dimensions 32 to 128 on A100 and H100


@dataclass(frozen=True, eq=False)
class VarlenGrid:
    """The query blocks a flash-attn varlen forward launches for ``max_seqlen``, against the documents' lengths."""

    max_seqlen: int
    block: int
    lengths: np.ndarray          # int64 [documents], from cu_seqlens

    @property
    def blocks(self) -> int:
        """Query blocks per document and head: ``ceil(max_seqlen / block)``."""
        return -(-self.max_seqlen // self.block)

    @property
    def computed(self) -> np.ndarray:
        """Queries of each document that some block computes."""
        return np.minimum(self.lengths, self.blocks * self.block)

    @property
    def skipped(self) -> np.ndarray:
        """Queries of each document that no block computes: their output is never written."""
        return self.lengths - self.computed

    @property
    def skipped_tokens(self) -> int:
        return int(self.skipped.sum())

    def skipped_mask(self) -> np.ndarray:
        """bool [total tokens]: the tokens whose output no block writes, in the flattened batch's order."""
        starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]])
        within = np.arange(int(self.lengths.sum())) - np.repeat(starts, self.lengths)
        return within >= self.blocks * self.block

    @property
    def sentence(self) -> str:
        n, docs = self.skipped_tokens, int((self.skipped > 0).sum())
        head = (f"max_seqlen {self.max_seqlen:,} launches ⌈{self.max_seqlen:,} / {self.block}⌉ = {self.blocks} query "
                f"block(s) of {self.block} per document, covering {self.blocks * self.block:,} queries; the longest "
                f"document holds {int(self.lengths.max(initial=0)):,}")
        if n == 0:
            return head + ": every query is computed" + (
                ", though max_seqlen is understated: a longer document would lose its last queries"
                if self.max_seqlen < int(self.lengths.max(initial=0)) else "")
        return head + (f": {n:,} token(s) of {docs} document(s) get no output, and the buffer's old contents "
                       "stand in for them, silently")


def varlen_grid(cu_seqlens, max_seqlen: int, block: int = FLASH_BLOCK_M) -> VarlenGrid:
    """The blocks flash-attn launches for ``cu_seqlens`` (offsets over the flattened batch) and ``max_seqlen``."""
    cu = np.asarray(cu_seqlens, dtype=np.int64).ravel()
    if len(cu) < 2 or cu[0] != 0 or (np.diff(cu) < 0).any():
        raise InputError(f"cu_seqlens must start at 0 and never fall, got {cu.tolist()[:8]}")
    max_seqlen = whole_number(max_seqlen, "max_seqlen", hint="the longest document's length")
    return VarlenGrid(max_seqlen, whole_number(block, "block"), np.diff(cu))
