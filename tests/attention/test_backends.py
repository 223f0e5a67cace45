"""Attention backends over packed documents: the correct ones agree, the bug leaks."""
import inspect

import pytest
import torch

from packing_core.attention import BACKENDS, attend, available_backends, block_causal_mask
from packing_core.attention.backends import varlen_kwargs
from packing_core.attention.flex import flex_unavailable
from packing_core.attention.masks import and_masks, causal, materialise, same_document, segments_from_cu

LENGTHS = [5, 3, 5, 7, 1, 3]          # repeated lengths exercise the grouped SDPA calls
FLEX = () if flex_unavailable("cpu") else ("flex",)   # needs a C++ compiler; compiles once (2 heads x 8)
CORRECT_CPU = ("segments", "dense", "padded") + FLEX
cuda = pytest.mark.cuda        # skipped without a CUDA device (conftest)


def packed_qkv(lengths=LENGTHS, heads=2, dim=8, dtype=torch.float32, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    T = sum(lengths)
    q, k, v = (torch.randn(T, heads, dim, generator=g).to(device, dtype) for _ in range(3))
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32)
    return q, k, v, cu.to(device), max(lengths)


def alone(q, k, v, cu, i):
    """Document i attended on its own: the definition every backend must reproduce."""
    a, b = int(cu[i]), int(cu[i + 1])
    x = [t[a:b].transpose(0, 1)[None] for t in (q, k, v)]
    return torch.nn.functional.scaled_dot_product_attention(*x, is_causal=True)[0].transpose(0, 1)


def test_block_causal_mask_is_one_causal_block_per_document():
    mask = block_causal_mask(torch.tensor([0, 3, 5]))
    assert mask.int().tolist() == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [0, 0, 0, 1, 0],
        [0, 0, 0, 1, 1],
    ]


def test_block_causal_mask_keeps_a_pad_tail_out_of_real_rows():
    mask = block_causal_mask(torch.tensor([0, 2]), total=4)
    assert not mask[:2, 2:].any()
    assert mask[3, 2]


def test_composed_predicates_give_the_block_causal_mask():
    cu = torch.tensor([0, 4, 6, 9])
    seg = segments_from_cu(cu)
    composed = materialise(and_masks(causal, same_document(seg)), 9)
    assert torch.equal(composed, block_causal_mask(cu))
    assert not torch.equal(materialise(causal, 9), composed)


@pytest.mark.parametrize("backend", CORRECT_CPU)
def test_correct_backend_reproduces_every_document_alone(backend):
    q, k, v, cu, max_len = packed_qkv()
    out = attend(q, k, v, cu, max_len, backend)
    for i in range(len(LENGTHS)):
        torch.testing.assert_close(out[cu[i]:cu[i + 1]], alone(q, k, v, cu, i),
                                   atol=1e-5, rtol=1e-5)


def test_segments_is_exact_for_small_batched_and_large_lone_documents():
    lengths = [40, 3, 40, 3, 7]          # x 4 heads x 64 dims: 40 runs alone, 3 and 7 batched
    q, k, v, cu, max_len = packed_qkv(lengths, heads=4, dim=64)
    out = attend(q, k, v, cu, max_len, "segments")
    for i in range(len(lengths)):
        torch.testing.assert_close(out[cu[i]:cu[i + 1]], alone(q, k, v, cu, i),
                                   atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", ["segments", "padded"])
def test_correct_backends_agree_in_bfloat16(backend):
    q, k, v, cu, max_len = packed_qkv(dtype=torch.bfloat16)
    ref = attend(q, k, v, cu, max_len, "dense")
    torch.testing.assert_close(attend(q, k, v, cu, max_len, backend), ref, atol=2e-2, rtol=2e-2)


def test_dense_with_row_boundaries_matches_one_row():
    q, k, v, cu, max_len = packed_qkv()
    rows = torch.tensor([0, 13, 24], dtype=torch.int32)   # rows end on document edges
    torch.testing.assert_close(attend(q, k, v, cu, max_len, "dense", row_offsets=rows),
                               attend(q, k, v, cu, max_len, "dense"))


def test_causal_only_leaks_into_the_second_document_but_not_the_first():
    q, k, v, cu, max_len = packed_qkv()
    bug = attend(q, k, v, cu, max_len, "causal_only")
    good = attend(q, k, v, cu, max_len, "segments")
    first, second = slice(0, int(cu[1])), slice(int(cu[1]), int(cu[2]))
    torch.testing.assert_close(bug[first], good[first])
    assert (bug[second] - good[second]).abs().max() > 0.1


def test_causal_only_leaks_only_within_its_row():
    q, k, v, cu, max_len = packed_qkv()
    rows = torch.tensor([0, 5, 24], dtype=torch.int32)    # document 1 opens row 1
    good = attend(q, k, v, cu, max_len, "segments")
    per_row = attend(q, k, v, cu, max_len, "causal_only", row_offsets=rows)
    whole = attend(q, k, v, cu, max_len, "causal_only")
    torch.testing.assert_close(per_row[5:8], good[5:8])
    assert (whole[5:8] - good[5:8]).abs().max() > 0.1


@pytest.mark.parametrize("backend", CORRECT_CPU)
def test_scale_argument_reaches_every_backend(backend):
    q, k, v, cu, max_len = packed_qkv()
    ref = attend(q, k, v, cu, max_len, "dense", scale=0.9)
    out = attend(q, k, v, cu, max_len, backend, scale=0.9)
    torch.testing.assert_close(out, ref)
    assert (out - attend(q, k, v, cu, max_len, backend)).abs().max() > 1e-3


def test_varlen_on_cpu_raises_and_names_the_backend_to_use():
    q, k, v, cu, max_len = packed_qkv()
    with pytest.raises(ValueError, match="segments"):
        attend(q, k, v, cu, max_len, "varlen")


def test_available_backends_on_cpu_exclude_varlen():
    names = available_backends("cpu")
    assert "varlen" not in names
    assert set(names) == set(BACKENDS) - {"varlen"} - ({"flex"} - set(FLEX))


def test_unknown_backend_is_rejected_with_the_choices():
    q, k, v, cu, max_len = packed_qkv()
    with pytest.raises(ValueError, match="segments"):
        attend(q, k, v, cu, max_len, "flash")


def test_cu_seqlens_that_do_not_cover_the_tokens_are_rejected():
    q, k, v, cu, max_len = packed_qkv()
    with pytest.raises(ValueError, match="cumsum"):
        attend(q, k, v, cu[:-1], max_len, "segments")


def test_padded_rejects_a_row_narrower_than_a_document():
    q, k, v, cu, max_len = packed_qkv()
    with pytest.raises(ValueError, match="max_seqlen"):
        attend(q, k, v, cu, max_len - 1, "padded")


def test_varlen_causal_switch_follows_the_installed_signature():
    def old(q, k, v, cu_q, cu_k, max_q, max_k, is_causal=False, return_aux=None):
        pass

    def new(q, k, v, cu_q, cu_k, max_q, max_k, *, return_aux=None, scale=None,
            window_size=(-1, -1)):
        pass

    assert varlen_kwargs(old) == ({"is_causal": True}, None)
    assert varlen_kwargs(new) == ({"window_size": (-1, 0)}, None)
    assert varlen_kwargs(new, 0.5) == ({"window_size": (-1, 0), "scale": 0.5}, None)
    assert varlen_kwargs(old, 0.5, head_dim=16) == ({"is_causal": True}, 2.0)


def test_installed_torch_varlen_signature_is_understood():
    varlen = pytest.importorskip("torch.nn.attention.varlen")
    kwargs, _ = varlen_kwargs(varlen.varlen_attn)
    assert set(kwargs) <= set(inspect.signature(varlen.varlen_attn).parameters)


@cuda
@pytest.mark.parametrize("backend", ["varlen", "segments", "dense", "padded"])
def test_cuda_backends_match_documents_alone(backend):
    q, k, v, cu, max_len = packed_qkv(dim=64, dtype=torch.bfloat16, device="cuda")
    out = attend(q, k, v, cu, max_len, backend)
    for i in range(len(LENGTHS)):
        torch.testing.assert_close(out[cu[i]:cu[i + 1]].float(), alone(q, k, v, cu, i).float(),
                                   atol=3e-2, rtol=3e-2)


@cuda
def test_cuda_lists_varlen_when_a_kernel_is_installed():
    assert "varlen" in available_backends("cuda")
