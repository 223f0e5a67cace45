"""guard() and PackingCheckCallback inside a real TRL SFTTrainer run.

The model is a tiny LlamaForCausalLM with random weights (for speed: the point is the batches
the trainer hands it, not what it learns); the tokenizer is a real ``tokenizers`` WordLevel
tokenizer of 64 ids wrapped in transformers' ``PreTrainedTokenizerFast``.
"""
import warnings

import numpy as np
import pytest
import torch
from datasets import Dataset
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import SFTConfig, SFTTrainer

import packing_core as pc
from packing_core.integrations import PackingCheckCallback, PackingCheckError, guard

EOS, PAD = 2, 0


def tokenizer():
    vocab = {"<pad>": PAD, "<bos>": 1, "<eos>": EOS, **{f"w{i}": i for i in range(3, 64)}}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="<pad>")))
    tok.add_special_tokens({"pad_token": "<pad>", "eos_token": "<eos>", "bos_token": "<bos>"})
    return tok


def tiny_model():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                      pad_token_id=PAD, eos_token_id=EOS, bos_token_id=1)
    cfg._attn_implementation = "sdpa"
    return LlamaForCausalLM(cfg)


def dataset():
    rng = np.random.default_rng(0)
    docs = [list(rng.integers(3, 64, int(n))) + [EOS] for n in rng.integers(3, 9, 24)]
    return Dataset.from_dict({"input_ids": [[int(t) for t in d] for d in docs]})


def train(tmp_path, strategy: str, callback):
    args = SFTConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, packing=True,
                     packing_strategy=strategy, max_length=16, report_to="none", use_cpu=True, logging_steps=1,
                     save_strategy="no", dataloader_num_workers=0, learning_rate=1e-3)
    trainer = SFTTrainer(model=tiny_model(), args=args, train_dataset=dataset(), processing_class=tokenizer(),
                         callbacks=[callback])
    trainer.train()
    return trainer


def test_trl_bfd_padding_free_passes_the_callback(tmp_path):
    cb = PackingCheckCallback(batches=2)
    train(tmp_path, "bfd", cb)
    assert len(cb.guard.checks) == 2 and all(c.sound for c in cb.guard.checks)
    assert cb.guard.checks[0].format == "padding-free" and not cb.guard.active


def test_trl_wrapped_packing_is_reported_by_the_callback(tmp_path):
    with pytest.raises(PackingCheckError, match="documents_share_attention"):
        train(tmp_path, "wrapped", PackingCheckCallback(batches=2))


def test_guard_warns_and_removes_itself_after_n_batches():
    model = tiny_model()
    g = guard(model, tokenizer(), batches=2, on_error="warn")
    leaking = {"input_ids": torch.tensor([[5, 6, EOS, 7, 8, 9]]), "attention_mask": torch.ones(1, 6, dtype=torch.long)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            model(**leaking, use_cache=False)
    assert len(g.checks) == 2 and not g.active
    assert sum("documents_share_attention" in str(w.message) for w in caught) == 2


def test_guard_reads_the_cache_the_call_will_use():
    model = tiny_model()                      # LlamaConfig defaults to use_cache=True
    g = guard(model, batches=1, on_error="warn")
    packed = {"input_ids": torch.tensor([[5, 6, 7, 8, 9, 10]]), "position_ids": torch.tensor([[0, 1, 2, 0, 1, 2]])}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model(**packed)                        # no use_cache given: the config's True, so sdpa drops the packing
    assert g.checks[0].use_cache and "documents_share_attention" in g.checks[0].names
    assert pc.guard is guard


def test_guard_refuses_a_bad_setting():
    with pytest.raises(ValueError, match="on_error"):
        guard(tiny_model(), on_error="ignore")


def test_the_guard_says_packing_is_off_when_no_batch_carries_a_boundary(tmp_path):
    cb = PackingCheckCallback(batches=2, on_error="warn")
    args = SFTConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, packing=False,
                     max_length=16, report_to="none", use_cpu=True, save_strategy="no", dataloader_num_workers=0)
    trainer = SFTTrainer(model=tiny_model(), args=args, train_dataset=dataset(), processing_class=tokenizer(),
                         callbacks=[cb])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    assert not cb.summary.packing_on and cb.summary.line.startswith("packing is off")
    assert any("packing is off" in str(w.message) for w in caught)


def test_the_guard_summarises_a_packed_run(tmp_path):
    cb = PackingCheckCallback(batches=2)
    train(tmp_path, "bfd", cb)
    assert cb.summary.packing_on and cb.summary.fill > 0.9 and cb.summary.documents_per_row > 1
