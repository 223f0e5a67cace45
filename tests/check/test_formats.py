"""Formats trainers emit: document-id masks, 4D masks of both kinds and polarities, Megatron's and OLMo-core's
batches, 3-D rotary positions, zero-length documents, TRL's keys, bfloat16 files, the save hint.

Where the emitting library is not installed (Megatron-core, OLMo-core, LLaMA-Factory) its batch is built by a
line-for-line transcription of the cited function; transformers' readings are checked against its own code
(tests/attention/test_semantics.py) and by tiny model runs here and in tests/verify/test_batch_run.py.
"""
import numpy as np
import pytest
import torch

import packing_core as pc
from packing_core._validate import InputError
from packing_core.attention import IMPLEMENTATIONS
from packing_core.check import check_all_implementations, load_batch_file, save_snippet
from packing_core.check.files import save_error_hint

EOS = 2
SDPA_FAMILY = ("sdpa", "eager", "flex_attention")
FLASH = ("flash_attention_2", "flash_attention_3")


def errors(check) -> tuple[str, ...]:
    return tuple(f.name for f in check.errors)


# ---------------------------------------------------------------- 2D masks of document numbers
def test_a_document_id_mask_is_read_as_documents_and_leaks_under_every_implementation():
    batch = {"input_ids": np.array([[5, 6, 7, 8, 9, 0]]), "attention_mask": np.array([[1, 1, 1, 2, 2, 0]]),
             "labels": np.array([[-100, 6, 7, -100, 9, -100]])}
    for check in check_all_implementations(batch):
        assert check.format == "document-id mask" and check.documents.per_row() == (((0, 3), (3, 2)),)
        assert "document_ids_in_attention_mask" in check.names
        assert errors(check) == ("documents_share_attention",), check.format_table()
        leak = check.errors[0]
        assert "cast to booleans" in leak.detail and "PR #3796" in leak.fix and "#8919" in leak.fix


def test_a_document_id_mask_without_pads_is_dropped_by_flash_which_then_reads_the_positions():
    batch = {"input_ids": np.array([[5, 6, 7, 8, 9]]), "attention_mask": np.array([[1, 1, 1, 2, 2]]),
             "position_ids": np.array([[0, 1, 2, 0, 1]])}
    got = {c.attn_implementation: errors(c) for c in check_all_implementations(batch)}
    assert got == {**{i: ("documents_share_attention",) for i in SDPA_FAMILY}, **{i: () for i in FLASH}}


# ---------------------------------------------------------------- 4D masks: kinds and polarities
def block_causal(lengths) -> np.ndarray:
    """bool [T, T] True = may read: the documents' own causal blocks (the lab's one mask rule)."""
    seg = np.repeat(np.arange(len(lengths)), lengths)
    return pc.attention.allowed(seg)


def four_d(mask) -> dict:
    T = mask.shape[-1]
    return {"input_ids": np.arange(5, 5 + T)[None], "attention_mask": mask[None, None]}


@pytest.mark.parametrize("masked", [float("-inf"), float(np.finfo(np.float16).min), -1e4, -1e9])
def test_additive_masks_with_every_masked_value_are_sound_where_they_are_added(masked):
    mask = np.where(block_causal([3, 3]), 0.0, masked).astype(np.float32)
    for check in check_all_implementations(four_d(mask), SDPA_FAMILY):
        assert check.sound and check.n_documents == 2, check.format_table()


def test_a_boolean_mask_is_read_by_sdpa_and_masks_nothing_where_it_is_added():
    batch = four_d(block_causal([3, 3]))
    got = {c.attn_implementation: errors(c) for c in check_all_implementations(batch, SDPA_FAMILY)}
    assert got == {"sdpa": (), "eager": ("documents_share_attention", "mask_reads_future"),
                   "flex_attention": ("documents_share_attention", "mask_reads_future")}
    eager = pc.check_hf_batch(batch, "eager")
    assert "masks nothing" in eager.effective.path and "finfo(dtype).min" in eager.errors[0].fix


def test_an_integer_mask_is_refused_by_sdpa_and_a_float_0_1_mask_masks_nothing():
    ints = four_d(block_causal([3, 3]).astype(np.int64))
    assert errors(pc.check_hf_batch(ints, "sdpa")) == ("kernel_cannot_read_batch",)
    floats = four_d(block_causal([3, 3]).astype(np.float32))
    assert "documents_share_attention" in errors(pc.check_hf_batch(floats, "sdpa"))


def test_true_means_masked_is_read_from_the_diagonal_and_megatron_reads_it_so():
    megatron = ~block_causal([3, 3])                           # Megatron: True = masked
    check = pc.check_hf_batch(four_d(megatron), "megatron")
    assert check.sound and check.tensors.mask_4d_info.convention == "masked", check.format_table()
    assert "mask_convention_read" in check.names
    sdpa = pc.check_hf_batch(four_d(megatron), "sdpa")          # transformers reads True = may read
    assert "documents_share_attention" in errors(sdpa) and "mask_reads_future" in errors(sdpa)


def test_a_mask_that_does_not_say_its_convention_is_asked_for_it():
    ambiguous = block_causal([3, 3])
    ambiguous[5, :] = False                                     # a pad row that reads nothing, not even itself
    mixed = np.stack([ambiguous, ~block_causal([3, 3])])[:, None]     # one row each way
    batch = {"input_ids": np.ones((2, 6), np.int64), "attention_mask": mixed}
    with pytest.raises(InputError, match="mask_convention"):
        pc.check_hf_batch(batch)
    with pytest.raises(InputError, match="mask_convention='masked'"):
        pc.check_hf_batch(four_d(block_causal([3, 3])), mask_convention="masked")
    said = pc.check_hf_batch(four_d(~block_causal([3, 3])), "megatron", mask_convention="masked")
    assert said.sound and said.tensors.mask_4d_info.decided_by == "as asked (mask_convention)"


def test_nan_is_refused_and_a_query_that_reads_nothing_is_an_error():
    mask = np.where(block_causal([3, 3]), 0.0, -np.inf).astype(np.float32)
    with pytest.raises(InputError, match="NaN"):
        pc.check_hf_batch(four_d(np.where(mask == 0, np.nan, mask)))
    mask[4, :] = -np.inf                                        # token 4 can read nothing, but token 5 reads it
    for check in check_all_implementations(four_d(mask), SDPA_FAMILY):
        assert "query_reads_nothing" in errors(check) and not check.sound


# ---------------------------------------------------------------- Megatron-core's batch
def megatron_sample(text, eod, *, reset=False, eod_mask_loss=False):
    """One sample as megatron.core.datasets.gpt_dataset.GPTDataset.__getitem__ builds it (tokens = text[:-1],
    labels = text[1:]), with _get_ltor_masks_and_position_ids transcribed line for line (create_attention_mask=True)."""
    text = np.asarray(text)
    tokens, labels = text[:-1], text[1:]
    n = tokens.size
    attention_mask = np.tril(np.ones((n, n)))[None]
    loss_mask = np.ones(n, np.float32)
    if eod_mask_loss:
        loss_mask[tokens == eod] = 0.0
    position_ids = np.arange(n)
    if reset:
        prev = 0
        for i in np.flatnonzero(tokens == eod):
            attention_mask[0, i + 1:, : i + 1] = 0
            position_ids[i + 1:] -= i + 1 - prev
            prev = i + 1
    return {"tokens": tokens, "labels": labels, "loss_mask": loss_mask, "attention_mask": attention_mask < 0.5,
            "position_ids": position_ids}


def megatron_batch(texts, **kw) -> dict:
    samples = [megatron_sample(t, EOS, **kw) for t in texts]
    return {k: np.stack([s[k] for s in samples]) for k in samples[0]}


STREAM = [[5, 6, EOS, 7, 8, 9, EOS, 10, 11], [12, 13, 14, EOS, 15, 16, 17, 18, 19]]   # 9 tokens: 8 inputs, 8 targets


def test_megatrons_default_stream_reads_across_documents_and_trains_eos_targets():
    batch = megatron_batch(STREAM)
    check = pc.check_hf_batch(batch, "megatron", eos_ids=(EOS,))
    assert check.trainer == "megatron" and check.documents.labels_mode == "shifted"
    assert set(errors(check)) == {"documents_share_attention", "label_crosses_boundary"}
    assert "eod_mask_loss=True" in next(f for f in check.errors if f.name == "label_crosses_boundary").fix
    allowed = pc.check_hf_batch(batch, "megatron", eos_ids=(EOS,), allow_cross_document=True)
    assert allowed.sound and {"cross_document_allowed", "cross_document_targets_allowed"} <= set(allowed.names)


def test_megatrons_loss_mask_decides_which_targets_train():
    batch = megatron_batch(STREAM, eod_mask_loss=True)
    assert "label_crosses_boundary" not in pc.check_hf_batch(batch, "megatron", eos_ids=(EOS,)).names


def test_megatron_with_resets_is_sound_as_megatron_reads_it_and_inverted_for_transformers():
    batch = megatron_batch(STREAM, reset=True, eod_mask_loss=True)
    check = pc.check_hf_batch(batch, "megatron", eos_ids=(EOS,))
    assert check.sound and check.n_documents == 5, check.format_table()
    sdpa = pc.check_hf_batch(batch, "sdpa", eos_ids=(EOS,))
    assert "documents_share_attention" in errors(sdpa) and "attn_implementation='megatron'" in sdpa.errors[0].fix


def test_a_rows_last_target_crosses_only_where_the_document_ends_there():
    batch = megatron_batch(STREAM)                  # each row's last target is the stream's next token, unseen
    check = pc.check_hf_batch(batch, "megatron", eos_ids=(EOS,))
    crossing = next(f for f in check.errors if f.name == "label_crosses_boundary")
    assert {(r, s) for r, s in crossing.marks} == {(0, 2), (0, 6), (1, 3)}          # the EOS -> next targets only
    ends_with_eos = megatron_batch([[5, 6, 7, 8, 9, 10, 11, EOS, 12], [13, 14, 15, 16, 17, 18, 19, 20, 21]])
    marks = {(r, s) for f in pc.check_hf_batch(ends_with_eos, "megatron", eos_ids=(EOS,)).errors
             if f.name == "label_crosses_boundary" for r, s in f.marks}
    assert marks == {(0, 7)}


def test_a_row_that_starts_with_an_eos_continues_the_document_before_it():
    # Megatron restarts positions at every sample, so a row cut just before an EOD starts at position 0 with it:
    # the row before's last target is that EOD, the end of its own document, not a new document's first token
    batch = megatron_batch([[5, 6, EOS, 7, 8, 9, 10, 11, EOS], [EOS, 12, 13, 14, EOS, 15, 16, 17, 18]], reset=True,
                           eod_mask_loss=True)
    assert batch["tokens"][1, 0] == EOS and batch["labels"][0, -1] == EOS and batch["position_ids"][1, 0] == 0
    check = pc.check_hf_batch(batch, "megatron", eos_ids=(EOS,))
    assert "label_crosses_boundary" not in check.names, check.format_table()


def test_megatrons_document_mask_is_applied_only_by_its_unfused_softmax():
    # models/gpt/gpt_layer_specs.py: attn_mask_type=causal; fusions/fused_softmax.py: the fused causal kernel
    # (ScaledUpperTriangMaskedSoftmax) takes no mask, forward_torch_softmax applies it
    reset = pc.check_hf_batch(megatron_batch(STREAM, reset=True, eod_mask_loss=True), "megatron", eos_ids=(EOS,))
    assert reset.sound and [f.name for f in reset.warnings] == ["megatron_mask_needs_unfused_softmax"]
    assert "packed_seq_params" in reset.warnings[0].fix
    plain = pc.check_hf_batch(megatron_batch(STREAM, eod_mask_loss=True), "megatron", eos_ids=(EOS,))
    assert "megatron_mask_needs_unfused_softmax" not in plain.names      # the mask keeps nothing apart: nothing lost


# ---------------------------------------------------------------- 3-D rotary positions (Qwen2-VL, Qwen3.5)
def rope(sections: int, positions) -> np.ndarray:
    return np.broadcast_to(np.asarray(positions)[None, None], (sections, 1, len(positions))).copy()


def test_three_section_positions_give_the_mask_no_text_row_and_four_sections_do():
    pos = [0, 1, 2, 3, 0, 1, 2]
    three = {"input_ids": np.arange(5, 12)[None], "position_ids": rope(3, pos)}
    four = {"input_ids": np.arange(5, 12)[None], "position_ids": rope(4, pos)}
    c3, c4 = pc.check_hf_batch(three), pc.check_hf_batch(four)
    assert c3.documents.per_row() == c4.documents.per_row() == (((0, 4), (4, 3)),)
    assert "documents_share_attention" in errors(c3) and "text positions first" in c3.errors[0].fix
    assert c4.sound and "rotary_positions_read" in c4.names and "multimodal" in c4.tensors.position_layout
    assert errors(pc.check_hf_batch(three, "flash_attention_2")) == ("documents_share_attention",)


def test_qwen2_vl_reads_rotary_positions_as_the_check_says():
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLTextModel

    torch.manual_seed(0)
    cfg = Qwen2VLTextConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                            rope_scaling={"type": "mrope", "mrope_section": [2, 1, 1]})
    cfg._attn_implementation = "sdpa"
    model = Qwen2VLTextModel(cfg).eval()
    ids = torch.arange(5, 12)[None]
    pos = [0, 1, 2, 3, 0, 1, 2]
    with torch.no_grad():
        alone = model(input_ids=ids[:, 4:], use_cache=False).last_hidden_state
        for sections in (3, 4):
            batch = {"input_ids": ids.numpy(), "position_ids": rope(sections, pos)}
            packed = model(input_ids=ids, position_ids=torch.as_tensor(batch["position_ids"]), use_cache=False)
            leaks = float((packed.last_hidden_state[:, 4:] - alone).abs().max()) > 1e-5
            assert leaks == (not pc.check_hf_batch(batch).sound), sections


# ---------------------------------------------------------------- static shapes
@pytest.mark.parametrize("cu", [[0, 5, 9, 9, 9], [0, 0, 0, 5, 9], [0, 5, 5, 9]])
def test_zero_length_documents_are_sound_with_a_note(cu):
    batch = {"input_ids": np.arange(1, 10)[None], "position_ids": np.array([[0, 1, 2, 3, 4, 0, 1, 2, 3]]),
             "cu_seq_lens_q": np.array(cu), "cu_seq_lens_k": np.array(cu), "max_length_q": 5, "max_length_k": 5}
    for check in check_all_implementations(batch):
        assert check.sound and check.n_documents == 2, check.format_table()
        assert "zero_length_documents" in [f.name for f in check.notes]


def test_pads_given_position_zero_one_by_one_get_their_cost_and_trls_fix(trl_chat_batches):
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    rows = [{"input_ids": [11, 12, 13, EOS]}, {"input_ids": [21, 22, EOS]}]
    batch = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True, pad_to_multiple_of=16)(rows)
    check = pc.check_hf_batch(batch)
    warning = next(f for f in check.warnings if f.name == "pads_given_position_zero")
    assert check.sound and "9 one-token sequences" in warning.detail and "pad_to_multiple_of" in warning.fix


# ---------------------------------------------------------------- what TRL 1.16 and OLMo-core emit
def test_trls_seq_idx_is_read_by_no_attention_and_a_short_max_length_breaks_flash(trl_chat_batches):
    batch = dict(trl_chat_batches["bfd"])
    notes = [f for f in pc.check_hf_batch(batch).notes if f.name == "signal_not_read_by_implementation"]
    assert notes and notes[0].detail.startswith("seq_idx")
    batch["max_length_q"] = batch["max_length_k"] = 8
    got = {c.attn_implementation: errors(c) for c in check_all_implementations(batch)}
    assert got == {**{i: () for i in SDPA_FAMILY}, **{i: ("max_length_too_small",) for i in FLASH}}


def olmo_core_batch() -> dict:
    """An OLMo-core instance batch with intra-document masking: doc_lens [B, max_docs] padded with 0, and
    max_doc_lens (olmo_core.data.collator.DataCollator with doc lengths from get_document_lengths)."""
    ids = np.array([[5, 6, EOS, 7, 8, 9, EOS, 10], [11, 12, 13, 14, EOS, 15, 16, 17]])
    return {"input_ids": ids, "doc_lens": np.array([[3, 4, 1], [5, 3, 0]]), "max_doc_lens": [4, 5]}


def test_olmo_cores_doc_lens_are_read_by_its_model_and_by_no_transformers_implementation():
    batch = olmo_core_batch()
    own = pc.check_hf_batch(batch, "olmo_core")
    assert own.sound and own.n_documents == 5 and own.documents.decided_by == ("doc_lens",), own.format_table()
    for check in check_all_implementations(batch):
        assert errors(check) == ("documents_share_attention",)
        assert "attn_implementation='olmo_core'" in check.errors[0].fix
        assert any(f.detail.startswith("doc_lens") for f in check.notes)


# ---------------------------------------------------------------- files
def test_bfloat16_masks_and_loss_masks_load_from_a_safetensors_file(tmp_path):
    from safetensors.torch import save_file

    mask = torch.where(torch.as_tensor(block_causal([3, 3])), 0.0, torch.finfo(torch.bfloat16).min)
    batch = {"input_ids": torch.arange(5, 11)[None], "attention_mask": mask[None, None].to(torch.bfloat16),
             "position_ids": torch.tensor([[0, 1, 2, 0, 1, 2]])}
    save_file(batch, str(tmp_path / "bf16.safetensors"))
    loaded = load_batch_file(tmp_path / "bf16.safetensors")
    assert loaded["attention_mask"].dtype == np.float32 and (loaded["attention_mask"] < -1e38).sum() == 36 - 12
    for check in check_all_implementations(loaded, SDPA_FAMILY):
        assert check.sound and check.n_documents == 2


def test_a_safetensors_header_that_lies_about_its_bytes_is_refused(tmp_path):
    import json

    header = json.dumps({"input_ids": {"dtype": "I64", "shape": [1, 1000], "data_offsets": [0, 16]}}).encode()
    path = tmp_path / "lies.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + bytes(16))
    with pytest.raises(InputError, match="does not match"):
        load_batch_file(path)


def test_plain_save_file_fails_on_trls_batch_and_the_hint_works(trl_chat_batches, tmp_path):
    from safetensors.torch import save_file

    batch = trl_chat_batches["bfd"]
    hints = []
    for entries in (batch, {k: v for k, v in batch.items() if not k.startswith("max_length")}):
        with pytest.raises((ValueError, RuntimeError)) as failed:
            save_file(entries, str(tmp_path / "plain.safetensors"))
        hints.append(save_error_hint(failed.value))
    assert "max_length_q is a Python int" in hints[0] and "shared tensor" in hints[1]
    assert all(save_snippet() in h for h in hints)
    code = save_snippet().replace("'batch.safetensors'", repr(str(tmp_path / "b.safetensors")))
    exec(code, {"torch": torch, "safetensors": __import__("safetensors.torch"), "batch": batch})
    assert pc.check_hf_batch(load_batch_file(tmp_path / "b.safetensors")).names == pc.check_hf_batch(batch).names


def test_every_implementation_is_named(tmp_path):
    assert set(IMPLEMENTATIONS) <= set(pc.attention.ATTENTION_READERS)
    assert {"megatron", "olmo_core"} <= set(pc.attention.ATTENTION_READERS)
