"""The tile bound: the cells a tiled kernel computes, counted from the tiles it touches."""
import numpy as np
import pytest
import torch

from packing_core import make_plan
from packing_core.analysis import costs
from packing_core.analysis.costs import BOUND_LABELS, benchmark_bounds, plan_tiles, tiled_cells
from packing_core.attention.masks import block_causal_mask
from packing_core.attention.tiles import tile_spans
from packing_core.data import synthetic_lengths
from packing_core.packing.plan import cu_seqlens_from_lengths
from packing_lab.advice.footprints import NEEDED, kernel_footprints


def brute_force_tiles(cu, tile):
    """Tiles holding at least one allowed cell of the materialised mask, padded to whole tiles."""
    mask = block_causal_mask(torch.as_tensor(cu)).numpy()
    n = -(-len(mask) // tile)
    grid = np.zeros((n * tile, n * tile), bool)
    grid[:len(mask), :len(mask)] = mask
    blocks = grid.reshape(n, tile, n, tile).transpose(0, 2, 1, 3)
    touched = blocks.any(axis=(2, 3))
    full = blocks.all(axis=(2, 3))
    return touched, full


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("tile", [16, 64, 128])
def test_tile_spans_touch_exactly_the_tiles_holding_an_allowed_cell(seed, tile):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 300, size=int(rng.integers(1, 9)))
    cu = cu_seqlens_from_lengths(lengths, np.int64)
    if cu[-1] == 0:
        cu[-1] = 1
    touched, full = brute_force_tiles(cu, tile)
    spans = tile_spans(cu, tile)
    assert np.array_equal(spans.dense() > 0, touched)
    assert np.array_equal(spans.dense() == 2, full)
    assert spans.cells == touched.sum() * tile**2


def test_tiled_cells_of_a_plan_count_its_pieces_end_to_end():
    plan = make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut")
    touched, _ = brute_force_tiles(cu_seqlens_from_lengths(plan.piece_len), 128)
    assert tiled_cells(plan, 128) == touched.sum() * 128**2 == plan_tiles(plan, 128).cells


def test_tiles_cover_every_allowed_cell_and_shrink_towards_the_causal_triangles():
    plan = make_plan(synthetic_lengths("support-tickets", n=64, seed=1), 512, "bfd")
    allowed = sum(int(n) * (int(n) + 1) // 2 for n in plan.piece_len)    # causal cells per document
    cells = [tiled_cells(plan, t) for t in (256, 128, 64, 32, 16, 1)]
    assert all(c >= allowed for c in cells)
    assert cells == sorted(cells, reverse=True)
    assert cells[-1] == allowed        # one-token tiles: exactly the causal triangles


def test_short_tickets_in_128_token_tiles_bound_flex_well_below_sum_of_squares():
    lengths = synthetic_lengths("support-tickets", n=256, seed=0)
    pad, bfd = make_plan(lengths, 512, "pad").metrics(), make_plan(lengths, 512, "bfd")
    flex_bound = pad.attention_cost_padded / tiled_cells(bfd, 128)
    square_bound = pad.attention_cost_padded / bfd.metrics().attention_cost_packed
    assert 1 < flex_bound < square_bound
    assert pad.attention_cost_padded / tiled_cells(bfd, 64) > flex_bound


def test_benchmark_bounds_judge_flex_by_its_tiles_and_label_every_bound():
    from types import SimpleNamespace
    r = SimpleNamespace(flop_ratio=13.1, backends={"segments": 0, "dense": 0, "flex": 0},
                        plans=SimpleNamespace(pad=SimpleNamespace(rows=100, attention_cost=100 * 512**2),
                                              bfd=SimpleNamespace(rows=25, tiled_cells=10 * 512**2)))
    assert benchmark_bounds(r) == {"segments": 13.1, "dense": 4.0, "flex": 10.0}
    assert set(BOUND_LABELS) >= {"padded", "segments", "dense", "flex", "varlen"}


def test_module_docstring_quotes_the_ratios_the_library_computes():
    lengths = [120, 90, 300, 40, 55, 30, 210, 65]
    pad, cut = (make_plan(lengths, 512, s).metrics() for s in ("pad", "concat-cut"))
    ratio = pad.attention_cost_padded / cut.attention_cost_packed
    assert f"(166198, {ratio:.1f})" in costs.__doc__ and f"{ratio:.1f}" == "12.6"


def test_footprints_carry_the_same_cells_as_the_bounds():
    lengths = synthetic_lengths("support-tickets", n=12, seed=0)
    fp = {f.kernel: f for f in kernel_footprints(lengths, 512, tiles=(128, 64))}
    bfd, pad = make_plan(lengths, 512, "bfd"), make_plan(lengths, 512, "pad")
    assert fp["padded SDPA"].cells == pad.metrics().attention_cost_padded
    assert fp["segments"].cells == bfd.metrics().attention_cost_packed
    assert fp["flex, 128-token tiles"].cells == tiled_cells(bfd, 128)
    assert fp["flex, 64-token tiles"].cells == tiled_cells(bfd, 64)
    assert fp["dense mask"].cells == bfd.metrics().attention_cost_padded
    for f in fp.values():
        assert f.ratio == pytest.approx(fp["padded SDPA"].cells / f.cells)
        assert f.grid.shape[0] == -(-f.tokens // f.stride) <= 256
        assert (f.grid == NEEDED).any()           # the mask's triangles are always computed


# ---------------------------------------------------------------- what a materialised mask holds
def _tiny_llama(attn: str):
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=2, vocab_size=64)
    config._attn_implementation = attn
    return config


def _transformers_mask(attn: str, position_ids: torch.Tensor, dtype=torch.bfloat16):
    """The mask transformers' own create_causal_mask builds for a batch with no attention_mask and no cache."""
    from transformers.masking_utils import create_causal_mask

    embeds = torch.zeros(*position_ids.shape, 16, dtype=dtype)
    return create_causal_mask(_tiny_llama(attn), embeds, None, None, position_ids=position_ids)


def test_padding_free_on_sdpa_flattens_the_whole_batch_into_one_mask_of_its_tokens_squared():
    """TRL's padding-free collator makes one row of the batch; transformers' sdpa mask is then (1, 1, T, T)."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    rows = make_plan([128] * 32, 512, "bfd")                     # 8 rows of 512: four documents each
    assert rows.n_rows == 8
    examples = [{"input_ids": list(range(1, 513)), "seq_lengths": [128] * 4} for _ in range(8)]
    batch = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(examples)
    assert batch["input_ids"].shape == (1, 4096)                 # the per-device batch as one row
    mask = _transformers_mask("sdpa", batch["position_ids"])
    assert tuple(mask.shape) == (1, 1, 4096, 4096) and mask.dtype == torch.bool
    assert costs.padding_free_cells(rows, 8) == mask.numel() == 16_777_216
    assert costs.attention_cells(rows, "padding-free-sdpa", batch_rows=8) == 8 * costs.attention_cells(rows, "dense")
    assert int(mask.sum()) == 32 * 128 * 129 // 2                # the documents' own causal triangles
    m = {x.kernel: x for x in costs.mask_memory(rows)}
    assert (m["padding-free-sdpa"].shape, m["padding-free-sdpa"].bytes) == ((1, 1, 4096, 4096), mask.nbytes)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_packed_rows_give_sdpa_a_boolean_mask_and_eager_a_float_one_per_row(dtype):
    rows = make_plan([100, 156, 256, 200, 312], 512, "bfd")
    positions = torch.zeros(rows.n_rows, 512, dtype=torch.long)
    for r in range(rows.n_rows):
        at = 0
        for n in rows.placed.length[rows.placed.row == r]:
            positions[r, at:at + n] = torch.arange(int(n))
            at += int(n)
    m = {x.kernel: x for x in costs.mask_memory(rows, float_bytes=dtype.itemsize)}
    sdpa, eager = _transformers_mask("sdpa", positions, dtype), _transformers_mask("eager", positions, dtype)
    assert tuple(sdpa.shape) == m["dense"].shape and sdpa.nbytes == m["dense"].bytes and sdpa.dtype == torch.bool
    assert tuple(eager.shape) == m["eager"].shape and eager.nbytes == m["eager"].bytes and eager.dtype == dtype


def test_a_flex_block_mask_holds_counts_and_indices_per_tile_not_per_cell():
    from torch.nn.attention.flex_attention import create_block_mask

    rows = make_plan([300, 212, 400, 112], 512, "bfd")
    block = create_block_mask(lambda b, h, q, k: q >= k, rows.n_rows, 1, 512, 512, device="cpu", BLOCK_SIZE=128)
    held = [block.kv_num_blocks, block.kv_indices, block.full_kv_num_blocks, block.full_kv_indices,
            block.q_num_blocks, block.q_indices, block.full_q_num_blocks, block.full_q_indices]
    m = {x.kernel: x for x in costs.mask_memory(rows, tile=128)}
    assert sum(t.nbytes for t in held) == m["flex"].bytes
    assert m["varlen"].bytes == 4 * (len(rows.piece_len) + 1)
