"""The guard reads the model it is attached to: a TRL run on a hybrid model stops at the first batch.

The models are transformers' own Qwen3-Next, LFM2 and Llama classes, tiny and random-init (for speed:
``verify.families_build``); the batches are the ones TRL's SFTTrainer hands them (bfd packing turns
padding-free on: ``position_ids``, ``cu_seq_lens_q/_k``, ``max_length_q/_k`` and ``seq_idx``). This
machine has none of the fast kernels (causal-conv1d, flash-linear-attention), so transformers would
refuse that batch at the first convolution; the guard says why, by layer kind, before the step runs.
"""
import warnings

import numpy as np
import pytest
import torch
from datasets import Dataset
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import DataCollatorWithFlattening, PreTrainedTokenizerFast
from trl import SFTConfig, SFTTrainer

from packing_core.attention.releases import installed_release
from packing_core.check.mixers import installed_kernels
from packing_core.integrations import PackingCheckCallback, PackingCheckError, guard
from packing_core.verify.families_build import build_tiny

EOS, PAD = 2, 0


def tokenizer():
    vocab = {"<pad>": PAD, "<bos>": 1, "<eos>": EOS, **{f"w{i}": i for i in range(3, 64)}}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="<pad>")))
    tok.add_special_tokens({"pad_token": "<pad>", "eos_token": "<eos>", "bos_token": "<bos>"})
    return tok


def dataset():
    rng = np.random.default_rng(0)
    docs = [list(rng.integers(3, 64, int(n))) + [EOS] for n in rng.integers(3, 9, 24)]
    return Dataset.from_dict({"input_ids": [[int(t) for t in d] for d in docs]})


def model(model_type: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_tiny(model_type)


def train(tmp_path, model_type: str, callback):
    args = SFTConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, packing=True,
                     packing_strategy="bfd", max_length=16, report_to="none", use_cpu=True, save_strategy="no",
                     dataloader_num_workers=0)
    trainer = SFTTrainer(model=model(model_type), args=args, train_dataset=dataset(), processing_class=tokenizer(),
                         callbacks=[callback])
    trainer.train()
    return trainer


@pytest.mark.parametrize("model_type, kinds", [("qwen3_next", "convolution REFUSED here, recurrence REFUSED here"),
                                               ("lfm2", "convolution REFUSED here")])
def test_a_trl_run_on_a_hybrid_stops_at_the_first_batch_naming_each_layer_kind(tmp_path, model_type, kinds):
    assert installed_kernels() == ()          # this machine: the reference torch code, which refuses the batch
    cb = PackingCheckCallback(batches=2)
    with pytest.raises(PackingCheckError, match="model_refuses_batch") as e:
        train(tmp_path, model_type, cb)
    assert f"({model_type}: attention SOUND, {kinds})" in str(e.value)
    assert len(cb.guard.checks) == 1 and cb.guard.model_type == model_type and not cb.guard.active


def test_the_same_trl_run_on_llama_passes(tmp_path):
    cb = PackingCheckCallback(batches=1)
    train(tmp_path, "llama", cb)
    assert cb.guard.checks[0].verdict.split("; judged for")[0] == "sdpa: SOUND (llama: attention SOUND)"
    assert cb.guard.release == installed_release()


def test_position_resets_alone_on_a_hybrid_are_a_leak_by_layer_kind():
    """DataCollatorWithFlattening's batch runs on Qwen3-Next without a kernel, and leaks: the guard stops it."""
    net = model("qwen3_next")
    batch = DataCollatorWithFlattening(return_tensors="pt")([{"input_ids": d} for d in ([5, 6, 7, 8], [9, 10, 11])])
    g = guard(net, batches=1)
    with pytest.raises(PackingCheckError, match="convolution_reads_previous_document") as e:
        net(**batch, use_cache=False)
    assert "state_crosses_documents" in str(e.value) and "recurrent state runs from each document" in str(e.value)
    g = guard(net, batches=1, on_error="warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            net(**batch, use_cache=False)                 # warned, then the (leaking) step runs
    assert g.checks[0].layer_statuses[1:] == (("convolution", "LEAKS"), ("recurrence", "LEAKS"))
    assert any("convolution LEAKS" in str(w.message) for w in caught)


def test_a_model_without_a_known_type_is_judged_for_attention_only_and_says_so():
    class Plain(torch.nn.Module):
        def forward(self, input_ids, position_ids=None):
            return input_ids

    with pytest.warns(UserWarning, match="attention layers only"):
        g = guard(Plain())
    assert g.model_type == "" and g.scope
    net = model("llama")
    net.config.model_type = "not_a_family"
    with pytest.warns(UserWarning, match="unknown model type 'not_a_family'"):
        assert guard(net).model_type == ""
