"""transformers' sdpa over a long row in blocks of queries: the same logits as one call, on a real LLaMA.

The model is a tiny LlamaForCausalLM with random weights (for speed); the blocks are made small so that a
512-token row runs in several of them.
"""
import numpy as np
import pytest
import torch

import packing_core.verify.chunked as chunked
from tests._support import tiny_llama


@pytest.fixture(scope="module")
def model():
    return tiny_llama(attn_implementation="sdpa")


T = 512
IDS = torch.as_tensor(np.arange(T) % 60 + 1)[None]
RESETS = torch.as_tensor(np.tile(np.arange(128), 4))[None]        # four documents of 128: a packed row


def _logits(model, blocks: bool, **kwargs):
    with torch.inference_mode(), chunked.query_blocks(blocks):
        return model(input_ids=IDS, use_cache=False, **kwargs).logits


@pytest.mark.parametrize("kind", ["position resets", "additive 4D mask"])
def test_a_row_run_in_blocks_of_queries_gives_the_logits_of_one_call(model, monkeypatch, kind):
    monkeypatch.setattr(chunked, "QUERY_BLOCK", 96)              # 512 queries: six blocks, the last one short
    if kind == "position resets":
        kwargs = {"position_ids": RESETS}
    else:
        doc = torch.arange(T) // 128
        allowed = torch.tril(torch.ones(T, T, dtype=torch.bool)) & (doc[:, None] == doc[None, :])
        kwargs = {"attention_mask": torch.where(allowed, 0.0, torch.finfo(torch.float32).min)[None, None]}
    calls = []
    original = chunked._blocked

    def counted(sdpa):
        inner = original(sdpa)

        def forward(*a, **k):
            calls.append(a[1].shape[2])
            return inner(*a, **k)
        return forward

    monkeypatch.setattr(chunked, "_blocked", counted)
    whole, blocked = _logits(model, False, **kwargs), _logits(model, True, **kwargs)
    assert calls == [T, T]                                       # both layers went through the blocks
    torch.testing.assert_close(blocked, whole, rtol=0, atol=1e-5)


def test_the_swap_is_undone_after_the_run(model):
    from transformers.modeling_utils import AttentionInterface

    before = AttentionInterface()["sdpa"]
    _logits(model, True, position_ids=RESETS)
    assert AttentionInterface()["sdpa"] is before
