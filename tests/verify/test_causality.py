"""Two checks, two properties: alone vs packed (isolation) cannot see a missing causal flag; causality can."""
import inspect
import io
import json

import numpy as np
import pytest
import torch

import packing_core as pc
from packing_core.attention import attend
from packing_core.attention.backends import varlen_kwargs
from packing_core.cli import main
from packing_core.models.tiny import tiny_model
from packing_core.verify import causality_runner, verify_model
from packing_core.verify.causality import causality_of_batch
from packing_core.verify.equivalence import model_runner


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def test_torch_varlen_attn_defaults_to_full_attention_and_the_lab_asks_for_causality():
    """torch 2.13 torch/nn/attention/varlen.py: varlen_attn(..., window_size=(-1, -1)): "(-1, -1) for full
    attention (default), (-1, 0) for causal attention"."""
    from torch.nn.attention.varlen import varlen_attn

    default = inspect.signature(varlen_attn).parameters["window_size"].default
    assert tuple(default) == (-1, -1) and "full attention (default)" in inspect.getdoc(varlen_attn)
    assert varlen_kwargs(varlen_attn)[0] == {"window_size": (-1, 0)}
    assert varlen_kwargs(varlen_attn, causal=False)[0] == {"window_size": (-1, -1)}


@pytest.mark.parametrize("backend", ["segments", "dense", "padded"])
def test_without_the_causal_flag_each_document_reads_all_of_itself(backend):
    torch.manual_seed(0)
    q, k, v = (torch.randn(9, 2, 4) for _ in range(3))
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    out = attend(q, k, v, cu, 5, backend, causal=False)
    same_document = torch.block_diag(torch.ones(4, 4), torch.ones(5, 5)).bool()   # no triangle: the future too
    expected = torch.nn.functional.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1),
                                                                v.transpose(0, 1), attn_mask=same_document)
    assert torch.allclose(out, expected.transpose(0, 1), atol=1e-6)
    assert not torch.allclose(out, attend(q, k, v, cu, 5, backend), atol=1e-3)   # the flag changes the answer


def test_flex_takes_the_causal_flag_too():
    from packing_core.attention.flex import flex_unavailable

    if flex_unavailable("cpu") is not None:
        pytest.skip(flex_unavailable("cpu"))
    torch.manual_seed(0)
    q, k, v = (torch.randn(9, 2, 8) for _ in range(3))
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    with torch.no_grad():
        flex = attend(q, k, v, cu, 5, "flex", causal=False)
    assert torch.allclose(flex, attend(q, k, v, cu, 5, "segments", causal=False), atol=1e-5)


def test_a_missing_causal_flag_is_equivalent_alone_vs_packed_and_caught_by_causality():
    broken = verify_model("tiny-rope", causal=False)
    assert broken.equivalent and broken.max_abs_diff == 0.0          # isolation cannot see it
    assert broken.future_visible and broken.causality.max_abs_diff > 0.5
    assert broken.causality.first_moved == (0, 0)       # document 0's first token already reads its future
    assert broken.causality.finding().name == "future_visible"
    fixed = verify_model("tiny-rope")
    assert fixed.equivalent and not fixed.future_visible and fixed.causality.finding() is None
    assert fixed.causality.max_abs_diff == 0.0


def test_the_mask_bug_is_caught_by_isolation_and_not_by_causality():
    """The two checks see different things: a missing document mask is causal, but not isolated."""
    r = verify_model("tiny-rope", mask="off")
    assert not r.equivalent and not r.future_visible


def test_the_hybrid_teaching_model_takes_the_flag_too():
    assert verify_model("tiny-hybrid", causal=False).future_visible
    assert not verify_model("tiny-hybrid").future_visible


def test_each_cut_is_inside_a_document_and_the_report_is_json():
    r = causality_runner(model_runner(tiny_model(), causal=False), [[1, 2, 3, 4], [5, 6], [7]])
    assert [c.position for c in r.cuts] == [1, 4]            # the middle of each document of 2+ tokens
    d = json.loads(json.dumps(r.to_dict()))
    assert d["future_visible"] and d["first_moved"] == [0, 0] and "FUTURE VISIBLE" in d["verdict"]


def test_verify_prints_causality_apart_from_isolation_and_fails_on_it():
    code, out, _ = run_cli("verify", "--causal", "off")
    iso, causal = out.split("\n\ncausality")
    assert code == 1 and "EQUIVALENT." in iso and "FUTURE VISIBLE" in causal and "FUTURE" not in iso
    code, out, _ = run_cli("verify")
    assert code == 0 and "CAUSAL." in out
    code, _, err = run_cli("verify", "--model", "smollm2", "--causal", "off")
    assert code == 2 and "causal=False runs the lab's own models" in err


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("causal", [True, False])
def test_causality_of_a_batch_on_a_transformers_model(causal):
    """A 4D block mask without its triangle: each document reads its future. transformers' own sdpa applies it."""
    from packing_core.attention.masks import block_causal_mask

    cu = np.array([0, 5, 9])
    allowed = block_causal_mask(cu).numpy()
    if not causal:
        seg = np.repeat([0, 1], [5, 4])
        allowed = seg[:, None] == seg[None, :]
    batch = {"input_ids": np.arange(3, 12)[None], "position_ids": np.r_[np.arange(5), np.arange(4)][None],
             "attention_mask": allowed[None, None]}
    check = pc.check_hf_batch(batch, "sdpa")
    r = causality_of_batch(_tiny_llama(), check)
    assert r.future_visible == (not causal) and ("mask_reads_future" in check.names) == (not causal)
    if not causal:
        assert r.first_moved == (0, 0) and r.finding().marks == ((0, 0),)
