"""Which trainer a batch's shape names, and the fix for that trainer: the concrete line of each finding.

A rule's fix (``check.rules``) is general; where the keys and tensors of a batch identify the
trainer that built it, the finding carries the change to make in that trainer instead:

- ``trl``: one flattened row with ``position_ids``, ``cu_seq_lens_q/_k`` and ``seq_idx`` (TRL 1.16's
  ``DataCollatorForLanguageModeling(padding_free=True)``; transformers' ``DataCollatorWithFlattening``
  with ``return_seq_idx`` looks the same);
- ``flattening``: one flattened row with ``position_ids`` and no ``seq_idx`` (``DataCollatorWithFlattening``),
  an all-ones ``attention_mask`` beside it or not;
- ``padded``: a 2D mask of 1s and 0s (TRL without padding-free, transformers' padding collators);
- ``torchtune``: ``tokens``, ``input_pos`` and ``mask``; ``megatron``: ``tokens`` and ``loss_mask``;
- ``olmo_core``: ``doc_lens``; ``document_ids``: a 2D mask of document numbers (axolotl's multipack,
  LLaMA-Factory's ``neat_packing``, functionary).

    >>> import numpy as np
    >>> batch_trainer({"tokens", "labels", "loss_mask", "position_ids"}, BatchTensors(np.zeros((1, 2), int)))
    'megatron'
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from packing_core.attention.semantics import FLASH, EffectiveAttention
from packing_core.attention.tensors import BatchTensors

TRAINERS = ("trl", "flattening", "padded", "torchtune", "megatron", "olmo_core", "document_ids", "")

_WRAPPED = ("Pack whole documents: TRL packing_strategy='bfd', Megatron reset_attention_mask=True with "
            "reset_position_ids=True. TRL's 'bfd' is padding-free and keeps documents whole, where 'wrapped' cuts the "
            "stream; if reading across documents is deliberate (a pretraining stream), say so with "
            "--allow-cross-document.")
_DOC_IDS = ("Turn the document numbers into position_ids that restart per document, and drop the attention_mask. "
            "axolotl: use a release with PR #3796 (multipack reads position_ids / cu_seqlens on every attention "
            "backend); LLaMA-Factory: neat_packing with flash_attention_2 relies on a patched _get_unpad_data that "
            "transformers 5.x never calls with the document numbers (issue #8919): use sdpa or eager (its "
            "block_diag_attn 4D mask) or pass position_ids and no attention_mask; any trainer: turn the numbers into "
            "position_ids that restart per document and drop the attention_mask.")


def batch_trainer(keys, t: BatchTensors) -> str:
    """The trainer a batch's keys and tensors identify (one of ``TRAINERS``; "" when none)."""
    keys = set(map(str, keys))
    if "loss_mask" in keys and "tokens" in keys:
        return "megatron"
    if "doc_lens" in keys:
        return "olmo_core"
    if t.document_mask is not None:
        return "document_ids"
    if "tokens" in keys and ("input_pos" in keys or "mask" in keys):
        return "torchtune"
    # one flattened row: the collator's own output, or that output with an all-ones attention_mask kept beside it
    # (a mask with no 0 pads nothing: the batch is padding-free whatever else it carries)
    if t.shape[0] == 1 and t.position_ids is not None and (t.mask_2d is None or bool(np.all(t.mask_2d))):
        return "trl" if t.seq_idx is not None and t.cu_seq_lens_q is not None else "flattening"
    return "padded" if t.mask_2d is not None else ""


def advise(name: str, trainer: str, t: BatchTensors, eff: EffectiveAttention | None = None) -> str:
    """The fix of finding ``name`` for this batch and trainer, or "" where the rule's general fix is all."""
    impl = eff.attn_implementation if eff is not None else ""
    if name == "documents_share_attention" and eff is not None:
        if trainer == "document_ids":
            return _DOC_IDS
        if trainer == "megatron" and impl != "megatron":
            return ("Check it with attn_implementation='megatron', or invert the mask (~mask) for a transformers "
                    "model. This is Megatron's batch: its mask is True = masked, as Megatron-core reads it.")
        if trainer == "olmo_core" and impl != "olmo_core":
            return ("Check it with attn_implementation='olmo_core', or give a transformers model cu_seq_lens_q/_k or "
                    "restarting position_ids. OLMo-core's own model reads doc_lens; a transformers model needs "
                    "cu_seq_lens_q/_k with max_length_q/_k, or position_ids that restart.")
        if trainer == "torchtune" and impl in ("eager", "flex_attention"):
            return ("Use sdpa, or give eager and flex torch.where(mask, 0.0, torch.finfo(dtype).min)[:, None]. "
                    "torchtune's own model reads this boolean mask with sdpa (_sdpa_or_flex_attention; flex only with "
                    "a BlockMask). A transformers model under eager or flex adds a 4D mask to the scores.")
        if "a cache is in use" in eff.path:
            return "Call the model with use_cache=False, as Trainer and TRL do (a hand-written loop must say so)."
        if "2D attention_mask is given" in eff.path and t.mask_2d is not None and t.mask_2d.all() \
                and t.position_ids is not None:
            return ("Drop the all-ones attention_mask: beside it transformers never reads the position resets. TRL: "
                    "padding_free=True does it; transformers: DataCollatorWithFlattening emits none.")
        if impl in FLASH and t.shape[0] > 1 and t.position_ids is not None:
            return ("Flatten the batch into one row [1, T] with cu_seq_lens_q/_k: TRL padding_free=True, or "
                    "DataCollatorWithFlattening(return_flash_attn_kwargs=True). flash-attention finds documents from "
                    "position_ids only in one flattened row.")
        if eff.dense is not None and t.mask_4d_info is not None and t.mask_4d_info.kind != "additive":
            return ("Pass torch.where(mask, 0.0, torch.finfo(dtype).min) instead of a boolean or 0/1 mask, or use "
                    "sdpa. eager and flex add a 4D mask to the scores.")
        if t.rope_position_ids is not None and t.position_ids is None:
            return ("Give [4, batch, tokens] positions with the text positions first (row 0), or "
                    "cu_seq_lens_q/_k with max_length_q/_k for flash-attention.")
        if trainer == "padded":
            return _WRAPPED
    if name == "mask_reads_future":
        return advise("documents_share_attention", trainer, t, eff) or ""
    if name == "kernel_cannot_read_batch" and trainer == "torchtune":
        return "Read torchtune's packed batches with sdpa or flex_attention: they carry a block mask."
    if name == "label_crosses_boundary":
        if trainer == "megatron":
            return ("Set Megatron's eod_mask_loss=True, or pass --allow-cross-document for a deliberate stream. "
                    "eod_mask_loss=True zeroes the loss at every EOD token, whose target is the next document's first.")
        if trainer in ("trl", "flattening"):
            return ("Keep the -100 the collator writes at each document's first label. TRL's padding-free collator "
                    "sets labels to -100 where position_ids == 0; DataCollatorWithFlattening writes separator_id=-100 "
                    "at each document's first label.")
    if name in ("convolution_reads_previous_document", "state_crosses_documents") and trainer == "flattening":
        return ("Add seq_idx and cu_seq_lens with DataCollatorWithFlattening(return_flash_attn_kwargs=True, "
                "return_seq_idx=True), and install the CUDA kernels. TRL's padding-free collator emits both; then install "
                "causal-conv1d and flash-linear-attention where the model trains (CUDA), or transformers refuses the "
                "batch; without them, pad one document per row.")
    if name == "model_refuses_batch" and trainer == "trl":
        return ("Install causal-conv1d and flash-linear-attention on the CUDA machine that trains, or turn packing off "
                "there. TRL's padding-free batch already carries seq_idx and cu_seq_lens_q/_k; packing off is "
                "packing=False, padding_free=False. Dropping seq_idx or cu_seq_lens makes the batch run and leak.")
    if name == "mask_ignores_position_resets" and trainer in ("trl", "flattening"):
        return ("Pad instead for this model (TRL: packing=False, padding_free=False), or give each batch a 4D "
                "block-causal attention_mask. TRL's padding-free collator and DataCollatorWithFlattening rely on "
                "position resets, which this model's mask never sees; transformers pads with DataCollatorForSeq2Seq.")
    if name == "pads_given_position_zero" and trainer in ("trl", "flattening"):
        return ("Leave pad_to_multiple_of unset, or pad position_ids with a running arange. TRL pads position_ids "
                "with 0 (pad_to_multiple_of with padding_free=True), and its cu_seq_lens then count each pad as a "
                "sequence.")
    return ""


def with_advice(findings, trainer: str, t: BatchTensors, eff: EffectiveAttention | None = None) -> list:
    """``findings`` with each one's advice filled in where the trainer and the batch give one."""
    out = []
    for f in findings:
        text = "" if f.advice else advise(f.name, trainer, t, eff)
        out.append(replace(f, advice=text) if text else f)
    return out
