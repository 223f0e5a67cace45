"""axolotl 0.19.0's multipack batches: ``V2BatchSamplerDataCollatorForSeq2Seq`` (loaded from its own file).

The collator numbers each packed sample in ``attention_mask`` (``(i + 1) * mask``: ``[1,1,1,2,2,0]``)
and concatenates the per-sample ``position_ids``. What reaches the model depends on the attention
implementation (axolotl/core/builders/causal.py, axolotl/utils/schemas/config.py):

- ``sample_packing_drop_attention_mask = attn_decontaminates_packing`` (True for sdpa, eager, flash,
  flex): the trainer drops the mask column, and transformers finds the documents from the
  positions (axolotl/monkeypatch/multipack.py: "In-tree HF models handle sample packing natively
  via position_ids");
- ``multipack_real_batches = not attn_supports_packing``: sdpa/eager get real batches ``[B, L]``;
  flash/flex get one row of ``B * L`` (axolotl/core/trainers/base.py, ``_create_multipack_sampler``).

A document-number mask that reaches stock transformers (the column kept, a custom trainer) is
turned into booleans by ``masking_utils``: the documents read each other unless the unpadding
is patched (axolotl PR #3796 patches ``_get_unpad_data`` for remote-code models only).
"""
from __future__ import annotations

from tests._trainers.truth import Case, documents_from_lengths, hf_calls, hf_targets, model_kwargs, smollm2_tokenizer
from tests._trainers.vendor import library_module

TRAINER = "axolotl"
SAMPLES = [[1, 11, 12, 13, 2], [1, 21, 22, 2], [1, 31, 32, 33, 34, 2], [1, 41, 42, 2], [1, 51, 52, 2]]
SOURCE = "axolotl 0.19.0: axolotl/utils/collators/batching.py V2BatchSamplerDataCollatorForSeq2Seq"


def _collate(bins, pad_to_multiple_of=None):
    batching = library_module("axolotl/utils/collators/batching.py", "axolotl_batching")
    feats = [[{"input_ids": s, "attention_mask": [1] * len(s), "labels": [-100] + s[1:],
               "position_ids": list(range(len(s)))} for s in b] for b in bins]
    collator = batching.V2BatchSamplerDataCollatorForSeq2Seq(tokenizer=smollm2_tokenizer(), padding=True,
                                                             pad_to_multiple_of=pad_to_multiple_of,
                                                             return_tensors="pt")
    return collator(feats)


def multipack(bins, *, drop_mask: bool, pad_to_multiple_of=None) -> Case:
    batch = _collate(bins, pad_to_multiple_of)
    if drop_mask:
        batch = {k: v for k, v in batch.items() if k != "attention_mask"}
    docs = documents_from_lengths([[len(s) for s in b] for b in bins], batch["input_ids"].shape[1])
    trained, crossing = hf_targets(batch["labels"], docs)
    how = "transformers' Trainer: model(**inputs), config.use_cache = TrainingArguments.use_cache (False)"
    return Case(TRAINER, "", batch, docs, trained, crossing, hf_calls(model_kwargs(batch, use_cache=False), how),
                {}, SOURCE)


CASES = {
    # sdpa/eager: real batches [2, L], the mask column dropped by the trainer
    "multipack-real_batches-mask_dropped": lambda: multipack([SAMPLES[:2], SAMPLES[2:4]], drop_mask=True),
    # flash/flex: one row of B * L, the mask column dropped
    "multipack-one_row-mask_dropped": lambda: multipack([SAMPLES], drop_mask=True),
    # the document-number mask given to stock transformers, rows padded
    "multipack-document_id_mask-padded_rows": lambda: multipack([SAMPLES[:2], SAMPLES[2:]], drop_mask=False),
    # the document-number mask given to stock transformers, one row without pads
    "multipack-document_id_mask-one_full_row": lambda: multipack([SAMPLES], drop_mask=False),
}

