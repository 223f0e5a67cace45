"""max_seqlen sizes a flash-attn varlen launch: an understated one leaves queries uncomputed, silently."""
import dataclasses

import numpy as np
import pytest

from packing_core import PackedBatch, check_batch
from packing_core.attention.varlen_grid import FLASH_BLOCK_M, varlen_grid
from packing_core.packing.plan import cu_seqlens_from_lengths


@pytest.mark.parametrize("lengths", [[300, 50], [129, 128, 1], [1000, 999, 3, 700]])
@pytest.mark.parametrize("max_seqlen", [1, 127, 128, 129, 300, 1024])
def test_a_query_is_computed_exactly_when_its_block_is_launched(lengths, max_seqlen):
    """Block m covers queries [m x 128, (m + 1) x 128) of each document; only blocks m < ceil(max / 128) run."""
    g = varlen_grid(cu_seqlens_from_lengths(lengths), max_seqlen)
    launched = -(-max_seqlen // FLASH_BLOCK_M)
    by_hand = [sum(1 for q in range(n) if q // FLASH_BLOCK_M < launched) for n in lengths]
    assert g.computed.tolist() == by_hand and g.skipped_tokens == sum(lengths) - sum(by_hand)
    assert g.skipped_mask().sum() == g.skipped_tokens
    if max_seqlen >= max(lengths):
        assert g.skipped_tokens == 0                       # an overstated max_seqlen loses nothing


def test_the_check_names_the_tokens_flash_attn_leaves_without_output():
    batch = PackedBatch.from_documents([[5] * 300, [6] * 50], 400, "next-fit")
    bad = dataclasses.replace(batch, max_seqlen=200)
    for attn in ("flash_attention_2", "varlen"):
        found = {f.name: f for f in check_batch(bad, attn).findings}
        assert "max_length_too_small" in found
        assert "launches 2 block(s) of 128 queries per document: 44 token(s) get no output" in found[
            "max_length_too_small"].detail
    assert "max_length_too_small" not in check_batch(bad, "sdpa").names          # sdpa never reads it
    assert check_batch(batch, "flash_attention_2").sound


def test_bad_offsets_are_refused():
    with pytest.raises(ValueError, match="cu_seqlens must start at 0"):
        varlen_grid(np.array([1, 5]), 4)
    with pytest.raises(ValueError, match="max_seqlen"):
        varlen_grid([0, 5], 0)
