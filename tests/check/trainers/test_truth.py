"""The truth behind the trainer corpus can fail: the model run, the reference flash kernel, the library loader."""
import inspect
import itertools

import numpy as np
import pytest
import torch

from tests._trainers import case, hf_collators, megatron_batches, olmo_batches, torchtune_batches
from tests._trainers.truth import (
    Call,
    Case,
    documents_from_lengths,
    flash_reference,
    hf_calls,
    hf_targets,
    leak,
    reference_varlen,
    run,
    truth,
)
from tests._trainers.vendor import library_functions, library_module, vendor_dir


def test_the_reference_varlen_kernel_is_sdpa_under_a_block_causal_mask():
    torch.manual_seed(1)
    q, k, v = (torch.randn(7, 4, 8) for _ in range(3))
    out = reference_varlen(q, k, v, torch.tensor([0, 3, 3, 7]), torch.tensor([0, 3, 3, 7]))
    doc = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    mask = (doc[:, None] == doc[None]) & torch.ones(7, 7, dtype=torch.bool).tril()
    want = torch.nn.functional.scaled_dot_product_attention(*(x.transpose(0, 1) for x in (q, k, v)), attn_mask=mask)
    assert torch.allclose(out, want.transpose(0, 1), atol=1e-6)


def test_the_flash_reference_restores_transformers_state():
    import transformers.modeling_flash_attention_utils as fau

    before = (fau._loaded_implementation, fau._flash_varlen_fn)
    with flash_reference("flash_attention_2"):
        assert fau._flash_varlen_fn is reference_varlen
    assert (fau._loaded_implementation, fau._flash_varlen_fn) == before


_IDS = itertools.count()


def _case(batch, lengths, **kw) -> Case:
    docs = documents_from_lengths(lengths, batch["input_ids"].shape[1])
    trained, crossing = hf_targets(batch["labels"], docs)
    kwargs = {k: torch.as_tensor(v) for k, v in batch.items() if k != "labels"}
    return Case("test", f"case{next(_IDS)}", batch, docs, trained, crossing,
                hf_calls({**kwargs, "use_cache": kw.get("use_cache", False)}), {})


ROW = {"input_ids": np.array([[11, 12, 13, 21, 22, 23, 24]]), "labels": np.array([[-100, 12, 13, -100, 22, 23, 24]])}


def test_one_causal_row_over_two_documents_leaks_under_every_implementation():
    # no position ids, no mask: nothing tells any transformers path where the second document starts
    c = _case(ROW, [[3, 4]])
    for impl in ("sdpa", "eager", "flex_attention", "flash_attention_2"):
        t = truth(c, impl)
        assert not t.sound and t.leak > 0.01, (impl, t)


def test_positions_that_restart_keep_the_documents_apart_without_a_cache_only():
    batch = {**ROW, "position_ids": np.array([[0, 1, 2, 0, 1, 2, 3]])}
    assert truth(_case(batch, [[3, 4]]), "sdpa").sound
    assert truth(_case(batch, [[3, 4]]), "flash_attention_2").sound
    with_cache = _case(batch, [[3, 4]], use_cache=True)
    assert not truth(with_cache, "sdpa").sound            # a cache turns packed detection off
    assert truth(with_cache, "flash_attention_2").sound   # flash reads the positions regardless


def test_a_label_across_a_document_edge_is_unsound_even_where_attention_is_isolated():
    batch = {**ROW, "labels": ROW["input_ids"], "position_ids": np.array([[0, 1, 2, 0, 1, 2, 3]])}
    t = truth(_case(batch, [[3, 4]]), "sdpa")
    assert t.leak < 1e-4 and t.crossing and not t.sound


def test_a_trainer_kernel_that_raises_is_a_refusal():
    bad = Call({"input_ids": torch.tensor([[1, 2, 3]]), "attention_mask": torch.ones(1, 1, 2, 2)}, "sdpa")
    c = _case({"input_ids": np.array([[1, 2, 3]]), "labels": np.array([[1, 2, 3]])}, [[3]])
    c = Case(c.trainer, f"case{next(_IDS)}", c.batch, c.documents, c.trained, c.crossing, {"sdpa": bad})
    assert truth(c, "sdpa").refused


def test_the_corpus_is_built_by_the_library_collators():
    c = case(hf_collators, "flattening-flash_kwargs")
    assert {"cu_seq_lens_q", "max_length_q", "position_ids"} <= set(c.batch)
    assert c.documents.max() + 1 == len(hf_collators.DOCS)


def test_library_functions_run_the_installed_files_own_text():
    fn = library_functions("megatron/core/datasets/gpt_dataset.py", ["_get_ltor_masks_and_position_ids"],
                           {"torch": torch})["_get_ltor_masks_and_position_ids"]
    assert inspect.getsourcefile(fn).startswith(str(vendor_dir()))
    mask, loss_mask, pos = fn(torch.tensor([5, 6, 2, 7, 8]), 2, True, True, True, True)
    assert pos.tolist() == [0, 1, 2, 0, 1] and loss_mask.tolist() == [1, 1, 0, 1, 1]
    assert bool(mask[0, 3, 1]) and not bool(mask[0, 4, 3])         # True = masked: Megatron's convention
    assert case(megatron_batches, "reset_all").batch["attention_mask"].dtype == torch.bool


@pytest.mark.parametrize("impl", ["sdpa", "flash_attention_2"])
def test_a_sound_padding_free_batch_is_sound(impl):
    c = case(hf_collators, "flattening")
    assert truth(c, impl).sound and truth(c, impl).leak < 1e-4


def test_a_nan_logit_on_a_trained_position_is_a_leak_not_a_match():
    c = _case({"input_ids": ROW["input_ids"], "labels": ROW["labels"], "position_ids": np.array([[0, 1, 2, 0, 1, 2, 3]])},
              [[3, 4]])
    call = c.calls["sdpa"]
    logits = run(call).clone()
    assert leak(c, call, logits) < 1e-4
    logits[0, 5] = float("nan")                       # max(0.0, nan) is 0.0 in Python: the leak must not hide it
    assert leak(c, call, logits) == float("inf")


def test_torchtunes_own_attention_is_transformers_sdpa_given_the_same_mask():
    """torchtune's ``_sdpa_or_flex_attention`` (no CUDA: its sdpa branch; with CUDA a tensor mask takes it too) gives
    exactly what transformers' ``sdpa_attention_forward`` gives for ``mask[:, None]``: the corpus' sdpa column."""
    import logging

    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    tt = library_module("torchtune/modules/attention_utils.py", "torchtune.modules.attention_utils",
                        {"torchtune": {}, "torchtune.utils": {},
                         "torchtune.utils._import_guard": {"_SUPPORTS_FLEX_ATTENTION": False},
                         "torchtune.utils._logging": {"get_logger": logging.getLogger,
                                                      "log_once": lambda *a, **k: None}})
    mask = tt.create_block_causal_mask([torch.tensor([3, 2, 1]), torch.tensor([2, 4])])
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    theirs = tt._sdpa_or_flex_attention()(q, k, v, mask, 0.0, False)
    ours, _ = sdpa_attention_forward(torch.nn.Module(), q, k, v, mask[:, None])
    assert torch.allclose(theirs, ours.transpose(1, 2), atol=1e-6)


@pytest.mark.parametrize("impl", ["eager", "flex_attention"])
def test_transformers_eager_and_flex_add_torchtunes_boolean_mask_so_it_masks_nothing(impl):
    # integrations/flex_attention.py flex_attention_forward: score + score_mask[b][0][q][kv], no block mask;
    # modeling_llama.eager_attention_forward: attn_weights + attention_mask. A boolean mask adds 1 or 0.
    c = case(torchtune_batches, "packed")
    assert truth(c, "sdpa").sound
    t = truth(c, impl)
    assert not t.sound and t.leak > 0.01, t


def test_a_deliberate_stream_excuses_reading_across_documents_not_misreading_the_mask():
    c = case(megatron_batches, "default-deliberate_stream")
    own = truth(c, "megatron")                   # Megatron's causal stream: reads across documents, as declared
    assert own.sound and own.crossing_allowed and not own.crossing
    eager = truth(c, "eager")                    # a transformers model adds the boolean mask: reads later tokens
    assert not eager.sound and eager.leak > 0.01


def test_a_trainer_reader_is_its_own_model_and_a_transformers_name_a_transformers_model():
    c = case(olmo_batches, "doc_lens")
    own, hf = truth(c, "olmo_core"), truth(c, "flash_attention_2")
    assert own.sound is False and own.leak < 1e-4 and own.crossing      # doc_lens read: only the EOS targets cross
    assert hf.leak > 0.01                       # transformers reads no doc_lens: each row is one causal triangle
    assert c.calls["flash_attention_2"].kwargs["doc_lens"] is c.batch["doc_lens"]
