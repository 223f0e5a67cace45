"""check --model: the batch as given vs each INTENDED document alone, on a real transformers LLaMA.

The model is a tiny LlamaForCausalLM with random weights (for speed: the test is about who reads
whom, which random weights show as well as trained ones).
"""
import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import packing_core as pc
from packing_core.verify import run_hf_batch

EOS = 2


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    cfg._attn_implementation = "sdpa"
    return LlamaForCausalLM(cfg).eval()


WRAPPED = {"input_ids": np.array([[5, 6, 7, EOS, 8, 9, 10, EOS]]), "attention_mask": np.ones((1, 8), np.int64)}


def test_a_wrapped_row_shows_its_leak_in_the_logits_once_eos_marks_the_documents(model):
    check = pc.check_hf_batch(WRAPPED, eos_ids=(EOS,))
    assert check.documents.per_row() == (((0, 4), (4, 4)),)
    verdict = run_hf_batch(model, check)
    assert verdict.leaks and verdict.documents[0].equivalent and not verdict.documents[1].equivalent


def test_without_an_eos_id_the_run_is_blind_exactly_where_the_static_check_is(model):
    check = pc.check_hf_batch(WRAPPED)
    assert check.sound and "no_document_boundaries" in check.names
    assert not run_hf_batch(model, check).leaks          # one intended document: compared with itself


def test_the_run_uses_the_implementation_the_check_was_for(model):
    packed_rows = {"input_ids": np.array([[5, 6, 7, 8, 9, 10]]), "position_ids": np.array([[0, 1, 2, 0, 1, 2]])}
    sdpa = run_hf_batch(model, pc.check_hf_batch(packed_rows, "sdpa"))
    eager = run_hf_batch(model, pc.check_hf_batch(packed_rows, "eager"))
    assert not sdpa.leaks and not eager.leaks and eager.attention == "eager"
    cached = run_hf_batch(model, pc.check_hf_batch(packed_rows, "sdpa", use_cache=True), use_cache=True)
    assert cached.leaks


def test_flash_attention_on_a_cpu_is_one_clear_message(model):
    with pytest.raises(ValueError, match="CUDA GPU"):
        run_hf_batch(model, pc.check_hf_batch(WRAPPED, "flash_attention_2"))
