"""Megatron-core 0.16.1's GPT batches: ``_get_ltor_masks_and_position_ids`` (compiled from gpt_dataset.py).

Rows are cut from one token stream as ``GPTDataset.__getitem__`` cuts them
(``add_extra_token_to_sequence``: ``tokens = text[:-1]``, ``labels = text[1:]``: targets, shifted),
and the flags ``reset_position_ids`` / ``reset_attention_mask`` / ``eod_mask_loss`` decide the
mask (``[1, L, L]``, True = masked), ``loss_mask`` and positions. ``loss_mask`` decides which
targets train (with ``eod_mask_loss`` it is 0 at every EOD, whose target is the next document's
first token). Each batch is judged for two kinds of reader (see ``tests._trainers``):

- ``megatron``, Megatron's own model: its local ``DotProductAttention``
  (megatron/core/transformer/dot_product_attention.py) hands the mask to ``FusedScaleMaskSoftmax``,
  whose PyTorch path (``forward_torch_softmax``; the only one unless ``masked_softmax_fusion`` and a
  half-precision input) applies ``attention_mask_func``: ``masked_fill(mask, -10000.0)``, then
  softmax. Emulated by transformers' eager given the same mask as an additive one (-10000 where
  True): the same weights. With ``attn_mask_type=causal`` (every GPT layer spec,
  models/gpt/gpt_layer_specs.py) the fused kernel (``ScaledUpperTriangMaskedSoftmax``) and
  Transformer Engine attend causally and ignore the mask (NVIDIA/Megatron-LM #415); the checker
  warns of that (``megatron_mask_needs_unfused_softmax``);
- transformers' five implementations: the same tensors given to a transformers model
  (``tokens`` as ``input_ids``, the boolean mask as it is): sdpa reads True as *may read*, eager and
  flex add it to the scores, flash refuses a 4D mask.

The corpus once named Megatron's own paths ``eager`` (its local DotProductAttention) and ``flash_attention_2/3``
(Transformer Engine), while the checker reads those names as transformers' implementations: two conventions for one
name. Now each name means one model (tests/_trainers/__init__.py): Megatron's own is ``megatron``, which reads the
mask as ``FusedScaleMaskSoftmax.forward_torch_softmax`` applies it (megatron/core/fusions/fused_softmax.py,
``attention_mask_func``); its fused and Transformer Engine paths, which ignore the mask under attn_mask_type=causal,
are the checker's ``megatron_mask_needs_unfused_softmax`` warning.
"""
from __future__ import annotations

import numpy as np
import torch

from tests._trainers.truth import IMPLEMENTATIONS, Call, Case, hf_calls, model_kwargs
from tests._trainers.vendor import library_functions

TRAINER = "megatron"
EOD = 2
DOCS = [[11, 12, 13, EOD], [21, 22, 23, 24, 25, EOD], [31, 32, EOD], [41, 42, 43, 44, EOD], [51, 52, 53, EOD],
        [61, 62, EOD]]
WIDTH, ROWS = 12, 2
IMPLS = ("megatron", *IMPLEMENTATIONS)
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
    calls = {"megatron": Call({"input_ids": batch["tokens"], "position_ids": batch["position_ids"],
                               "attention_mask": additive, "use_cache": False}, "eager",
                              "Megatron's DotProductAttention, unfused softmax: scores masked where the mask is True"),
             **hf_calls(model_kwargs(batch, drop=("labels", "loss_mask"), rename={"tokens": "input_ids"},
                                     use_cache=False), "a transformers model given Megatron's tensors")}
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
