"""Cutting a packed batch over context-parallel ranks: who holds what, the offsets each rank carries, the pads."""
import math

import numpy as np
import pytest

from packing_core._validate import MAX_BATCH_TOKENS, InputError
from packing_core.batch.packed import PackedBatch
from packing_core.parallel.layout import SCHEMES, pad_multiple, te_partition_indices
from packing_core.parallel.split import check_chunks, split_batch


def batch_of(lengths, context=None, seed=0, strategy="next-fit"):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(1, 250, n).tolist() for n in lengths]
    return PackedBatch.from_documents(docs, context or sum(lengths), strategy)


def random_lengths(seed, n=7, top=40):
    return np.random.default_rng(seed).integers(1, top, n).tolist()


def test_zigzag_document_cuts_each_document_as_transformer_engines_own_test_expects():
    # transformer_engine tests/pytorch/attention/test_cp_utils.py: offsets [0, 8, 16], CP 2
    s = split_batch(batch_of([8, 8]), 2, "zigzag-document")
    assert s.ranks[0].global_index.tolist() == [[0, 1, 6, 7, 8, 9, 14, 15]]
    assert s.ranks[1].global_index.tolist() == [[2, 3, 4, 5, 10, 11, 12, 13]]


@pytest.mark.parametrize("cp", [2, 3, 4, 8])
def test_the_split_takes_the_slots_transformer_engines_partition_computes_from_the_padded_offsets(cp):
    s = split_batch(batch_of(random_lengths(cp)), cp, "zigzag-document")
    for rb in s.ranks:
        te = te_partition_indices(s.cu_seqlens_padded, s.input_ids.size, cp, rb.rank)
        assert rb.global_index.reshape(-1).tolist() == te.tolist()


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("cp", [1, 2, 3, 4, 8])
def test_every_slot_of_the_padded_batch_is_held_by_exactly_one_rank(scheme, cp):
    b = batch_of(random_lengths(cp, 9), context=48, strategy="bfd")
    s = split_batch(b, cp, scheme)
    check_chunks(s)
    assert sum(rb.tokens for rb in s.ranks) == s.input_ids.size
    assert len({rb.tokens for rb in s.ranks}) == 1        # equal shares
    assert int(s.real.sum()) == s.real_tokens == int(b.valid.sum())


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_every_document_is_padded_to_a_multiple_of_2cp_and_the_pads_are_reported(cp):
    lengths = random_lengths(cp + 1, 9)
    s = split_batch(batch_of(lengths), cp, "zigzag-document")
    padded = np.diff(s.cu_seqlens_padded)
    assert (padded % (2 * cp) == 0).all() and (padded - np.diff(s.cu_seqlens) == s.pads).all()
    assert s.pads.tolist() == [-n % (2 * cp) for n in lengths]
    assert s.pads_added == int(s.pads.sum()) == s.input_ids.size - sum(lengths)


def test_sequence_parallel_pads_each_document_to_lcm_of_2cp_and_tp_times_cp():
    # Megatron-Bridge scripts/training/recipe_runner.py: math.lcm(2 * cp, cp * tp)
    for cp, tp in ((2, 4), (4, 2), (3, 4), (2, 3)):
        m = pad_multiple(cp, "zigzag-document", tp=tp, sequence_parallel=True)
        assert m == math.lcm(2 * cp, tp * cp)
        s = split_batch(batch_of([7, 5, 13]), cp, "zigzag-document", tp=tp, sequence_parallel=True)
        assert (np.diff(s.cu_seqlens_padded) % m == 0).all()
    assert pad_multiple(2, "zigzag-document", tp=4) == 4           # tensor parallelism alone pads nothing more


def real_on_rank(length, padded, cp, rank):
    """Transformer Engine's get_cu_seqlens_on_cp_rank, first and second half: a rank's real tokens of a document."""
    c = padded // (2 * cp)
    first = min(max(length - rank * c, 0), c)
    second = min(max(length - (2 * cp - 1 - rank) * c, 0), c)
    return first + second


@pytest.mark.parametrize("cp", [2, 3, 4, 8])
def test_each_rank_carries_the_padded_offsets_over_cp_and_its_own_real_tokens_per_document(cp):
    lengths = random_lengths(10 + cp, 8)
    s = split_batch(batch_of(lengths), cp, "zigzag-document")
    for rb in s.ranks:
        assert rb.cu_seqlens_padded_rank.tolist() == (s.cu_seqlens_padded // cp).tolist()
        padded = np.diff(s.cu_seqlens_padded)
        want = [real_on_rank(n, p, cp, rb.rank) for n, p in zip(lengths, padded)]
        assert np.diff(rb.cu_seqlens_rank).tolist() == want
        assert rb.cu_seqlens.tolist() == s.cu_seqlens.tolist()          # the global ones, on every rank


def test_the_real_tokens_of_each_run_of_a_rank_come_first_in_it():
    s = split_batch(batch_of(random_lengths(3, 12), context=64, strategy="bfd"), 4, "zigzag-row", pad_documents=True)
    for rb in s.ranks:
        real = rb.piece_ids.reshape(-1) >= 0
        cu, cr = rb.cu_seqlens_padded_rank, rb.cu_seqlens_rank
        for a, b, n in zip(cu[:-1], cu[1:], np.diff(cr)):
            assert real[a:b].tolist() == [True] * n + [False] * (b - a - n)


def test_contiguous_gives_rank_r_window_r_of_each_row():
    s = split_batch(batch_of([10, 6], context=16), 4, "contiguous")
    assert [rb.global_index.tolist() for rb in s.ranks] == [[list(range(4 * r, 4 * r + 4))] for r in range(4)]


def test_a_row_scheme_pads_the_row_end_and_pad_documents_puts_pads_between_documents():
    b = batch_of([3, 2], context=5)
    s = split_batch(b, 2, "zigzag-row")
    assert s.input_ids.shape == (1, 8) and s.pads_added == 3 and s.piece_ids.tolist() == [[0, 0, 0, 1, 1, -1, -1, -1]]
    t = split_batch(b, 2, "contiguous", pad_documents=True)
    assert t.piece_ids.tolist() == [[0, 0, 0, -1, 1, 1, -1, -1]] and t.pads.tolist() == [1, 2]


def test_targets_and_positions_follow_their_tokens_and_pads_train_nothing():
    b = batch_of([7, 5])
    s = split_batch(b, 2, "zigzag-document")
    real = s.real
    assert (s.targets[~real] == -100).all() and (s.position_ids[real] < np.array([7, 5])[s.piece_ids[real]]).all()
    assert sorted(s.targets[real].tolist()) == sorted(b.targets[b.valid].tolist())


def test_cp_one_holds_the_whole_batch_with_no_pads():
    b = batch_of([7, 5])
    s = split_batch(b, 1, "zigzag-document")
    assert s.pads_added == 0 and s.ranks[0].input_ids.tolist() == [b.input_ids[b.valid].tolist()]


@pytest.mark.parametrize("cp, scheme, match", [(0, "contiguous", "at least 1"), (10**6, "contiguous", "at most 1,024"),
                                               (2, "diagonal", "scheme must be one of"), (True, "contiguous", "boolean")])
def test_a_bad_cp_or_scheme_is_one_clear_error(cp, scheme, match):
    with pytest.raises(InputError, match=match):
        split_batch(batch_of([3]), cp, scheme)


def test_a_split_padded_past_the_batch_bound_is_refused():
    many = batch_of([1] * 600, context=600)
    with pytest.raises(InputError, match=f"more than a batch the lab splits may hold \\({MAX_BATCH_TOKENS:,}\\)"):
        split_batch(many, 1024, "zigzag-document")


def test_zigzag_document_pads_every_document_so_turning_it_off_is_refused():
    with pytest.raises(InputError, match="every document is padded"):
        split_batch(batch_of([3]), 2, "zigzag-document", pad_documents=False)
