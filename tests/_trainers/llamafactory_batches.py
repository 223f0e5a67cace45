"""LLaMA-Factory 0.9.5's packed SFT batches, with and without ``neat_packing``.

The rows are laid out as ``PackedSupervisedDatasetProcessor.preprocess_dataset`` lays them out
(llamafactory/data/processor/supervised.py): knapsacks from its own ``greedy_knapsack``
(data/processor/processor_utils.py), each sample's ``position_ids`` from 0, the row padded to
``cutoff_len + 1`` with pad ids at position 0, and ``attention_mask`` holding ``i + 1`` per sample and
0 on pads with ``neat_packing`` (1 everywhere without it, "more efficient flash_attn"). That loop
needs LLaMA-Factory's template and data arguments, so its few lines are re-done here, cited.
The collator's own code then runs, compiled from data/collator.py (the file imports peft):
``prepare_4d_attention_mask`` (``block_diag_attn`` = ``neat_packing``, hparams/parser.py) for sdpa/eager,
and for flash_attention_2 ``_unpad_packed_features`` with ``attention_mask = None``.
``Trainer`` calls the model with ``use_cache`` False.
"""
from __future__ import annotations

import bisect
from typing import Any

import torch

from tests._trainers.truth import Case, documents_from_lengths, hf_calls, hf_targets, model_kwargs
from tests._trainers.vendor import library_functions

TRAINER = "llamafactory"
BOS, EOS, PAD = 1, 2, 0
# (prompt, response): encoded as <bos> X Y <eos>, labels <ignore> ... Y <eos>
PAIRS = [([11, 12], [13, 14]), ([21], [22, 23]), ([31, 32, 33], [34]), ([41], [42]), ([51, 52], [53, 54, 55])]
CUTOFF = 15
SOURCE = "llamafactory 0.9.5: data/processor/supervised.py PackedSupervisedDatasetProcessor; data/collator.py"


def _library():
    ns = library_functions("llamafactory/data/processor/processor_utils.py", ["search_for_fit", "greedy_knapsack"],
                           {"bisect": bisect})
    ns |= library_functions("llamafactory/data/collator.py",
                            ["prepare_4d_attention_mask", "SFTDataCollatorWith4DAttentionMask._unpad_packed_features"],
                            {"torch": torch, "Any": Any})
    return ns


def packed_rows(neat: bool):
    """``(batch, lengths per row)`` as the processor and ``DataCollatorForSeq2Seq`` (equal rows: a stack) give them."""
    lib = _library()
    samples = [([BOS, *p, *r, EOS], [-100] * (1 + len(p)) + [*r, EOS]) for p, r in PAIRS]
    by_length: dict[int, list[int]] = {}
    for i, (ids, _) in enumerate(samples):
        by_length.setdefault(len(ids), []).append(i)
    rows, lengths = [], []
    for knapsack in lib["greedy_knapsack"]([len(s[0]) for s in samples], CUTOFF):
        ids, mask, pos, labels, lens = [], [], [], [], []
        for i, n in enumerate(knapsack):
            s_ids, s_labels = samples[by_length[n].pop()]
            ids += s_ids
            pos += list(range(len(s_ids)))
            labels += s_labels
            mask += [i + 1 if neat else 1] * len(s_ids)
            lens.append(len(s_ids))
        pad = CUTOFF + 1 - len(ids)
        ids, pos, labels = ids + [PAD] * pad, pos + [0] * pad, labels + [-100] * pad
        mask += [0 if neat else 1] * pad
        rows.append((ids, mask, pos, labels))
        lengths.append(lens)
    batch = {k: torch.tensor([r[j] for r in rows]) for j, k in
             enumerate(("input_ids", "attention_mask", "position_ids", "labels"))}
    return batch, lengths, lib


def _case(batch, lengths, *, check=None) -> Case:
    docs = documents_from_lengths(lengths, batch["input_ids"].shape[1])
    trained, crossing = hf_targets(batch["labels"], docs)
    return Case(TRAINER, "", batch, docs, trained, crossing, hf_calls(model_kwargs(batch, use_cache=False)),
                check or {}, SOURCE)


def neat_4d(cast_to_bool: bool = False) -> Case:
    """``neat_packing`` for sdpa/eager: the collator's additive 4D block mask (0 / dtype min).

    With ``cast_to_bool`` the same mask as booleans (True = may read), as a re-run that converts it
    hands it on: transformers' eager adds a 4D mask to the scores, and 0/1 masks nothing.
    """
    batch, lengths, lib = packed_rows(neat=True)
    batch["attention_mask"] = lib["prepare_4d_attention_mask"](batch["attention_mask"], torch.float32)
    if cast_to_bool:
        batch["attention_mask"] = batch["attention_mask"] == 0
    return _case(batch, lengths)


def neat_flash() -> Case:
    """``neat_packing`` for flash_attention_2: one row, pads trimmed by the collator, ``attention_mask = None``."""
    batch, lengths, lib = packed_rows(neat=True)
    one = {k: v[:1] for k, v in batch.items()}
    lib["_unpad_packed_features"](one)
    one = {k: v for k, v in one.items() if k != "attention_mask"}
    return _case(one, lengths[:1])


def document_ids_stock() -> Case:
    """The ``neat_packing`` rows with their document-number mask, given to stock transformers (no 4D conversion)."""
    batch, lengths, _ = packed_rows(neat=True)
    return _case(batch, lengths)


def not_neat(rows: int) -> Case:
    """``packing`` without ``neat_packing``: an all-ones mask (pads included) beside positions that restart."""
    batch, lengths, _ = packed_rows(neat=False)
    batch = {k: v[:rows] for k, v in batch.items()}
    lengths = lengths[:rows]
    real = documents_from_lengths(lengths, batch["input_ids"].shape[1]) >= 0
    batch["labels"][~torch.as_tensor(real)] = -100
    return _case(batch, lengths)


CASES = {
    "neat_packing-4d_mask": neat_4d,
    "neat_packing-flash_one_row": neat_flash,
    "neat_packing-document_id_mask_stock": document_ids_stock,
    "neat_packing-4d_mask_cast_to_bool": lambda: neat_4d(cast_to_bool=True),
    "packing-not_neat-B2": lambda: not_neat(2),
    "packing-not_neat-B1": lambda: not_neat(1),
}
