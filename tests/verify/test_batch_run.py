"""check --model: the batch as given vs each INTENDED document alone, on a real transformers LLaMA.

The model is a tiny LlamaForCausalLM with random weights (for speed: the test is about who reads
whom, which random weights show as well as trained ones).
"""
import numpy as np
import pytest
import torch

import packing_core as pc
from packing_core.verify import run_hf_batch
from packing_core.verify.batch_run import reconcile
from tests._support import tiny_llama

EOS = 2


@pytest.fixture(scope="module")
def model():
    return tiny_llama(attn_implementation="sdpa")


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


# ---------------------------------------------------------------- trained positions, 4D masks as given, reconciling
def test_the_run_judges_only_trained_positions(model):
    batch = dict(WRAPPED, labels=np.array([[-100, 6, 7, EOS, -100, -100, -100, -100]]))   # document 2 never trained
    check = pc.check_hf_batch(batch, eos_ids=(EOS,))
    assert check.sound and "untrained_tokens_share_attention" in check.names
    run = run_hf_batch(model, check)
    second = run.documents[1]
    assert not run.leaks and second.trained == 0 and second.untrained_max_abs_diff > run.tolerance
    assert reconcile(check, run).agree and reconcile(check, run).exit_code == 0


def llama_factory_mask(document_ids: np.ndarray, dtype=torch.float32) -> torch.Tensor:
    """LLaMA-Factory's SFTDataCollatorWith4DAttentionMask.prepare_4d_attention_mask (neat_packing with sdpa or
    eager), transcribed: 0 where a query may read a key of its own document at or before it, finfo.min elsewhere
    (pad rows read nothing)."""
    ids = torch.as_tensor(document_ids)
    bsz, seq_len = ids.shape
    expanded = ids[:, None, None, :].expand(bsz, 1, seq_len, seq_len)
    padding = torch.where(expanded != 0, 1, 0)
    same = torch.eq(expanded, expanded.transpose(-1, -2)).int() * padding
    same *= torch.tril(torch.ones((seq_len, seq_len), dtype=torch.long))
    return torch.where(same != 0, torch.tensor(0, dtype=dtype), torch.finfo(dtype).min)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_llama_factorys_float_mask_stays_additive_in_the_run(model, impl):
    ids = np.array([[5, 6, 7, 8, 9, 10, 0]])
    batch = {"input_ids": ids, "attention_mask": llama_factory_mask(np.array([[1, 1, 1, 2, 2, 2, 0]])).numpy()}
    check = pc.check_hf_batch(batch, impl)
    assert check.sound and check.documents.per_row() == (((0, 3), (3, 3)),), check.format_table()
    run = run_hf_batch(model, check)
    assert not run.leaks and reconcile(check, run).agree


def test_a_boolean_mask_under_eager_leaks_in_the_run_as_the_check_says(model):
    causal = pc.attention.allowed(np.array([0, 0, 0, 1, 1, 1]))
    batch = {"input_ids": np.array([[5, 6, 7, 8, 9, 10]]), "attention_mask": causal[None, None]}
    sdpa, eager = pc.check_hf_batch(batch, "sdpa"), pc.check_hf_batch(batch, "eager")
    assert sdpa.sound and not eager.sound
    assert not run_hf_batch(model, sdpa).leaks and run_hf_batch(model, eager).leaks


def test_where_the_run_and_the_check_disagree_the_run_decides():
    from transformers import DataCollatorWithFlattening, OPTConfig, OPTForCausalLM

    torch.manual_seed(0)      # OPT builds its mask without position_ids: resets never reach it
    cfg = OPTConfig(vocab_size=64, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
                    max_position_embeddings=64, word_embed_proj_dim=32)
    cfg._attn_implementation = "sdpa"
    opt = OPTForCausalLM(cfg).eval()
    batch = DataCollatorWithFlattening(return_tensors="np")([{"input_ids": [5, 6, 7, 8]}, {"input_ids": [9, 10, 11]}])
    check = pc.check_hf_batch(batch)
    run = run_hf_batch(opt, check)
    result = reconcile(check, run)
    assert check.sound and run.leaks and not result.agree and result.exit_code == 1
    assert "static check SOUND, but the model run LEAK" in result.line and "the run decides" in result.line


def test_a_trainers_own_reader_is_not_run_on_a_transformers_model(model):
    batch = {"input_ids": np.array([[5, 6, 7, 8]]), "doc_lens": np.array([[2, 2]]), "max_doc_lens": [2]}
    with pytest.raises(ValueError, match="its own trainer's model"):
        run_hf_batch(model, pc.check_hf_batch(batch, "olmo_core"))
