"""The verdict knows the model: every layer that mixes tokens, judged from the families table.

The batches are built by the trainers' own collators (TRL 1.16's padding-free
``DataCollatorForLanguageModeling``, transformers' ``DataCollatorWithFlattening``); what each
family does with them is the measured table (``attention/families_table.json``), whose rows a
test of its own rebuilds from the real library.
"""
import importlib.util

import numpy as np
import pytest

import packing_core as pc
from packing_core._validate import InputError
from packing_core.check import SCOPE_NOTE, check_all_implementations, check_hf_batch
from packing_core.check.mixers import installed_kernels

DOCS = [[11, 12, 13, 14, 15, 16, 17], [21, 22, 23, 24, 25, 26, 27, 28, 29], [31, 32, 33, 34, 35]]
BOTH_KERNELS = ("causal-conv1d", "flash-linear-attention")


def numpy_batch(batch) -> dict:
    return {k: v.numpy() if hasattr(v, "numpy") else v for k, v in batch.items()}


@pytest.fixture(scope="module")
def trl_batch():
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    return numpy_batch(DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)([{"input_ids": d}
                                                                                          for d in DOCS]))


@pytest.fixture(scope="module")
def flat_batch():
    from transformers import DataCollatorWithFlattening

    return numpy_batch(DataCollatorWithFlattening(return_tensors="pt")([{"input_ids": d} for d in DOCS]))


def test_position_resets_alone_leak_through_the_hybrid_layers_by_kind(flat_batch):
    qwen = check_hf_batch(flat_batch, model_type="qwen3_next", kernels=BOTH_KERNELS)
    assert qwen.names[:2] == ("convolution_reads_previous_document", "state_crosses_documents")
    assert qwen.layer_statuses == (("attention", "SOUND"), ("convolution", "LEAKS"), ("recurrence", "LEAKS"))
    # both mark every token of documents 2 and 3 (the ones read through them), none of document 1
    assert qwen.findings[0].marks == qwen.findings[1].marks == tuple((0, t) for t in range(7, 21))
    assert "`Qwen3NextGatedDeltaNet`" in qwen.findings[1].detail and "12 trained position(s)" in qwen.findings[1].detail
    lfm2 = check_hf_batch(flat_batch, model_type="lfm2")
    assert lfm2.verdict.split("; judged for")[0] == ("sdpa: 1 ERROR(S): convolution_reads_previous_document "
                            "(lfm2: attention SOUND, convolution LEAKS)")
    assert check_hf_batch(flat_batch).sound               # attention alone isolates every document


def test_trls_padding_free_batch_is_refused_without_the_kernels_and_sound_with_them(trl_batch):
    here = check_hf_batch(trl_batch, model_type="qwen3_next", kernels=())
    assert here.names[0] == "model_refuses_batch"
    assert here.layer_statuses[1:] == (("convolution", "REFUSED here"), ("recurrence", "REFUSED here"))
    assert "causal-conv1d" in here.errors[0].detail and "flash-linear-attention" in here.errors[0].detail
    assert "TRL's padding-free batch already carries seq_idx" in here.errors[0].fix        # the trainer's fix
    gpu = check_hf_batch(trl_batch, model_type="qwen3_next", kernels=BOTH_KERNELS)
    assert gpu.sound and gpu.layer_statuses[1:] == (("convolution", "SOUND"), ("recurrence", "SOUND"))
    half = check_hf_batch(trl_batch, model_type="qwen3_next", kernels=("causal-conv1d",))
    assert half.layer_statuses[1:] == (("convolution", "SOUND"), ("recurrence", "REFUSED here"))
    lfm2 = check_hf_batch(trl_batch, model_type="lfm2", kernels=())
    assert lfm2.names[0] == "model_refuses_batch"


@pytest.mark.parametrize("collator", ["trl_batch", "flat_batch"])
def test_a_dense_model_whose_mask_sees_the_resets_stays_sound(collator, request):
    batch = request.getfixturevalue(collator)
    for c in check_all_implementations(batch, ("sdpa", "eager", "flex_attention"), model_type="llama"):
        assert c.sound and c.layer_statuses == (("attention", "SOUND"),), c.format_table()


@pytest.mark.parametrize("model_type", ["roberta", "opt", "bert", "mpt"])
def test_a_mask_call_without_position_ids_leaks_under_sdpa_eager_and_flex(flat_batch, model_type):
    checks = check_all_implementations(flat_batch, ("sdpa", "eager", "flex_attention", "flash_attention_2"),
                                       model_type=model_type)
    for c in checks[:3]:
        assert c.errors[0].name == "mask_ignores_position_resets", c.format_table()
        # beside it, only what the family's own code adds: RoBERTa numbers positions from padding_idx + 1, MPT runs eager
        assert set(c.names[1:]) <= {"logits_differ_beyond_mixers", "implementation_not_offered"}, c.format_table()
        assert "without position_ids" in c.errors[0].detail and "packed detection off" in c.errors[0].detail
        assert "4D block-causal attention_mask" in c.errors[0].fix or "pad instead" in c.errors[0].fix
    assert "mask_ignores_position_resets" not in checks[3].names     # flash reads kwargs, not the mask


def test_the_fix_silences_each_new_finding(flat_batch, trl_batch):
    """Each finding fires on its bug and is silent on the fix: a 4D block mask, the kernels, one row per document."""
    from packing_core.attention.masks import block_causal_mask

    allowed = block_causal_mask(np.array([0, 7, 16, 21])).numpy()
    masked = dict(flat_batch, attention_mask=np.where(allowed, 0.0, np.finfo(np.float32).min)[None, None])
    assert "mask_ignores_position_resets" not in check_hf_batch(masked, model_type="roberta").names
    assert check_hf_batch(trl_batch, model_type="lfm2", kernels=BOTH_KERNELS).sound
    ids = np.zeros((3, 9), np.int64)
    for r, d in enumerate(DOCS):
        ids[r, :len(d)] = d
    padded = {"input_ids": ids, "attention_mask": (ids != 0).astype(np.int64)}
    assert check_hf_batch(padded, model_type="qwen3_next", kernels=()).sound     # one document per row


def test_boundaries_rederived_from_an_all_ones_mask_leak_even_with_the_kernel(trl_batch):
    """cu_seq_lens of [0, T] (what an all-ones attention_mask gives: flash-linear-attention #838) reach the
    recurrence's kernel, which then runs across the documents."""
    from transformers.modeling_flash_attention_utils import _get_unpad_data

    T = trl_batch["input_ids"].shape[1]
    import torch
    _, cu, longest = _get_unpad_data(torch.ones(1, T, dtype=torch.long))
    broken = dict(trl_batch, cu_seq_lens_q=cu.numpy(), cu_seq_lens_k=cu.numpy(), max_length_q=int(longest),
                  max_length_k=int(longest))
    c = check_hf_batch(broken, model_type="qwen3_next", kernels=BOTH_KERNELS)
    assert c.layer_statuses[1:] == (("convolution", "SOUND"), ("recurrence", "LEAKS"))
    assert "do not start a sequence at every document" in c.errors[0].detail


def test_allowed_cross_document_reading_turns_the_mixer_leaks_into_notes(flat_batch):
    c = check_hf_batch(flat_batch, model_type="qwen3_next", allow_cross_document=True)
    assert c.sound and {"convolution_reads_previous_document", "state_crosses_documents"} <= set(c.names)


def test_flattening_gets_the_collators_own_fix(flat_batch):
    c = check_hf_batch(flat_batch, model_type="lfm2")
    assert "return_seq_idx=True" in c.errors[0].fix


def test_without_a_model_type_the_verdict_covers_attention_only_and_says_so():
    c = check_hf_batch({"input_ids": [[5, 6, 7, 8]], "position_ids": [[0, 1, 0, 1]]})
    assert c.model_type == "" and c.layer_statuses == () and c.verdict.startswith("sdpa: SOUND; judged for")
    assert "attention layers only" in SCOPE_NOTE and c.to_dict()["layers"] == {}


def test_an_unknown_or_unmeasured_model_type_is_refused_in_one_line(flat_batch):
    with pytest.raises(InputError, match=r"unknown model type 'nope'.*the lab knows the \d+ families.*"
                                         r"--list-model-types") as e:
        check_hf_batch(flat_batch, model_type="nope")
    assert "\n" not in str(e.value) and len(str(e.value)) < 250
    with pytest.raises(InputError, match="could not be measured here"):
        check_hf_batch(flat_batch, model_type="gemma3")
    with pytest.raises(InputError, match="unknown kernel"):
        check_hf_batch(flat_batch, model_type="lfm2", kernels=("triton",))


def test_an_alias_is_judged_as_its_family(flat_batch):
    assert check_hf_batch(flat_batch, model_type="exaone").model_type == "llama"


def test_installed_kernels_are_the_packages_that_import(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "fla" else real(name, *a))
    assert installed_kernels() == ("flash-linear-attention",)


def test_the_packed_batch_of_the_lab_is_judged_too():
    batch = pc.PackedBatch.from_documents([[5, 6, 7], [8, 9]], 8, "next-fit")
    assert pc.check_batch(batch, model_type="lfm2", kernels=()).names == ("convolution_reads_previous_document",)
