"""Run inside one transformers release's environment: what its readers really do with a packed batch.

Needs only torch and transformers (it runs in a fresh virtual environment per release, built by
``tools/releases_table.py``), and prints one JSON object:

- ``cells``: per family, attention implementation and setup, the largest |logit difference| of
  three documents (7, 9 and 5 tokens) packed in one row against each run alone, on a tiny
  random-init model of the family's own class; or the library's refusal;
- ``collator``: what ``DataCollatorWithFlattening`` emits with each keyword argument this release has;
- ``api``: the model-building API of the release (``dtype`` or ``torch_dtype``; ``set_attn_implementation``).

    python tools/releases_probe.py [FAMILY ...]
"""
from __future__ import annotations

import inspect
import json
import sys
import warnings

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

LENGTHS = (7, 9, 5)
VOCAB = 256
# the families measured in every release: a mask call that passes position_ids (llama, mistral with its
# sliding window), one that does not (opt), a model that builds its own mask (gpt2), a hybrid (bamba)
FAMILIES = ("llama", "mistral", "opt", "gpt2", "bamba")
IMPLEMENTATIONS = ("sdpa", "eager")
SMALL = {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 256, "num_hidden_layers": 2,
         "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 256, "ffn_dim": 128, "word_embed_proj_dim": 64,
         "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.1, "sliding_window": 64,
         "attn_layer_indices": [1], "mamba_d_state": 16, "mamba_n_heads": 4, "mamba_d_head": 32,
         "mamba_n_groups": 1, "mamba_expand": 2, "mamba_d_conv": 4, "mamba_chunk_size": 16, "use_cache": True}
# what the packed row carries in each setup (each document alone: the same kinds, for its one document)
SETUPS = ("none", "position_ids", "mask_ones", "use_cache", "cu_seq_lens", "seq_idx", "mask_4d")
TOLERANCE = 1e-5


def _config(model_type: str):
    default = AutoConfig.for_model(model_type)
    keys = set(default.to_dict()) | set(vars(default))
    return AutoConfig.for_model(model_type, **{k: v for k, v in SMALL.items() if k in keys})


def build(model_type: str, attn: str):
    """The family's causal LM, tiny, float32, eval mode: built through whichever dtype keyword this release takes."""
    config = _config(model_type)
    torch.manual_seed(0)
    key = dtype_keyword()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoModelForCausalLM.from_config(config, attn_implementation=attn, **{key: torch.float32}).eval()


def dtype_keyword() -> str:
    """``dtype`` where ``PreTrainedModel._from_config`` reads it (transformers 4.56 on), else ``torch_dtype``."""
    src = inspect.getsource(transformers.PreTrainedModel._from_config)
    return "dtype" if 'kwargs.pop("dtype"' in src or "dtype = kwargs.pop(\"dtype\"" in src else "torch_dtype"


def inputs(setup: str, lengths, ids):
    lengths = list(lengths)
    T = sum(lengths)
    kw = {"input_ids": ids, "use_cache": setup == "use_cache"}
    if setup != "none":
        kw["position_ids"] = torch.cat([torch.arange(n) for n in lengths])[None]
    if setup == "mask_ones":
        kw["attention_mask"] = torch.ones(1, T, dtype=torch.long)
    if setup in ("cu_seq_lens", "seq_idx"):
        cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
        kw.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max(lengths), max_length_k=max(lengths))
    if setup == "seq_idx":
        kw["seq_idx"] = torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32),
                                                torch.tensor(lengths))[None]
    if setup == "mask_4d":
        doc = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
        ok = (doc[:, None] == doc[None, :]) & torch.ones(T, T, dtype=torch.bool).tril()
        kw["attention_mask"] = torch.zeros(T, T).masked_fill(~ok, torch.finfo(torch.float32).min)[None, None]
    return kw


def cell(model, setup: str) -> dict:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, VOCAB, (1, sum(LENGTHS)), generator=g)
    starts = [0, *torch.tensor(LENGTHS).cumsum(0).tolist()]
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            packed = model(**inputs(setup, LENGTHS, ids)).logits.float()[0]
            alone = torch.cat([model(**inputs(setup, [n], ids[:, a:b])).logits.float()[0]
                               for n, a, b in zip(LENGTHS, starts, starts[1:])])
    except Exception as e:     # the release refuses this setup: its own error, in one line
        return {"status": "refused", "error": f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"}
    per_doc = [float((packed[a:b] - alone[a:b]).abs().max()) for a, b in zip(starts, starts[1:])]
    leak = max(per_doc) > TOLERANCE * float(alone.abs().max())
    return {"status": "leaks" if leak else "sound", "max_diff": max(per_doc), "per_document": per_doc}


def collator() -> dict:
    """What DataCollatorWithFlattening emits by default and with each switch this release has."""
    try:
        from transformers import DataCollatorWithFlattening
    except ImportError:
        return {}
    features = [{"input_ids": [5, 6, 7]}, {"input_ids": [8, 9]}]
    params = list(inspect.signature(DataCollatorWithFlattening.__init__).parameters)
    out = {"kwargs": [p for p in params if p not in ("self", "args", "kwargs")]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out["default"] = sorted(DataCollatorWithFlattening()(features, return_tensors="pt"))
        for switch in ("return_flash_attn_kwargs", "return_seq_idx"):
            if switch in params:
                out[switch] = sorted(DataCollatorWithFlattening(**{switch: True})(features, return_tensors="pt"))
    return out


def main(argv=None) -> int:
    families = (argv if argv is not None else sys.argv[1:]) or FAMILIES
    transformers.logging.set_verbosity_error()
    cells: dict[str, dict] = {}
    for mt in families:
        for attn in IMPLEMENTATIONS:
            try:
                model = build(mt, attn)
            except Exception as e:
                cells[f"{mt}|{attn}"] = {"not_built": f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"}
                continue
            cells[f"{mt}|{attn}"] = {s: cell(model, s) for s in SETUPS}
    api = {"dtype_keyword": dtype_keyword(),
           "set_attn_implementation": hasattr(transformers.PreTrainedModel, "set_attn_implementation")}
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__, "cells": cells,
                      "collator": collator(), "api": api}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
