"""check_batch(PackedBatch) is the trainer check on to_hf() plus what only a PackedBatch knows."""
import numpy as np
import pytest

import packing_core as pc
from packing_core.check import kernel_mask
from packing_core.verify import PLANTED, broken_batch


def batch():
    docs = [[5, 6, 7, 8, 9], [11, 12, 13], [21, 22, 23, 24], [31, 32]]
    return pc.PackedBatch.from_documents(docs, 8, "next-fit", prompt_lengths=[2, 1, 2, 0])


@pytest.mark.parametrize("how", PLANTED)
def test_check_batch_holds_every_finding_of_the_trainer_check_on_to_hf(how):
    b = broken_batch(batch(), how)
    own, hf = pc.check_batch(b, "varlen"), pc.check_hf_batch(b.to_hf(), "varlen")
    assert type(own) is type(hf)
    assert set(hf.names) <= set(own.names)


def test_the_kernel_mask_is_drawn_from_what_the_implementation_reads():
    good = batch()
    bad = broken_batch(good, "row-cu-seqlens")
    assert np.array_equal(kernel_mask(good, "varlen", 0), good.dense_mask(0).numpy())
    assert kernel_mask(bad, "varlen", 0).sum() > kernel_mask(good, "varlen", 0).sum()
    assert np.array_equal(kernel_mask(bad, "sdpa", 0), good.dense_mask(0).numpy())     # sdpa reads positions
    blind = broken_batch(good, "prompts-cut-from-attention")
    assert np.array_equal(kernel_mask(blind, "varlen", 0), blind.dense_mask(0).numpy())
