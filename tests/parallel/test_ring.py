"""The ring, simulated: N ranks step by step give what the unsplit batch gives, for every document."""
import numpy as np
import pytest
import torch

from packing_core.attention.backends import attend
from packing_core.batch.packed import PackedBatch
from packing_core.models.tiny import tiny_model
from packing_core.parallel.layout import SCHEMES
from packing_core.parallel.rank import kernel_view
from packing_core.parallel.ring import ring_attention, ring_model_run, ring_steps
from packing_core.parallel.split import split_batch
from packing_core.verify.equivalence import default_tolerance


def odd_batch(seed, n=6, top=30, context=48):
    """Random documents, most of them no multiple of 2·CP, packed by bfd into rows."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, top, n)
    lengths[0] = 7                                   # TE #1930's length, in every batch
    docs = [rng.integers(1, 250, k).tolist() for k in lengths]
    return PackedBatch.from_documents(docs, context, "bfd")


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("cp", [2, 4, 8])
def test_ring_attention_put_back_equals_attention_over_the_unsplit_documents(cp, scheme):
    b = odd_batch(cp)
    s = split_batch(b, cp, scheme)
    assert (np.diff(s.cu_seqlens)[s.segment_piece >= 0] % (2 * cp) != 0).any()     # lengths that need pads
    g = torch.Generator().manual_seed(cp)
    H, D = 2, 8
    qkv = [torch.randn(s.input_ids.size, H, D, generator=g, dtype=torch.float64) for _ in range(3)]
    flat = [rb.global_index + (0 if scheme == "zigzag-document" else
                               (np.arange(rb.input_ids.shape[0]) * s.input_ids.shape[1])[:, None]) for rb in s.ranks]
    per_rank = [[t[torch.from_numpy(f.reshape(-1))] for f in flat] for t in qkv]
    outs = ring_attention(*per_rank, [kernel_view(rb) for rb in s.ranks])
    placed = torch.zeros_like(qkv[0])
    for f, o in zip(flat, outs):
        placed[torch.from_numpy(f.reshape(-1))] = o
    real = torch.from_numpy(np.flatnonzero(s.real.reshape(-1)))
    # the unsplit reference: the real tokens, document by document, in the split's own order
    cu = torch.tensor(np.r_[0, np.cumsum(np.diff(s.cu_seqlens))], dtype=torch.int32)
    want = attend(*(t[real] for t in qkv), cu, int(np.diff(s.cu_seqlens).max()), "segments")
    assert torch.allclose(placed[real], want, atol=1e-12, rtol=0)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("cp", [2, 4, 8])
def test_the_tiny_model_through_the_ring_gives_the_unsplit_logits_and_loss(cp, scheme):
    b = odd_batch(10 + cp, n=5, top=24, context=40)
    run = ring_model_run(tiny_model("tiny-rope"), b, split_batch(b, cp, scheme))
    tolerance, _ = default_tolerance(torch.float32, "segments", run.logit_scale)
    assert run.max_abs_diff <= tolerance and run.changed_top1 == 0
    assert run.loss_ring == pytest.approx(run.loss_unsplit, abs=1e-5)
    assert len(run.token_diffs) == int(b.valid.sum())


def test_each_step_reads_only_its_own_document_and_nothing_after_the_query():
    b = odd_batch(3)
    s = split_batch(b, 4, "zigzag-document")
    views = [kernel_view(rb) for rb in s.ranks]
    for step in ring_steps(s):
        q, k = views[step.rank], views[step.source]
        i, j = np.nonzero(step.mask)
        assert (q.document[i] == k.document[j]).all() and (k.position[j] <= q.position[i]).all()
        assert (q.document[i] >= 0).all() and (k.document[j] >= 0).all()


def test_zigzag_steps_take_transformer_engines_three_shapes_and_contiguous_reads_nothing_later():
    b = PackedBatch.from_documents([list(range(1, 33))], 32, "next-fit")     # one document: TE's picture
    zig = {(st.rank, st.source): st.section for st in ring_steps(split_batch(b, 4, "zigzag-document"))}
    assert all(sec == ("diagonal" if r == src else "lower-triangle" if src < r else "upper-triangle")
               for (r, src), sec in zig.items())
    cont = ring_steps(split_batch(b, 4, "contiguous"))
    assert all((st.pairs == 0) == (st.source > st.rank) for st in cont)
    work = [sum(st.pairs for st in cont if st.rank == r) for r in range(4)]
    assert work == sorted(work) and work[-1] > 2 * work[0]      # the last window reads the most


def test_reading_the_average_offsets_drops_the_seventh_token_of_a_seven_token_document():
    # TE #1929: cu_seqlens [0, 7] at CP 2 behaves as [0, 6]: the first 3 of each rank's 4 slots
    s = split_batch(PackedBatch.from_documents([list(range(1, 8))], 8, "next-fit"), 2, "zigzag-document")
    views = [kernel_view(rb, "average") for rb in s.ranks]
    assert [v.document.tolist() for v in views] == [[0, 0, 0, -1], [0, 0, 0, -1]]
    assert s.ranks[1].position_ids.tolist() == [[2, 3, 4, 5]]           # position 5, a real token, is dropped


def test_a_prefix_reading_reads_an_interior_pad_and_drops_a_real_token():
    docs = [[1, 2, 3], [4, 5, 6, 7, 8, 9]]
    s = split_batch(PackedBatch.from_documents(docs, 9, "next-fit"), 2, "contiguous", pad_documents=True)
    rank0 = s.ranks[0]
    assert rank0.piece_ids.tolist() == [[0, 0, 0, -1, 1, 1]]
    v = kernel_view(rank0, "prefix").document
    assert v[3] > 1 and v[5] == -1 and v[:3].tolist() == [0, 0, 0]      # the pad becomes a document, slot 5 is lost
