"""Which trainer a batch's shape names, and the fix for that trainer: the concrete line of each finding.

A rule's fix (``check.rules``) is general; where the keys and tensors of a batch identify the
trainer that built it, the finding carries the change to make in that trainer instead:

- ``trl``: one flattened row with ``position_ids``, ``cu_seq_lens_q/_k`` and ``seq_idx`` (TRL 1.16's
  ``DataCollatorForLanguageModeling(padding_free=True)``; transformers' ``DataCollatorWithFlattening``
  with ``return_seq_idx`` looks the same);
- ``flattening``: one flattened row with ``position_ids`` and no ``seq_idx`` (``DataCollatorWithFlattening``);
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

from packing_core.attention.semantics import FLASH, EffectiveAttention
from packing_core.attention.tensors import BatchTensors

TRAINERS = ("trl", "flattening", "padded", "torchtune", "megatron", "olmo_core", "document_ids", "")

_WRAPPED = ("TRL: packing_strategy='bfd' (padding-free, documents kept whole) instead of 'wrapped'; Megatron: "
            "reset_attention_mask=True and reset_position_ids=True; if reading across documents is deliberate "
            "(a pretraining stream), say so with --allow-cross-document.")
_DOC_IDS = ("axolotl: use a release with PR #3796 (multipack reads position_ids / cu_seqlens on every attention "
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
    if t.shape[0] == 1 and t.position_ids is not None and t.mask_2d is None:
        return "trl" if t.seq_idx is not None and t.cu_seq_lens_q is not None else "flattening"
    return "padded" if t.mask_2d is not None else ""


def advise(name: str, trainer: str, t: BatchTensors, eff: EffectiveAttention | None = None) -> str:
    """The fix of finding ``name`` for this batch and trainer, or "" where the rule's general fix is all."""
    impl = eff.attn_implementation if eff is not None else ""
    if name == "documents_share_attention" and eff is not None:
        if trainer == "document_ids":
            return _DOC_IDS
        if trainer == "megatron" and impl != "megatron":
            return ("This is Megatron's batch: its mask is True = masked, as Megatron-core reads it; check it with "
                    "attn_implementation='megatron', or invert it (~mask) for a transformers model.")
        if trainer == "olmo_core" and impl != "olmo_core":
            return ("OLMo-core's own model reads doc_lens (check with attn_implementation='olmo_core'); a "
                    "transformers model needs cu_seq_lens_q/_k with max_length_q/_k, or position_ids that restart.")
        if trainer == "torchtune" and impl in ("eager", "flex_attention"):
            return ("torchtune's own model reads this boolean mask with sdpa (_sdpa_or_flex_attention; flex only with "
                    "a BlockMask). A transformers model under eager or flex adds a 4D mask to the scores: give it "
                    "torch.where(mask, 0.0, torch.finfo(dtype).min)[:, None], or use sdpa.")
        if "a cache is in use" in eff.path:
            return "Call the model with use_cache=False, as Trainer and TRL do (a hand-written loop must say so)."
        if "2D attention_mask is given" in eff.path and t.mask_2d is not None and t.mask_2d.all() \
                and t.position_ids is not None:
            return ("Drop the all-ones attention_mask: beside it transformers never reads the position resets. TRL: "
                    "padding_free=True does it; transformers: DataCollatorWithFlattening emits none.")
        if impl in FLASH and t.shape[0] > 1 and t.position_ids is not None:
            return ("flash-attention finds documents from position_ids only in one flattened row: TRL "
                    "padding_free=True, or DataCollatorWithFlattening(return_flash_attn_kwargs=True), gives [1, T] "
                    "with cu_seq_lens_q/_k.")
        if eff.dense is not None and t.mask_4d_info is not None and t.mask_4d_info.kind != "additive":
            return ("eager and flex add a 4D mask to the scores: pass torch.where(mask, 0.0, "
                    "torch.finfo(dtype).min) instead of a boolean or 0/1 mask, or use sdpa.")
        if t.rope_position_ids is not None and t.position_ids is None:
            return ("Give [4, batch, tokens] positions with the text positions first (row 0), or "
                    "cu_seq_lens_q/_k with max_length_q/_k for flash-attention.")
        if trainer == "padded":
            return _WRAPPED
    if name == "mask_reads_future":
        return advise("documents_share_attention", trainer, t, eff) or ""
    if name == "kernel_cannot_read_batch" and trainer == "torchtune":
        return "torchtune's packed batches carry a block mask: read them with sdpa or flex_attention."
    if name == "label_crosses_boundary":
        if trainer == "megatron":
            return ("Megatron: eod_mask_loss=True zeroes the loss at every EOD token, whose target is the next "
                    "document's first; for a deliberate stream, --allow-cross-document.")
        if trainer in ("trl", "flattening"):
            return ("TRL's padding-free collator sets labels to -100 where position_ids == 0; "
                    "DataCollatorWithFlattening writes separator_id=-100 at each document's first label: keep them.")
    if name in ("convolution_reads_previous_document", "state_crosses_documents") and trainer == "flattening":
        return ("DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True) adds cu_seq_lens_q/_k and "
                "seq_idx (TRL's padding-free collator emits both); then install causal-conv1d and flash-linear-attention "
                "where the model trains (CUDA), or transformers refuses the batch; without them, pad one document per row.")
    if name == "model_refuses_batch" and trainer == "trl":
        return ("TRL's padding-free batch already carries seq_idx and cu_seq_lens_q/_k: install causal-conv1d and "
                "flash-linear-attention on the CUDA machine that trains, or turn packing off there (packing=False, "
                "padding_free=False). Dropping seq_idx or cu_seq_lens makes the batch run and leak.")
    if name == "mask_ignores_position_resets" and trainer in ("trl", "flattening"):
        return ("TRL's padding-free collator and DataCollatorWithFlattening rely on position resets, which this "
                "model's mask never sees: for this model pad instead (TRL: packing=False, padding_free=False; "
                "transformers: DataCollatorForSeq2Seq), or give each batch a 4D block-causal attention_mask.")
    if name == "pads_given_position_zero" and trainer in ("trl", "flattening"):
        return ("TRL pads position_ids with 0 (pad_to_multiple_of with padding_free=True), and its cu_seq_lens then "
                "count each pad as a sequence: leave pad_to_multiple_of unset, or pad position_ids with a running "
                "arange.")
    return ""


def with_advice(findings, trainer: str, t: BatchTensors, eff: EffectiveAttention | None = None) -> list:
    """``findings`` with each one's advice filled in where the trainer and the batch give one."""
    out = []
    for f in findings:
        text = "" if f.advice else advise(f.name, trainer, t, eff)
        out.append(replace(f, advice=text) if text else f)
    return out
