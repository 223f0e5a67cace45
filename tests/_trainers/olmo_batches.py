"""OLMo-core 3.0.0's batches: ``DataCollator`` with ``doc_lens`` / ``max_doc_lens`` (its own files).

A fixed-length instance is cut from a token stream; ``get_document_lengths(input_ids, eos)``
(olmo_core/data/utils.py) gives its ``doc_lens`` when the dataset generates them; ``DataCollator``
(olmo_core/data/collator.py) pads ``doc_lens`` per row with zeros and lists ``max_doc_lens``; the
train module computes ``labels = get_labels(batch)`` (``input_ids`` shifted left, the EOS target
kept: it trains the EOS -> next-document target) and calls the model with them. Each batch is
judged for two kinds of reader (see ``tests._trainers``):

- ``olmo_core``, OLMo-core's own model: ``Transformer.forward`` (olmo_core/nn/transformer/model.py)
  pops ``doc_lens`` / ``max_doc_lens`` into ``cu_doc_lens = get_cumulative_document_lengths(doc_lens)``
  and ``max_doc_len``; its ``flash_2`` / ``flash_3`` / ``te`` backends run varlen over the flattened
  batch, with RoPE restarted per document (olmo_core/nn/rope.py: ``pos_idx = flat_idx -
  cu_doc_lens[doc_id]``). Emulated by transformers' flash path given ``cu_seq_lens_q/_k`` and those
  positions. (Its ``torch`` backend raises "doesn't support intra-document masking" for any
  ``cu_doc_lens``, olmo_core/nn/attention/backend.py: the checker's reader names the backends that
  read them.) Without ``doc_lens``: causal over each row;
- transformers' five implementations: a transformers model given the batch (``doc_lens`` and
  ``max_doc_lens`` reach its attention as unread keyword arguments): causal over each row.

The corpus once named OLMo-core's flash backends ``flash_attention_2/3`` and its torch backend ``sdpa``, while the
checker reads those names as transformers' implementations (which read no ``doc_lens``). Now OLMo-core's own model is
``olmo_core``: ``Transformer.forward`` turns ``doc_lens`` into ``cu_doc_lens`` (olmo_core/nn/transformer/model.py)
for its varlen backends; its torch backend raises on them (olmo_core/nn/attention/backend.py), as the reader says.
"""
from __future__ import annotations

import enum
from typing import Any, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F

from tests._trainers.truth import IMPLEMENTATIONS, Call, Case, hf_calls, model_kwargs
from tests._trainers.vendor import library_functions, library_module

TRAINER = "olmo_core"
EOS = 2
DOCS = [[11, 12, 13, EOS], [21, 22, 23, 24, 25, EOS], [31, 32, EOS], [41, 42, 43, 44, EOS], [51, 52, 53, EOS],
        [61, 62, 63, EOS], [71, 72, EOS]]
WIDTH, ROWS = 14, 2
IMPLS = ("olmo_core", *IMPLEMENTATIONS)
SOURCE = "ai2-olmo-core 3.0.0: olmo_core/data/utils.py, olmo_core/data/collator.py DataCollator"


def olmo_batch(doc_lens: bool, allow_cross_document: bool = False) -> Case:
    utils = library_functions("olmo_core/data/utils.py",
                              ["get_document_lengths", "get_cumulative_document_lengths", "get_labels"],
                              {"torch": torch, "np": np, "F": F, "Optional": Optional, "Union": Union, "Any": Any,
                               "Dict": dict})
    collator = library_module("olmo_core/data/collator.py", "olmo_core.data.collator",
                              {"olmo_core": {}, "olmo_core.data": {}, "olmo_core.config": {"StrEnum": enum.StrEnum}})
    stream = np.concatenate(DOCS)
    doc_of = np.cumsum(np.r_[0, stream[:-1] == EOS])
    items = []
    for i in range(ROWS):
        ids = torch.as_tensor(stream[i * WIDTH:(i + 1) * WIDTH]).long()
        items.append({"input_ids": ids, **({"doc_lens": utils["get_document_lengths"](ids, EOS)} if doc_lens else {})})
    batch = collator.DataCollator(pad_token_id=0)(items)
    batch["labels"] = utils["get_labels"](batch)
    docs = np.array([doc_of[i * WIDTH:(i + 1) * WIDTH] for i in range(ROWS)])
    trained = batch["labels"].numpy() != -100
    crossing = np.zeros_like(trained)
    crossing[:, :-1] = trained[:, :-1] & (docs[:, 1:] != docs[:, :-1])
    ids = batch["input_ids"]
    if doc_lens:
        cu = utils["get_cumulative_document_lengths"](batch["doc_lens"])
        flat = torch.arange(ids.numel())
        pos = (flat - cu[torch.bucketize(flat, cu[1:], right=True)]).view(ids.shape)   # rope.py's intra-document positions
        own = Call({"input_ids": ids, "position_ids": pos, "cu_seq_lens_q": cu, "cu_seq_lens_k": cu,
                    "max_length_q": max(batch["max_doc_lens"]), "max_length_k": max(batch["max_doc_lens"]),
                    "use_cache": False}, "flash_attention_2", "OLMo-core's flash backends: varlen over cu_doc_lens")
    else:
        own = Call({"input_ids": ids, "use_cache": False}, "sdpa", "OLMo-core's model: causal over each row")
    calls = {"olmo_core": own, **hf_calls(model_kwargs(batch, use_cache=False),
                                          "a transformers model given OLMo-core's batch")}
    check = {"labels": "shifted", "eos_ids": (EOS,)}
    if allow_cross_document:
        check["allow_cross_document"] = True
    return Case(TRAINER, "", batch, docs, trained, crossing, calls, check, SOURCE)


CASES = {
    "doc_lens": lambda: olmo_batch(True),
    "doc_lens-deliberate_eos_targets": lambda: olmo_batch(True, allow_cross_document=True),
    "no_doc_lens": lambda: olmo_batch(False),
    "no_doc_lens-deliberate_stream": lambda: olmo_batch(False, allow_cross_document=True),
}
