"""check_batch(PackedBatch) is the trainer check on to_hf() plus what only a PackedBatch knows."""
import numpy as np
import pytest

import packing_core as pc
from packing_core.attention import packed_attention
from packing_core.attention.masks import allowed
from packing_core.check import check_all_implementations
from packing_lab.zoo import PLANTED, broken_batch


def batch():
    docs = [[5, 6, 7, 8, 9], [11, 12, 13], [21, 22, 23, 24], [31, 32]]
    return pc.PackedBatch.from_documents(docs, 8, "next-fit", prompt_lengths=[2, 1, 2, 0])


@pytest.mark.parametrize("how", PLANTED)
def test_check_batch_holds_every_finding_of_the_trainer_check_on_to_hf(how):
    b = broken_batch(batch(), how)
    own, hf = pc.check_batch(b, "varlen"), pc.check_hf_batch(b.to_hf(), "varlen")
    assert type(own) is type(hf)
    assert set(hf.names) <= set(own.names)
    assert len(set(own.names)) == len(own.names)        # a rule both views report is reported once


def test_the_kernel_mask_is_drawn_from_what_the_implementation_reads():
    good = batch()
    own = allowed(good.piece_ids[0]).numpy()            # the batch's own pieces under the one rule
    bad = broken_batch(good, "row-cu-seqlens")
    assert np.array_equal(packed_attention(good, "varlen").allowed(0), own)
    assert packed_attention(bad, "varlen").allowed(0).sum() > own.sum()
    assert np.array_equal(packed_attention(bad, "sdpa").allowed(0), own)     # sdpa reads positions
    blind = broken_batch(good, "prompts-cut-from-attention")
    hidden = allowed(blind.piece_ids[0], blind.key_mask[0], reads_itself=True).numpy()
    assert np.array_equal(packed_attention(blind, "varlen").allowed(0), hidden)
    assert hidden.sum() < own.sum() and np.diag(hidden)[blind.valid[0].numpy()].all()   # prompts hidden, self kept




def test_check_all_implementations_of_a_packed_batch_is_check_batch_for_each():
    b = broken_batch(batch(), "row-cu-seqlens")
    every = check_all_implementations(b)
    assert [c.attn_implementation for c in every] == list(pc.attention.IMPLEMENTATIONS)
    for c in every:
        one = pc.check_batch(b, c.attn_implementation, compare=False)
        assert c.names == one.names and c.verdict == one.verdict
