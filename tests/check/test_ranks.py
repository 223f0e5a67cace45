"""check --cp: a rank's batch, or every rank's, for its CP size and scheme; each finding fires on its bug only."""
import numpy as np
import pytest

from packing_core._validate import InputError
from packing_core.batch.packed import PackedBatch
from packing_core.check.ranks import check_cp_ranks, check_rank_batch
from packing_core.parallel.layout import SCHEMES
from packing_core.parallel.roll import rolled_targets
from packing_core.parallel.split import split_batch


def split_of(lengths, cp=2, scheme="zigzag-document", context=None, strategy="bfd", **kw):
    rng = np.random.default_rng(len(lengths))
    docs = [rng.integers(1, 250, n).tolist() for n in lengths]
    return split_batch(PackedBatch.from_documents(docs, context or sum(lengths), strategy), cp, scheme, **kw)


def files(split, **override):
    return [{**rb.to_file(), **override} for rb in split.ranks]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("cp", [1, 2, 3, 4, 8])
def test_every_rank_of_a_sound_split_and_the_split_whole_are_sound(scheme, cp):
    s = split_of([7, 5, 12, 3, 9, 17], cp, scheme, context=32)
    assert check_cp_ranks(files(s), cp, scheme).findings == ()
    assert all(check_rank_batch(f, cp, scheme).findings == () for f in files(s))


def test_a_document_given_without_its_padded_offsets_is_not_padded_to_2cp():
    s = split_of([7], 2)
    c = check_rank_batch({**s.ranks[0].to_file(), "cu_seqlens_padded": None, "cu_seqlens_padded_rank": None}, 2)
    assert c.names == ("cp_document_not_padded",) and "computes it as 6 tokens" in c.findings[0].detail


def test_pad_between_seqs_off_with_a_padded_last_document_reads_unpadded_offsets():
    s = split_of([8, 7], 2)
    assert check_rank_batch({**s.ranks[0].to_file(), "pad_between_seqs": 0}, 2).names == ("cp_unpadded_offsets",)
    aligned = split_of([8, 4], 2)         # every document a multiple of 2·CP: False is right there
    assert check_rank_batch({**aligned.ranks[0].to_file(), "pad_between_seqs": 0}, 2).findings == ()


def test_per_rank_offsets_divided_from_the_real_ones_are_not_the_padded_layout():
    s = split_of([7, 5], 2)
    bad = {**s.ranks[1].to_file(), "cu_seqlens_padded_rank": s.cu_seqlens // 2}
    assert "cp_unpadded_offsets" in check_rank_batch(bad, 2).names


def test_a_prefix_reading_of_interior_padding_is_named_with_its_slots():
    s = split_of([3, 6], 2, "contiguous", strategy="next-fit", pad_documents=True)
    rb = s.ranks[0]
    assert rb.piece_ids.tolist() == [[0, 0, 0, -1, 1, 1]]
    c = check_rank_batch({**rb.to_file(), "cu_seqlens_rank": np.array([0, 3, 4, 5])}, 2, "contiguous")
    assert c.names == ("cp_interior_padding_as_tail",)
    assert "pad slot(s) [3] read as tokens, real slot(s) [5] dropped" in c.findings[0].detail


def test_a_rank_holding_another_ranks_chunks_is_not_the_scheme():
    s = split_of([8, 8], 2)
    swapped = {**s.ranks[1].to_file(), "cp_rank": 0}
    assert "cp_chunks_not_the_scheme" in check_rank_batch(swapped, 2).names


def test_the_split_checked_under_another_scheme_is_not_that_schemes_chunks():
    s = split_of([7, 5, 12], 2, "zigzag-row", context=24)
    assert "cp_chunks_not_the_scheme" in check_cp_ranks(files(s), 2, "contiguous").names


def test_labels_rolled_on_the_real_offsets_are_not_the_next_token_put_back_together():
    s = split_of([7, 5], 2)
    bad = [{**rb.to_file(), "labels": t} for rb, t in zip(s.ranks, rolled_targets(s, "real"))]
    good = [{**rb.to_file(), "labels": t} for rb, t in zip(s.ranks, rolled_targets(s, "padded"))]
    assert check_cp_ranks(bad, 2).names == ("target_is_not_the_next_token",)
    assert check_cp_ranks(good, 2).findings == ()


def test_sentinel_offsets_are_malformed():
    s = split_of([8, 8], 2)
    sentinels = np.r_[s.cu_seqlens_padded, [-1, -1, -1]]
    assert "cu_seq_lens_malformed" in check_rank_batch({**s.ranks[0].to_file(), "cu_seqlens_padded": sentinels}, 2).names


def test_the_padded_length_follows_sequence_parallelism():
    s = split_of([7, 3], 2)
    assert check_cp_ranks(files(s), 2).sound
    c = check_cp_ranks(files(s), 2, tp=4, sequence_parallel=True)     # 3 padded to 4, but lcm(4, 8) = 8 was needed
    assert "cp_document_not_padded" in c.names


@pytest.mark.parametrize("change, match", [
    (lambda fs: fs[:1], "missing \\[1\\]"),
    (lambda fs: [fs[0], fs[0]], "rank\\(s\\) \\[0\\] twice"),
    (lambda fs: [fs[0], {**fs[1], "cu_seqlens": np.array([0, 7, 11])}], "disagrees with .* on cu_seqlens"),
    (lambda fs: [fs[0], {**fs[1], "input_ids": fs[1]["input_ids"][:, :4]}], "input_ids"),
    (lambda fs: [{**f, "cp_size": 4} for f in fs], "says cp_size 4, but CP 2 was given"),
    (lambda fs: [fs[0], {**fs[1], "cp_rank": 5}], "ranks \\[0, 5\\]"),
    (lambda fs: [fs[0], {**fs[1], "input_ids": fs[1]["input_ids"].astype(float)}], "whole numbers"),
])
def test_files_that_disagree_are_refused_in_one_line(change, match):
    fs = files(split_of([7, 5], 2))
    with pytest.raises(InputError, match=match):
        check_cp_ranks(change(fs), 2)


def test_a_single_file_without_its_rank_needs_it_given():
    f = {k: v for k, v in split_of([7], 2).ranks[1].to_file().items() if k != "cp_rank"}
    with pytest.raises(InputError, match="does not say its rank"):
        check_rank_batch(f, 2)
    assert check_rank_batch(f, 2, rank=1).sound
