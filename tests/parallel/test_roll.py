"""Multi-token prediction's roll on the ranks: on the padded offsets it finds each token's successor."""
import numpy as np
import pytest

from packing_core._validate import InputError
from packing_core.batch.packed import PackedBatch
from packing_core.parallel.roll import roll_on_ranks, rolled_targets
from packing_core.parallel.split import split_batch


def batch_of(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return PackedBatch.from_documents([rng.integers(1, 250, n).tolist() for n in lengths], sum(lengths), "next-fit")


@pytest.mark.parametrize("cp", [2, 4])
def test_rolled_on_the_padded_offsets_each_slot_gets_its_documents_next_token(cp):
    s = split_batch(batch_of([7, 5, 12, 9, 3, 16], seed=cp), cp, "zigzag-document")
    for rb, t in zip(s.ranks, rolled_targets(s, "padded")):
        assert t.tolist() == rb.targets.tolist()


def test_rolled_on_the_real_offsets_odd_documents_take_successors_from_elsewhere():
    s = split_batch(batch_of([7, 5, 9]), 2, "zigzag-document")
    bad = rolled_targets(s, "real")
    assert any((t != rb.targets).any() for rb, t in zip(s.ranks, bad))


def test_documents_that_are_multiples_of_2cp_roll_alike_on_either_offsets():
    s = split_batch(batch_of([8, 4, 12]), 2, "zigzag-document")
    assert [t.tolist() for t in rolled_targets(s, "real")] == [t.tolist() for t in rolled_targets(s, "padded")]


def test_a_one_token_local_slice_is_the_index_error_megatron_hits():
    with pytest.raises(InputError, match="one token"):
        roll_on_ranks([np.arange(4), np.arange(4)], np.array([0, 2, 8]), 2)


def test_the_roll_needs_the_document_layout():
    s = split_batch(batch_of([7, 5]), 2, "contiguous")
    with pytest.raises(InputError, match="zigzag-document"):
        rolled_targets(s)
