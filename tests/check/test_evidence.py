"""Evidence, weighed: the strongest evidence a batch carries decides its documents; harm is judged on trained positions.

The chat batches come from TRL 1.16's own SFTTrainer (dataset preparation, bfd packing, collator) on GSM8K chats
with SmolLM2's tokenizer, whose EOS (<|im_end|>) ends every chat turn; torchtune's from its PackedDataset.
"""
import io

import numpy as np
import pytest
from safetensors.numpy import save_file

import packing_core as pc
from packing_core.check import check_all_implementations, save_batch_file
from packing_core.check.evidence import TokenizerFacts, tokenizer_facts
from packing_core.cli import main

EOS = 2


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def n_chats(batch) -> int:
    return int((np.asarray(batch["position_ids"]).reshape(-1) == 0).sum())


@pytest.mark.parametrize("kind", ["packed", "bfd", "bfd_split"])
def test_trls_packed_chat_batch_is_sound_everywhere_with_smollm2s_tokenizer(trl_chat_batches, smollm2_tokenizer, kind):
    batch = trl_chat_batches[kind]
    eos = smollm2_tokenizer.eos_token_id
    turn_ends = int((np.asarray(batch["input_ids"]) == eos).sum())
    assert turn_ends > 2 * n_chats(batch)                     # every turn ends with the EOS id, not only every chat
    for check in check_all_implementations(batch, tokenizer=smollm2_tokenizer):
        assert check.sound and not check.warnings, check.format_table()
        assert check.n_documents == n_chats(batch)
        assert "eos_inside_document" in check.names
    # the EOS id given alone, with nothing to weigh it against, would have split every turn
    assert pc.check_hf_batch({"input_ids": batch["input_ids"]}, eos_ids=(eos,)).n_documents > n_chats(batch)


def test_assistant_only_labels_train_only_answers_and_the_trained_positions_follow(trl_chat_batches):
    batch = trl_chat_batches["bfd"]
    check = pc.check_hf_batch(batch)
    labels = np.asarray(batch["labels"])
    assert (labels == -100).sum() > labels.size / 4                         # prompts are masked
    assert check.trained[0, :-1].tolist() == (labels[0, 1:] != -100).tolist()   # position i predicts label i + 1


def test_trls_padded_chat_batch_is_one_example_a_row(trl_chat_batches, smollm2_tokenizer):
    batch = trl_chat_batches["padded"]
    assert "position_ids" not in batch and (np.asarray(batch["attention_mask"]) == 0).any()
    for check in check_all_implementations(batch, tokenizer=smollm2_tokenizer):
        assert check.sound, check.format_table()
        assert check.documents.decided_by == ("padding",) and check.n_documents == len(batch["input_ids"])


def test_the_readme_example_exits_0_with_the_tokenizer(trl_chat_batches, tmp_path):
    path = tmp_path / "trl.safetensors"
    save_batch_file(trl_chat_batches["packed"], path)
    code, out, err = run_cli("check", str(path), "--attn-implementation", "all", "--tokenizer", "smollm2")
    assert (code, err) == (0, "") and out.count(": SOUND") == 5, out
    assert "40 intended" not in out and "label_crosses_boundary" not in out


@pytest.mark.usefixtures("require_smollm2")
def test_the_model_run_agrees_on_trls_chat_batch(trl_chat_batches, tmp_path):
    path = tmp_path / "trl.safetensors"
    save_batch_file(trl_chat_batches["packed"], path)
    code, out, err = run_cli("check", str(path), "--model", "smollm2")
    assert (code, err) == (0, ""), out
    assert "NO LEAK" in out and "they agree" in out and out.count("same") == n_chats(trl_chat_batches["packed"])


def test_a_wrapped_stream_still_leaks_once_eos_marks_its_documents():
    from datasets import Dataset
    from trl import pack_dataset
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    docs = [[11, 12, 13, 14, 15, EOS], [21, 22, 23, EOS], [31, 32, 33, 34, EOS], [41, 42, EOS]]
    ds = pack_dataset(Dataset.from_dict({"input_ids": docs}), 8, strategy="wrapped")
    batch = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)([ds[i] for i in range(len(ds))])
    check = pc.check_hf_batch(batch, eos_ids=(EOS,))
    assert check.documents.decided_by == ("eos",) and "fixed_size_chunks" in check.names
    assert "documents_share_attention" in check.names


# ---------------------------------------------------------------- a tokenizer that did not tokenise the batch
def torchtune_batch(torchtune_packing, samples, padding_idx=0):
    PackedDataset, collate = torchtune_packing
    ds = [{"tokens": s, "labels": [-100] + s[1:]} for s in samples]
    packs = PackedDataset(ds, max_seq_len=12, padding_idx=padding_idx)
    return collate([packs[i] for i in range(len(packs))])


def test_torchtune_with_a_tokenizer_whose_eos_is_its_pad_id_gets_a_warning_not_an_error(torchtune_packing):
    batch = torchtune_batch(torchtune_packing, [[1, 11, 12, 13, EOS], [1, 21, 22, EOS]])
    assert (np.asarray(batch["tokens"])[0, -3:] == 0).all()                  # torchtune pads with 0
    other = TokenizerFacts("another tokenizer", eos_ids=(0,), pad_id=3, vocab_size=64)
    check = pc.check_hf_batch(batch, "sdpa", tokenizer=other)        # torchtune's boolean block mask: sdpa reads it
    assert check.sound and [f.name for f in check.warnings] == ["tokenizer_does_not_fit"], check.format_table()
    assert check.n_documents == 2 and check.documents.real.sum() == 9      # the pad block is no document


def test_ids_past_the_vocabulary_of_a_real_tokenizer_get_a_warning(torchtune_packing, smollm2_tokenizer):
    big = len(smollm2_tokenizer)
    batch = torchtune_batch(torchtune_packing, [[1, big + 5, big + 6, EOS], [1, big + 9, EOS]])
    check = pc.check_hf_batch(batch, tokenizer=smollm2_tokenizer)
    assert check.sound and [f.name for f in check.warnings] == ["tokenizer_does_not_fit"]
    assert f"past the {big:,} ids" in check.warnings[0].detail
    assert tokenizer_facts(smollm2_tokenizer).eos_ids == (smollm2_tokenizer.eos_token_id,)


def test_a_tokenizer_that_fits_is_silent(torchtune_packing):
    batch = torchtune_batch(torchtune_packing, [[1, 11, 12, 13, EOS], [1, 21, 22, EOS]])
    own = TokenizerFacts("its own", eos_ids=(EOS,), pad_id=0, vocab_size=64)
    assert "tokenizer_does_not_fit" not in pc.check_hf_batch(batch, tokenizer=own).names


# ---------------------------------------------------------------- harm is judged on trained positions
def wrapped(labels):
    """One row of two EOS-separated documents under an all-ones mask (TRL's wrapped packing without padding-free)."""
    return {"input_ids": np.array([[5, 6, 7, EOS, 8, 9, 10, EOS]]), "attention_mask": np.ones((1, 8), np.int64),
            "labels": np.array([labels])}


def test_a_prompt_that_reads_another_document_is_a_leak_because_the_answer_reads_the_prompt():
    batch = wrapped([-100, 6, 7, EOS, -100, -100, 10, EOS])      # document 2: prompt 8 9, answer 10 EOS
    check = pc.check_hf_batch(batch, eos_ids=(EOS,))
    leak = [f for f in check.errors if f.name == "documents_share_attention"]
    assert leak and "trained position(s) see them, first row 0 token 5" in leak[0].detail


def test_a_tail_no_trained_position_reads_is_a_warning():
    batch = wrapped([-100, 6, 7, EOS, -100, -100, -100, -100])   # document 2 is never trained (a pad-like tail)
    check = pc.check_hf_batch(batch, eos_ids=(EOS,))
    assert check.sound and [f.name for f in check.warnings] == ["untrained_tokens_share_attention"]
    assert "no trained position sees them" in check.warnings[0].detail


def test_the_same_reading_without_labels_counts_every_token_as_trained():
    batch = wrapped([0] * 8)
    del batch["labels"]
    assert pc.check_hf_batch(batch, eos_ids=(EOS,)).errors[0].name == "documents_share_attention"


def test_the_weighing_and_the_run_use_the_same_documents(tmp_path):
    batch = {"input_ids": np.array([[5, EOS, 6, 7, EOS, 8, 9, EOS]]), "position_ids": np.array([[0, 1, 2, 3, 4, 0, 1, 2]])}
    save_file(batch, str(tmp_path / "b.safetensors"))
    code, out, _ = run_cli("check", str(tmp_path / "b.safetensors"), "--eos-id", str(EOS), "--format", "json")
    import json

    first = json.loads(out)["checks"][0]
    assert code == 0 and first["documents"] == [[[0, 5], [5, 3]]] and first["evidence"] == ["position_ids"]
