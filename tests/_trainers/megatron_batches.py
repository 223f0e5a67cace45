"""Megatron-core 0.16.1's GPT batches: ``_get_ltor_masks_and_position_ids`` (compiled from gpt_dataset.py).

Rows are cut from one token stream as ``GPTDataset.__getitem__`` cuts them
(``add_extra_token_to_sequence``: ``tokens = text[:-1]``, ``labels = text[1:]``: targets, shifted),
and the flags ``reset_position_ids`` / ``reset_attention_mask`` / ``eod_mask_loss`` decide the
mask (``[1, L, L]``, True = masked), ``loss_mask`` and positions. ``loss_mask`` decides which
targets train. Megatron's model is not transformers', so its reading is emulated:

- eager: Megatron's local ``DotProductAttention`` (megatron/core/transformer/dot_product_attention.py)
  masks the scores where the mask is True (``attention_mask_func``: ``masked_fill(mask, -10000.0)``),
  then softmax: transformers' eager with the same mask as an additive one does exactly that;
- flash_attention_2/3: Megatron's flash path (Transformer Engine / flash-attn with
  ``attn_mask_type=causal``) ignores the mask and attends causally over each row (NVIDIA/Megatron-LM
  #415, Dao-AILab/flash-attention #161): transformers' flash path given the rows alone.

Megatron has no sdpa or flex reading of this batch: those are not in its corpus.
"""
from __future__ import annotations

import numpy as np
import torch

from tests._trainers.truth import Call, Case
from tests._trainers.vendor import library_functions

TRAINER = "megatron"
EOD = 2
DOCS = [[11, 12, 13, EOD], [21, 22, 23, 24, 25, EOD], [31, 32, EOD], [41, 42, 43, 44, EOD], [51, 52, 53, EOD],
        [61, 62, EOD]]
WIDTH, ROWS = 12, 2
IMPLS = ("eager", "flash_attention_2", "flash_attention_3")
SOURCE = "megatron-core 0.16.1: megatron/core/datasets/gpt_dataset.py _get_ltor_masks_and_position_ids, GPTDataset"


def gpt_batch(reset_position_ids: bool, reset_attention_mask: bool, eod_mask_loss: bool,
              allow_cross_document: bool = False) -> Case:
    fn = library_functions("megatron/core/datasets/gpt_dataset.py", ["_get_ltor_masks_and_position_ids"],
                           {"torch": torch})["_get_ltor_masks_and_position_ids"]
    stream = np.concatenate(DOCS)
    doc_of = np.cumsum(np.r_[0, stream[:-1] == EOD])          # the document of each stream token
    samples, docs, target_docs = [], [], []
    for i in range(ROWS):
        text = torch.as_tensor(stream[i * WIDTH:(i + 1) * WIDTH + 1]).long()
        tokens, labels = text[:-1].contiguous(), text[1:].contiguous()
        mask, loss_mask, pos = fn(tokens, EOD, reset_position_ids, reset_attention_mask, eod_mask_loss, True)
        samples.append({"tokens": tokens, "labels": labels, "loss_mask": loss_mask, "attention_mask": mask,
                        "position_ids": pos})
        docs.append(doc_of[i * WIDTH:(i + 1) * WIDTH])
        target_docs.append(doc_of[i * WIDTH + 1:(i + 1) * WIDTH + 1])
    batch = {k: torch.stack([s[k] for s in samples]) for k in samples[0]}     # default_collate
    docs, target_docs = np.array(docs), np.array(target_docs)
    trained = batch["loss_mask"].numpy() > 0
    crossing = trained & (target_docs != docs)
    additive = torch.zeros(batch["attention_mask"].shape).masked_fill(batch["attention_mask"], -10000.0)
    calls = {"eager": Call({"input_ids": batch["tokens"], "position_ids": batch["position_ids"],
                            "attention_mask": additive, "use_cache": False}, "eager",
                           "Megatron's DotProductAttention: scores masked where the mask is True"),
             **{f: Call({"input_ids": batch["tokens"], "use_cache": False}, f,
                        "Megatron's flash path: causal per row, the mask ignored") for f in IMPLS[1:]}}
    check = {"labels": "shifted", "eos_ids": (EOD,)}
    if allow_cross_document:
        check["allow_cross_document"] = True
    return Case(TRAINER, "", batch, docs, trained, crossing, calls, check, SOURCE)


CASES = {
    "default": lambda: gpt_batch(False, False, False),
    "default-deliberate_stream": lambda: gpt_batch(False, False, False, allow_cross_document=True),
    "reset_all": lambda: gpt_batch(True, True, True),
    "reset_position_ids_only": lambda: gpt_batch(True, False, True),
    "reset_without_eod_mask_loss": lambda: gpt_batch(True, True, False),
}
