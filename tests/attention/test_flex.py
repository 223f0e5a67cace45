"""The flex backend: its block mask is torch's, built without a T x T predicate; its output is dense's."""
import logging

import numpy as np
import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask

from packing_core.attention import attend, available_backends, flex
from packing_core.attention.flex import block_mask_from_cu, compile_records, document_mask_mod, flex_unavailable

needs_flex = pytest.mark.skipif(flex_unavailable("cpu") is not None, reason=str(flex_unavailable("cpu")))
HEADS, DIM = 2, 8     # the shape class test_attention.py compiles too: one compile per test process


def random_cu(rng, total, docs):
    """Random boundaries over ``total`` tokens, empty documents included."""
    cuts = np.sort(rng.integers(0, total + 1, size=docs - 1))
    return np.concatenate([[0], cuts, [total]]).astype(np.int64)


def ordered(num, idx):
    """FlexAttention's (count, indices) pair as the lists it means; entries past the count are unused."""
    return [tuple(row[:n]) for row, n in zip(idx[0, 0].tolist(), num[0, 0].tolist())]



@pytest.fixture
def no_compiler():
    """Inductor searching only for a compiler that is not there (its own patch: undone exactly)."""
    from torch._inductor import config
    with config.patch({"cpp.cxx": (None, "no-such-c++-compiler")}):
        yield

CASES = [(seed, total, tile) for seed, (total, tile) in enumerate(
    [(1, 128), (5, 4), (127, 128), (128, 128), (129, 128), (700, 128), (700, 64), (1000, 32),
     (333, 16), (64, 64), (2048, 128), (97, 8)])]


@pytest.mark.parametrize("seed,total,tile", CASES)
def test_block_mask_from_cu_equals_create_block_mask_with_the_document_mask_mod(seed, total, tile):
    rng = np.random.default_rng(seed)
    cu = random_cu(rng, total, int(rng.integers(1, 12)))
    ids = torch.repeat_interleave(torch.arange(len(cu) - 1), torch.from_numpy(np.diff(cu)))
    ref = create_block_mask(document_mask_mod(ids), 1, 1, total, total, device="cpu", BLOCK_SIZE=tile)
    ours = block_mask_from_cu(torch.from_numpy(cu), tile)
    assert ours.seq_lengths == ref.seq_lengths and ours.BLOCK_SIZE == ref.BLOCK_SIZE
    for side in ("kv", "full_kv", "q", "full_q"):
        assert ordered(getattr(ours, f"{side}_num_blocks"), getattr(ours, f"{side}_indices")) == \
            ordered(getattr(ref, f"{side}_num_blocks"), getattr(ref, f"{side}_indices")), side


def test_block_mask_is_built_without_calling_the_mask_mod():
    calls = []

    def counting(b, h, q, k):
        calls.append(1)
        return q >= k
    block_mask_from_cu(torch.tensor([0, 300, 1000]), 64, mask_mod=counting)
    assert calls == []


def test_block_mask_of_a_million_tokens_needs_only_its_tiles():
    # A T x T predicate would be 10**12 cells; the tile grid is 1,024 x 1,024.
    cu = torch.tensor([0, 300_000, 700_000, 2**20])
    bm = block_mask_from_cu(cu, 1024)
    assert bm.kv_indices.shape == (1, 1, 1024, 1024)
    # every query tile reads back to the start of its first document, and no further
    first = bm.kv_indices[0, 0, :, 0].tolist()
    assert first[0] == 0 and first[400] == 300_000 // 1024 and first[-1] == 700_000 // 1024


def test_pad_tail_and_extra_tile_rows_compute_nothing():
    bm = block_mask_from_cu(torch.tensor([0, 5]), 4, total=12, grid=5)
    assert bm.kv_num_blocks[0, 0].tolist() == [1, 2, 0, 0, 0]      # token 4 (tile 1) reads back to token 0
    assert bm.full_kv_num_blocks[0, 0].tolist() == [0, 0, 0, 0, 0]


@needs_flex
@pytest.mark.parametrize("seed,total,docs", [(0, 1, 1), (1, 8, 3), (2, 130, 4), (3, 300, 9), (4, 700, 3)])
def test_flex_equals_dense_on_random_cu_seqlens(seed, total, docs):
    rng = np.random.default_rng(seed)
    cu = torch.from_numpy(random_cu(rng, total, docs)).to(torch.int32)
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(total, HEADS, DIM, generator=g) for _ in range(3))
    longest = int((cu[1:] - cu[:-1]).max())
    out = attend(q, k, v, cu, longest, "flex")
    assert out.shape == q.shape
    torch.testing.assert_close(out, attend(q, k, v, cu, longest, "dense"), atol=1e-5, rtol=1e-5)


@needs_flex
def test_a_new_length_reuses_the_compiled_kernel_and_only_the_first_call_says_it_compiles(monkeypatch, caplog):
    from torch._dynamo.utils import counters
    monkeypatch.setattr(flex, "_records", {})     # as if this process had not compiled the class yet
    caplog.set_level(logging.WARNING, logger="packing_core.attention.flex")
    q = torch.randn(200, HEADS, DIM)
    attend(q, q, q, torch.tensor([0, 120, 200]), 120, "flex")
    graphs = counters["stats"]["unique_graphs"]
    for total in (77, 450):
        x = torch.randn(total, HEADS, DIM)
        attend(x, x, x, torch.tensor([0, total // 2, total]), total, "flex")
    assert counters["stats"]["unique_graphs"] == graphs                 # no recompilation
    said = [r.getMessage() for r in caplog.records]
    assert sum("compiling FlexAttention" in m for m in said) == 1
    assert any(m.startswith("flex: compiled in ") for m in said)
    (record,) = compile_records()
    assert (record.device, record.heads, record.head_dim, record.tile) == ("cpu", HEADS, DIM, 128)
    assert record.seconds > 0



@needs_flex
def test_a_second_shape_class_compiles_beside_the_first():
    # Each class is a first compile of its own (a recompile of a shared one failed to build on CPU).
    cu = torch.tensor([0, 50, 130], dtype=torch.int32)
    for heads, dim in ((HEADS, DIM), (3, DIM)):
        q, k, v = (torch.randn(130, heads, dim) for _ in range(3))
        torch.testing.assert_close(attend(q, k, v, cu, 80, "flex"), attend(q, k, v, cu, 80, "dense"),
                                   atol=1e-5, rtol=1e-5)

def test_without_a_cxx_compiler_flex_is_unavailable_in_one_line_and_the_rest_works(no_compiler):
    reason = flex_unavailable("cpu")
    assert reason is not None and "\n" not in reason
    assert "C++ compiler" in reason and "no-such-c++-compiler" in reason and "segments" in reason
    assert "flex" not in available_backends("cpu") and "segments" in available_backends("cpu")
    q = torch.randn(6, HEADS, DIM)
    cu = torch.tensor([0, 2, 6], dtype=torch.int32)
    with pytest.raises(ValueError, match="no C\\+\\+ compiler"):
        attend(q, q, q, cu, 4, "flex")
    assert attend(q, q, q, cu, 4, "segments").shape == q.shape


@needs_flex
def test_flex_on_cpu_refuses_a_backward_pass_in_one_line():
    q = torch.randn(10, HEADS, DIM, requires_grad=True)
    with pytest.raises(ValueError, match="no backward pass on CPU.*segments"):
        attend(q, q, q, torch.tensor([0, 4, 10]), 6, "flex")
    with torch.no_grad():
        assert attend(q, q, q, torch.tensor([0, 4, 10]), 6, "flex").shape == q.shape


@pytest.mark.cuda
def test_flex_on_cuda_equals_dense_in_bfloat16():
    if flex_unavailable("cuda"):
        pytest.skip(flex_unavailable("cuda"))
    rng = np.random.default_rng(7)
    cu = torch.from_numpy(random_cu(rng, 900, 7)).to(torch.int32).cuda()
    q, k, v = (torch.randn(900, 4, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    longest = int((cu[1:] - cu[:-1]).max())
    torch.testing.assert_close(attend(q, k, v, cu, longest, "flex"), attend(q, k, v, cu, longest, "dense"),
                               atol=2e-2, rtol=2e-2)
