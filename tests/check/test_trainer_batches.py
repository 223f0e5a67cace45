"""Batches built by the real libraries' own code, judged for each attention implementation.

TRL 1.16's ``pack_dataset`` and ``DataCollatorForLanguageModeling``, transformers'
``DataCollatorWithFlattening``, torchtune 0.6.1's ``PackedDataset`` and ``padded_collate_packed``.
The table this file measures is the closing note of the verdicts issue.
"""
import numpy as np
import pytest
from datasets import Dataset
from transformers import DataCollatorWithFlattening
from trl import pack_dataset
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

import packing_core as pc
from packing_core.attention import IMPLEMENTATIONS
from packing_core.check import check_all_implementations, save_batch_file
from packing_core.check.files import SAVE_HINT

EOS = 2
DOCS = [[11, 12, 13, 14, 15, EOS], [21, 22, 23, EOS], [31, 32, 33, 34, EOS], [41, 42, EOS]]
FLASH = ("flash_attention_2", "flash_attention_3")
SDPA_FAMILY = ("sdpa", "eager", "flex_attention")


def trl_batch(strategy: str, padding_free: bool, seq_length: int = 8, **collator):
    ds = pack_dataset(Dataset.from_dict({"input_ids": DOCS}), seq_length, strategy=strategy)
    rows = [ds[i] for i in range(len(ds))]
    return DataCollatorForLanguageModeling(pad_token_id=0, padding_free=padding_free, **collator)(rows)


def flattening(**kw):
    return DataCollatorWithFlattening(return_tensors="pt", **kw)([{"input_ids": d} for d in DOCS])


def verdicts(batch, **kw) -> dict[str, tuple[str, ...]]:
    """Per implementation: the attention errors (a leak, a batch the kernel cannot read)."""
    return {c.attn_implementation: tuple(f.name for f in c.errors if f.name in ATTENTION_ERRORS)
            for c in check_all_implementations(batch, **kw)}


ATTENTION_ERRORS = ("documents_share_attention", "kernel_cannot_read_batch", "kernel_skips_tokens")
LEAK = ("documents_share_attention",)


def test_trl_wrapped_without_padding_free_leaks_everywhere():
    batch = trl_batch("wrapped", padding_free=False)
    assert "attention_mask" in batch and "position_ids" not in batch
    assert verdicts(batch, eos_ids=(EOS,)) == {impl: LEAK for impl in IMPLEMENTATIONS}
    assert "label_crosses_boundary" in pc.check_hf_batch(batch, eos_ids=(EOS,)).names   # labels = input_ids


def test_trl_wrapped_with_padding_free_leaks_everywhere():
    batch = trl_batch("wrapped", padding_free=True)
    assert verdicts(batch, eos_ids=(EOS,)) == {impl: LEAK for impl in IMPLEMENTATIONS}


def test_trl_wrapped_without_an_eos_id_warns_that_it_cannot_see_documents():
    check = pc.check_hf_batch(trl_batch("wrapped", padding_free=False))
    assert check.sound and "no_document_boundaries" in [f.name for f in check.warnings]


def test_flattening_without_positions_leaks_from_its_label_separators_alone():
    batch = flattening(return_position_ids=False)
    assert set(batch) == {"input_ids", "labels"}
    assert verdicts(batch) == {impl: LEAK for impl in IMPLEMENTATIONS}


def test_boundaries_only_in_cu_seq_lens_leak_under_sdpa_and_eager_not_flash():
    batch = flattening(return_position_ids=False, return_flash_attn_kwargs=True)
    assert "cu_seq_lens_q" in batch and "position_ids" not in batch
    got = verdicts(batch)
    assert {i: got[i] for i in SDPA_FAMILY} == {i: LEAK for i in SDPA_FAMILY}
    assert {i: got[i] for i in FLASH} == {i: () for i in FLASH}
    assert "leaks_under_other_implementation" in pc.check_hf_batch(batch, "flash_attention_2").names


def test_trl_bfd_padding_free_with_pads_at_position_0_is_sound_with_a_warning():
    batch = trl_batch("bfd", padding_free=True, seq_length=16, pad_to_multiple_of=32)
    assert int((batch["position_ids"] == 0).sum()) > len(DOCS) + 1          # the pads sit at position 0
    for check in check_all_implementations(batch, eos_ids=(EOS,)):
        assert check.sound, check.format_table()
        assert "pads_given_position_zero" in [f.name for f in check.warnings]
    assert pc.check_hf_batch(batch).exit_code(strict=False) == 0
    assert pc.check_hf_batch(batch).exit_code(strict=True) == 1


def test_trl_plain_padded_batches_with_completion_only_labels_are_sound_without_a_word():
    rows = [{"input_ids": d, "labels": [-100, -100] + d[2:]} for d in DOCS[:2]]
    batch = DataCollatorForLanguageModeling(pad_token_id=0)(rows)
    for check in check_all_implementations(batch):
        assert check.findings == (), check.format_table()


def test_transformers_flattening_collator_is_sound_everywhere():
    batch = flattening(return_flash_attn_kwargs=True)
    assert verdicts(batch, eos_ids=(EOS,)) == {impl: () for impl in IMPLEMENTATIONS}


def test_packed_rows_with_resetting_positions_are_sound_for_sdpa_and_leak_under_flash():
    batch = {"input_ids": np.array([[11, 12, 13, 21, 22, 23], [31, 32, 41, 42, 43, 44]]),
             "position_ids": np.array([[0, 1, 2, 0, 1, 2], [0, 1, 0, 1, 2, 3]])}
    got = verdicts(batch)
    assert {i: got[i] for i in SDPA_FAMILY} == {i: () for i in SDPA_FAMILY}
    assert {i: got[i] for i in FLASH} == {i: LEAK for i in FLASH}
    note = [f for f in pc.check_hf_batch(batch).notes if f.name == "leaks_under_other_implementation"]
    assert note and "flash_attention_2" in note[0].detail
    assert "batch size 1" in pc.check_hf_batch(batch, "flash_attention_2").errors[0].detail


def test_a_cache_switches_sdpas_packed_detection_off_but_not_flashs():
    batch = {"input_ids": [[11, 12, 13, 21, 22, 23]], "position_ids": [[0, 1, 2, 0, 1, 2]]}
    assert pc.check_hf_batch(batch, "sdpa", use_cache=True).errors[0].name == "documents_share_attention"
    assert pc.check_hf_batch(batch, "flash_attention_2", use_cache=True).sound


def torchtune_batch(torchtune_packing, split: bool, samples=None):
    PackedDataset, collate = torchtune_packing
    samples = samples or [[1, 11, 12, 13, EOS], [1, 21, 22, EOS], [1, 31, 32, 33, EOS]]
    # SFT-style labels: the first (prompt) token of every sample is masked, as torchtune's SFTDataset masks prompts
    ds = [{"tokens": s, "labels": [-100] + s[1:]} for s in samples]
    packs = PackedDataset(ds, max_seq_len=8, split_across_pack=split)
    return collate([packs[i] for i in range(len(packs))])


def test_torchtune_split_across_pack_is_sound_for_sdpa_with_a_continuation_warning(torchtune_packing):
    batch = torchtune_batch(torchtune_packing, split=True)
    assert set(batch) == {"tokens", "labels", "input_pos", "mask"} and batch["input_pos"][1, 0] > 0
    check = pc.check_hf_batch(batch)
    assert check.sound and check.format == "4D mask", check.format_table()
    assert "document_continues_from_previous_row" in [f.name for f in check.warnings]
    assert "labels read as unshifted" in check.documents.labels_reason
    assert pc.check_hf_batch(batch, "flash_attention_2").errors[0].name == "kernel_cannot_read_batch"


@pytest.mark.parametrize("impl", ["eager", "flex_attention"])
def test_torchtunes_boolean_mask_under_eager_or_flex_is_fixed_for_torchtune(torchtune_packing, impl):
    # a transformers model adds a 4D mask under eager and flex; torchtune's own model reads it with sdpa
    # (torchtune/modules/attention_utils.py _sdpa_or_flex_attention: flex only with a BlockMask)
    check = pc.check_hf_batch(torchtune_batch(torchtune_packing, split=False), impl)
    assert not check.sound and check.trainer == "torchtune"
    assert all("torchtune's own model reads this boolean mask with sdpa" in f.fix for f in check.errors)


def test_torchtune_text_completion_labels_cross_documents_once_the_recipe_shifts_them(torchtune_packing):
    PackedDataset, collate = torchtune_packing
    ds = [{"tokens": s, "labels": list(s)} for s in ([11, 12, EOS], [21, 22, 23, EOS])]   # labels = tokens
    batch = collate([PackedDataset(ds, max_seq_len=8)[0]])
    assert "label_crosses_boundary" in pc.check_hf_batch(batch).names


@pytest.mark.parametrize("kind", ["trl", "torchtune"])
def test_the_save_hint_works_on_batches_as_they_come(tmp_path, kind, torchtune_packing):
    batch = trl_batch("bfd", padding_free=True) if kind == "trl" else torchtune_batch(torchtune_packing, split=True)
    import torch  # noqa: F401  (the hint's namespace)
    from safetensors import torch as safetensors_torch  # noqa: F401

    path = tmp_path / "batch.safetensors"
    code = SAVE_HINT.split("save the batch with: ", 1)[1].replace("'batch.safetensors'", repr(str(path)))
    exec(code, {"torch": torch, "safetensors": __import__("safetensors.torch"), "batch": batch})
    loaded = pc.load_batch_file(path)
    assert pc.check_hf_batch(loaded).names == pc.check_hf_batch(batch).names
    assert save_batch_file(batch, tmp_path / "b2.safetensors") == []
