"""Bugs in what the loss trains on: labels across a document edge, the loss averaged per row."""
from __future__ import annotations

import numpy as np
import torch

from packing_core.check.batch import check_hf_batch
from packing_lab.zoo._shared import caught, flatten, says, smollm2, texts_documents, token_texts
from packing_lab.zoo._types import Bug, ZooResult

_DOCS = ([11, 12, 13, 14, 15], [21, 22, 23, 24], [31, 32, 33])
CROSS = ("label_crosses_boundary",)


def _labels_over_row() -> ZooResult:
    model, tok = smollm2()
    fixed = flatten(texts_documents(tok))
    broken = dict(fixed, labels=fixed["input_ids"].copy())   # run_clm-style labels = input_ids over the row
    cb, cf = check_hf_batch(broken), check_hf_batch(fixed)
    ids = torch.as_tensor(fixed["input_ids"])
    pos = torch.as_tensor(fixed["position_ids"])
    with torch.inference_mode():
        lb = float(model(input_ids=ids, position_ids=pos, labels=torch.as_tensor(broken["labels"]), use_cache=False).loss)
        lf = float(model(input_ids=ids, position_ids=pos, labels=torch.as_tensor(fixed["labels"]), use_cache=False).loss)
    start = int(np.flatnonzero(fixed["position_ids"][0] == 0)[1])
    pair = f"{tok.decode([int(ids[0, start - 1])])!r} -> {tok.decode([int(ids[0, start])])!r}"
    n_b, n_f = int((broken["labels"][:, 1:] != -100).sum()), int((fixed["labels"][:, 1:] != -100).sum())
    return ZooResult(
        name="", symptom=f"{n_b} targets instead of {n_f}: trains {pair} across the boundary; loss {lb:.4f} "
                         f"(fixed {lf:.4f})", fixed=f"{n_f} targets, loss {lf:.4f}",
        broken_max_abs_diff=None, fixed_max_abs_diff=None, changed_predictions=None,
        caught=caught(cb, CROSS), silent_on_fix=not caught(cf, CROSS), check_says=says(cb),
        document_ids=cf.row_document_ids[0], input_ids=fixed["input_ids"][0],
        tokens=token_texts(tok, fixed["input_ids"][0]),
        broken_targets=hf_targets(broken["labels"][0]), fixed_targets=hf_targets(fixed["labels"][0]))


def hf_targets(labels) -> np.ndarray:
    """transformers' shift: position i is trained to predict ``labels[i + 1]`` (-100 after the last).

    >>> hf_targets([5, 6, -100, 8]).tolist()
    [6, -100, 8, -100]
    """
    return np.r_[np.asarray(labels, dtype=np.int64)[1:], -100]


def _labels_example():
    fixed = flatten(_DOCS)
    return dict(fixed, labels=fixed["input_ids"].copy()), fixed, {}


def _loss_per_row() -> ZooResult:
    from packing_lab.demos.lesson_weights import loss_lesson

    rows = [[4], [60, 60]]   # a short document alone in its row, two long ones sharing one
    lesson = loss_lesson(rows)
    token, row = np.array(lesson.expected["token"]), np.array(lesson.measured["row"])
    return ZooResult(
        name="", symptom=f"per-row mean: the 4-token document weighs {row[0]:.3f} of the gradient, "
                         f"{row[0] / token[0]:.1f}x its per-token share {token[0]:.3f}",
        fixed=f"per-token mean (Trainer/TRL): weights {np.round(lesson.measured['token'], 3).tolist()} = token shares",
        broken_max_abs_diff=None, fixed_max_abs_diff=None, changed_predictions=None,
        caught=not np.allclose(row, token), silent_on_fix=bool(np.allclose(lesson.measured["token"], token)),
        check_says="gradient weights per document (autograd, tiny model) differ from the per-token shares",
        weight_labels=tuple(f"row {r}, doc {i} ({n} tokens)" for r, row_ in enumerate(rows) for i, n in enumerate(row_)),
        broken_weights=row, fixed_weights=np.array(lesson.measured["token"]))


BUGS: tuple[Bug, ...] = (
    Bug("labels-over-row", "Labels shifted over the whole row",
        "transformers shifts labels by one over the whole row, so the last token of document 0 is trained to "
        "predict the first token of document 1 unless that label is -100.",
        ("pytorch/torchtitan #4075 (merged): 'the last token of one document is used to predict the first token "
         "of the next document'",
         "meta-pytorch/torchtune #1177", "alex-hh/profam #504 (merged)", "huggingface/trl #5854 (review comment)"),
        "-100 at every document's first label: DataCollatorWithFlattening's separator_id, TRL's "
        "labels[position_ids == 0] = -100.",
        "SmolLM2-135M, transformers' ForCausalLMLoss", CROSS, _labels_over_row, _labels_example),
    Bug("loss-per-row", "Loss averaged per row (or per micro-batch) instead of per token",
        "A mean per row, then over rows, gives every row the same weight: a short document alone in a row weighs "
        "as much as two long ones together, far above its tokens' share; how rows are packed then changes what "
        "is learned.",
        ("huggingface/transformers #34191 (merged): num_items_in_batch for gradient accumulation",
         "huggingface/transformers #34242 -> #34373 (merged): average tokens across devices",
         "huggingface/trl #2175", "hiyouga/LlamaFactory #7443", "volcengine/verl #3994 (merged): normalize sft "
         "loss by num_tokens in global batch"),
        "Sum the token losses and divide by the number of counted tokens in the global batch "
        "(transformers' Trainer: num_items_in_batch; TRL's SFTTrainer inherits it).",
        "the lab's tiny-rope model (random init)", (), _loss_per_row,
        caught_note="no batch check: read your loss code (per token, over the global batch)"),
)
