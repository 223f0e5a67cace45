"""Static shapes: cu_seqlens padded to rows x cap + 1 with zero-length documents, max_seqlen fixed to the context,
and the checker and the kernels reading such a batch as the same batch."""
import dataclasses

import numpy as np
import pytest
import torch

import packing_core as pc
from packing_core.attention import attend, available_backends, packed_attention
from packing_core.attention.masks import allowed
from packing_core.check import check_all_implementations

DOCS = [[1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12], [13, 14], [15]]


def _batches(cap=3, context=8):
    plain = pc.PackedBatch.from_documents(DOCS, context, "bfd", max_docs_per_row=cap)
    static = pc.PackedBatch.from_documents(DOCS, context, "bfd", max_docs_per_row=cap, static_shapes=True)
    return plain, static


def test_cu_seqlens_are_the_real_offsets_then_the_final_offset_repeated_to_rows_times_cap_plus_one():
    plain, static = _batches()
    rows, cap, real = plain.plan.n_rows, 3, plain.cu_seqlens.tolist()
    cu = static.cu_seqlens.tolist()
    assert len(cu) == rows * cap + 1
    assert cu[: len(real)] == real                                   # the documents, untouched
    assert cu[len(real):] == [sum(map(len, DOCS))] * (len(cu) - len(real))   # zero-length documents at the end
    assert real == [0, *np.cumsum(plain.plan.piece_len).tolist()]    # built from the pieces, independently
    assert (static.max_seqlen, plain.max_seqlen) == (8, 5)           # the context, not the longest document
    assert static.cu_seqlens.dtype == torch.int32
    for name in ("input_ids", "piece_ids", "position_ids", "targets", "loss_mask"):
        assert torch.equal(getattr(static, name), getattr(plain, name)), name


def test_the_shapes_are_the_same_whatever_the_batch_holds():
    a = pc.PackedBatch.from_documents([[1] * 8, [2] * 8], 8, "bfd", max_docs_per_row=4, static_shapes=True)
    b = pc.PackedBatch.from_documents([[1, 2], [3], [4, 5, 6], [7], [8, 9], [10]], 8, "bfd", max_docs_per_row=4,
                                      static_shapes=True)
    assert a.plan.n_rows == b.plan.n_rows == 2
    assert a.cu_seqlens.shape == b.cu_seqlens.shape == (2 * 4 + 1,) and a.max_seqlen == b.max_seqlen == 8
    assert a.to_hf()["cu_seq_lens_q"].shape == b.to_hf()["cu_seq_lens_q"].shape


def test_static_shapes_need_a_cap_and_a_plan_that_meets_it():
    with pytest.raises(pc.InputError, match="needs max_docs_per_row"):
        pc.PackedBatch.from_documents(DOCS, 8, "bfd", static_shapes=True)
    crowded = pc.PackedBatch.from_documents([[1], [2], [3]], 8, "bfd")   # one row of three documents
    with pytest.raises(pc.InputError, match="holds 3 pieces, above max_docs_per_row=2"):
        crowded.with_static_shapes(2)


def test_check_reads_a_static_batch_as_sound_with_a_note_on_its_zero_length_documents():
    plain, static = _batches()
    c = pc.check_batch(static)
    assert c.sound and [f.name for f in c.findings] == ["zero_length_documents"]
    assert pc.check_batch(plain).findings == ()
    for each in check_all_implementations(static.to_hf()):
        assert each.sound and "zero_length_documents" in each.names, each.verdict


def test_check_reads_a_trainers_static_dict_as_sound_with_the_note():
    # a torchtitan/Megatron-style flattened batch: offsets padded with the final one, max length the context
    batch = {"input_ids": [[5, 6, 7, 8, 9, 10, 11]], "position_ids": [[0, 1, 2, 3, 0, 1, 2]],
             "labels": [[-100, 6, 7, 8, -100, 10, 11]],
             "cu_seq_lens_q": [0, 4, 7, 7, 7, 7], "cu_seq_lens_k": [0, 4, 7, 7, 7, 7],
             "max_length_q": 16, "max_length_k": 16}
    c = pc.check_hf_batch(batch, "flash_attention_2")
    assert c.sound and "zero_length_documents" in c.names
    note = next(f for f in c.findings if f.name == "zero_length_documents")
    assert "3 zero-length document(s)" in note.detail


def test_a_broken_offset_inside_the_real_ones_is_still_an_error():
    _, static = _batches()
    cu = static.cu_seqlens.clone()
    cu[1], cu[2] = cu[2].item(), cu[1].item()            # not rising: no padding explains it
    c = pc.check_batch(dataclasses.replace(static, cu_seqlens=cu))
    assert not c.sound and "cu_seqlens_not_monotone" in c.names


def test_the_kernels_compute_the_same_attention_from_static_offsets():
    plain, static = _batches()
    T = int(plain.cu_seqlens[-1])
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(T, 2, 8, generator=g) for _ in range(3))
    for backend in [b for b in available_backends() if b in ("segments", "padded", "varlen")]:
        real = attend(q, k, v, plain.cu_seqlens, plain.max_seqlen, backend)
        padded = attend(q, k, v, static.cu_seqlens, static.max_seqlen, backend)
        torch.testing.assert_close(padded, real, msg=backend)
    for row in range(plain.plan.n_rows):        # what varlen reads from the batch: the batch's own documents
        assert np.array_equal(packed_attention(static, "varlen").allowed(row), allowed(plain.piece_ids[row]).numpy())
