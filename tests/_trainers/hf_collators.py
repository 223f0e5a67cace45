"""transformers 5.24's collators: ``DataCollatorWithFlattening`` (each option) and ``DataCollatorForSeq2Seq``.

``Trainer`` calls ``model(**inputs)`` with the model's ``config.use_cache`` set to
``TrainingArguments.use_cache`` (False by default: transformers/trainer.py, ``__init__`` step 11),
so every call here passes ``use_cache=False``. Two batches are the collator's output changed the
way static-shape and multi-row training change it, each cited where built.
"""
from __future__ import annotations

import torch

from tests._trainers.truth import Case, documents_from_lengths, hf_calls, hf_targets, model_kwargs, smollm2_tokenizer

TRAINER = "transformers"
DOCS = [[11, 12, 13, 14, 15], [21, 22, 23], [31, 32, 33, 34], [41, 42]]
SOURCE = "transformers 5.24: data/data_collator.py DataCollatorWithFlattening, DataCollatorForSeq2Seq"


def flattening(docs=DOCS, **kw):
    from transformers import DataCollatorWithFlattening

    return DataCollatorWithFlattening(return_tensors="pt", **kw)([{"input_ids": d} for d in docs])


def _case(kind: str, batch, lengths_per_row, **check) -> Case:
    docs = documents_from_lengths(lengths_per_row, batch["input_ids"].shape[1])
    trained, crossing = hf_targets(batch["labels"], docs)
    return Case(TRAINER, kind, batch, docs, trained, crossing, hf_calls(model_kwargs(batch, use_cache=False)),
                check, SOURCE)


def flat(kind: str, **kw) -> Case:
    return _case(kind, flattening(**kw), [[len(d) for d in DOCS]])


def zero_length_documents() -> Case:
    """``cu_seq_lens`` padded to a fixed count by repeating the last offset: zero-length documents.

    Static-shape training (torchtitan PR #4158) keeps the number of offsets constant so that a
    compiled graph is reused; flash-attn's varlen kernel computes nothing for an empty sequence.
    """
    batch = flattening(return_flash_attn_kwargs=True)
    cu = batch["cu_seq_lens_q"]
    padded = torch.cat([cu, cu[-1:].repeat(8 - len(cu))])
    batch["cu_seq_lens_q"] = batch["cu_seq_lens_k"] = padded
    return _case("flattening-cu_seq_lens_zero_length_padded", batch, [[len(d) for d in DOCS]])


def all_ones_mask() -> Case:
    """The flattened row with ``attention_mask`` of ones added (a custom collator or a kept column)."""
    batch = flattening()
    batch["attention_mask"] = torch.ones_like(batch["input_ids"])
    return _case("flattening-with_all_ones_mask", batch, [[len(d) for d in DOCS]])


def rows() -> Case:
    """Two flattened rows stacked into ``[2, L]``: packed rows beside a batch size above 1."""
    a, b = flattening(DOCS[:2]), flattening(DOCS[2:] + [[51, 52]])
    batch = {k: torch.cat([a[k], b[k]]) for k in ("input_ids", "labels", "position_ids")}
    return _case("flattening-rows_stacked_B2", batch, [[5, 3], [4, 2, 2]])


def seq2seq_padded() -> Case:
    """``DataCollatorForSeq2Seq``: right-padded rows, a 0/1 attention_mask, prompt labels -100."""
    from transformers import DataCollatorForSeq2Seq

    tok = smollm2_tokenizer()
    feats = [{"input_ids": d, "attention_mask": [1] * len(d), "labels": [-100, -100] + d[2:]} for d in DOCS]
    batch = DataCollatorForSeq2Seq(tok, padding=True, return_tensors="pt")(feats)
    docs = documents_from_lengths([[len(d)] for d in DOCS], batch["input_ids"].shape[1])
    trained, crossing = hf_targets(batch["labels"], docs)
    return Case(TRAINER, "seq2seq-padded", batch, docs, trained, crossing,
                hf_calls(model_kwargs(batch, use_cache=False)), {}, SOURCE)


CASES = {
    "flattening": lambda: flat("flattening"),
    "flattening-flash_kwargs": lambda: flat("flattening-flash_kwargs", return_flash_attn_kwargs=True),
    "flattening-seq_idx": lambda: flat("flattening-seq_idx", return_flash_attn_kwargs=True, return_seq_idx=True),
    "flattening-no_position_ids": lambda: flat("flattening-no_position_ids", return_position_ids=False),
    "flattening-no_position_ids-flash_kwargs": lambda: flat("flattening-no_position_ids-flash_kwargs",
                                                            return_position_ids=False, return_flash_attn_kwargs=True),
    "flattening-cu_seq_lens_zero_length_padded": zero_length_documents,
    "flattening-with_all_ones_mask": all_ones_mask,
    "flattening-rows_stacked_B2": rows,
    "seq2seq-padded": seq2seq_padded,
}
