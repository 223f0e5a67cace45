"""The tiny transformer: seeded, packed-format, same logits under every correct backend."""
import pytest
import torch

from packing_core.batch import segment_layout
from packing_core.models.tiny import TinyConfig, TinyTransformer, rope, tiny_model


def packed_inputs(lengths=(6, 4, 6), positions="reset", seed=0):
    layout = segment_layout(list(lengths), positions)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 256, (sum(lengths),), generator=g)
    return (ids, torch.from_numpy(layout.position_ids), torch.from_numpy(layout.cu_seqlens),
            max(lengths))


def test_two_constructions_have_identical_weights():
    a, b = tiny_model("tiny-rope"), tiny_model("tiny-rope")
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), name


def test_the_seed_changes_the_weights():
    a, b = tiny_model("tiny-abs", seed=0), tiny_model("tiny-abs", seed=1)
    assert not torch.equal(a.tok_emb.weight, b.tok_emb.weight)


def test_construction_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    tiny_model("tiny-rope")
    assert torch.equal(torch.rand(3), expected)


def test_forward_maps_a_packed_row_to_logits_per_token():
    ids, pos, cu, max_len = packed_inputs()
    logits = tiny_model("tiny-rope")(ids, pos, cu, max_len)
    assert logits.shape == (16, 256)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("name", ["tiny-rope", "tiny-abs"])
@pytest.mark.parametrize("backend", ["dense", "padded"])
def test_correct_backends_give_the_segments_logits(name, backend):
    model = tiny_model(name)
    ids, pos, cu, max_len = packed_inputs()
    with torch.no_grad():
        torch.testing.assert_close(model(ids, pos, cu, max_len, backend=backend),
                                   model(ids, pos, cu, max_len, backend="segments"),
                                   atol=1e-4, rtol=1e-4)


def test_causal_only_backend_changes_later_documents():
    model = tiny_model("tiny-rope")
    ids, pos, cu, max_len = packed_inputs()
    with torch.no_grad():
        diff = (model(ids, pos, cu, max_len, backend="causal_only")
                - model(ids, pos, cu, max_len)).abs().amax(-1)
    assert diff[:6].max() < 1e-4
    assert diff[6:].max() > 0.5


def test_rope_scores_depend_only_on_relative_offsets():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(5, 2, 8, generator=g), torch.randn(5, 2, 8, generator=g)
    pos = torch.arange(5)
    scores = torch.einsum("ihd,jhd->hij", rope(q, pos), rope(k, pos))
    shifted = torch.einsum("ihd,jhd->hij", rope(q, pos + 300), rope(k, pos + 300))
    torch.testing.assert_close(shifted, scores, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(rope(q, pos + 300), rope(q, pos))


@pytest.mark.parametrize("name, moves", [("tiny-rope", False), ("tiny-abs", True)])
def test_shifting_positions_of_a_lone_document(name, moves):
    model = tiny_model(name)
    ids = torch.randint(0, 256, (12,), generator=torch.Generator().manual_seed(1))
    cu = torch.tensor([0, 12], dtype=torch.int32)
    with torch.no_grad():
        base = model(ids, torch.arange(12), cu, 12)
        shifted = model(ids, torch.arange(12) + 100, cu, 12)
    assert ((shifted - base).abs().max() > 0.1) == moves


def test_absolute_positions_past_the_table_are_rejected():
    model = TinyTransformer(TinyConfig(positions="absolute", max_positions=8))
    ids, pos, cu, max_len = packed_inputs(lengths=(10,))
    with pytest.raises(ValueError, match="max_positions"):
        model(ids, pos, cu, max_len)


def test_a_batch_dimension_is_rejected_with_the_packed_fix():
    ids, pos, cu, max_len = packed_inputs()
    with pytest.raises(ValueError, match="cu_seqlens"):
        tiny_model("tiny-rope")(ids[None], pos[None], cu, max_len)


def test_unknown_model_and_position_kinds_are_rejected():
    with pytest.raises(ValueError, match="tiny-rope"):
        tiny_model("tiny-alibi")
    with pytest.raises(ValueError, match="rope"):
        TinyConfig(positions="alibi")


@pytest.mark.cuda
def test_cuda_varlen_gives_the_segments_logits_in_bfloat16():
    model = tiny_model("tiny-rope", dtype=torch.bfloat16, device="cuda")
    ids, pos, cu, max_len = (x.cuda() if torch.is_tensor(x) else x for x in packed_inputs())
    with torch.no_grad():
        torch.testing.assert_close(model(ids, pos, cu, max_len, backend="varlen").float(),
                                   model(ids, pos, cu, max_len, backend="segments").float(),
                                   atol=0.15, rtol=0.05)
