"""Bugs where transformers' mask building reads the batch other than it was meant: reproduced live.

Each reproduces through transformers' own code: the broken setup and the fixed one, measured
against each document alone, and what the lab's check says of each.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from packing_core.verify.equivalence import default_documents
from packing_lab.zoo._shared import (
    compare_batches,
    flatten,
    report_arrays,
    smollm2,
    texts_documents,
    token_texts,
)
from packing_lab.zoo._types import Bug, ZooResult

_DOCS = ([11, 12, 13, 14, 15], [21, 22, 23, 24], [31, 32, 33])
LEAK = ("documents_share_attention",)


def _mask_hides_packing() -> ZooResult:
    model, tok = smollm2()
    fixed = flatten(texts_documents(tok))
    broken = dict(fixed, attention_mask=np.ones_like(fixed["input_ids"]))
    return compare_batches(model, broken, fixed, LEAK, tokenizer=tok)


def _mask_example():
    fixed = flatten(_DOCS)
    return dict(fixed, attention_mask=np.ones_like(fixed["input_ids"])), fixed, {}


def _cache_hides_packing() -> ZooResult:
    model, tok = smollm2()
    fixed = flatten(texts_documents(tok))
    return compare_batches(model, fixed, fixed, LEAK, use_cache_broken=True, tokenizer=tok)


def _cache_example():
    fixed = flatten(_DOCS)
    return fixed, fixed, {"broken": {"use_cache": True}}


def _positions_without_mask() -> ZooResult:
    from packing_core.verify.run import verify_pretrained

    pre = smollm2()
    docs = texts_documents(pre[1])
    broken = verify_pretrained(pretrained=pre, documents=docs, mask="off", positions="reset")
    fixed = verify_pretrained(pretrained=pre, documents=docs, mask="on", positions="reset")
    return ZooResult(
        name="", symptom=f"max |dlogit| {broken.max_abs_diff:.2f}; {len(broken.changes)} top-1 predictions changed",
        fixed=f"max |dlogit| {fixed.max_abs_diff:.1e}", broken_max_abs_diff=broken.max_abs_diff,
        fixed_max_abs_diff=fixed.max_abs_diff, changed_predictions=len(broken.changes),
        caught=not broken.equivalent, silent_on_fix=fixed.equivalent,
        check_says="verify --mask off: NOT EQUIVALENT; check: documents_share_attention under varlen (cu_seqlens [0, T])",
        **report_arrays(broken, fixed, ids=[t for d in docs for t in d],
                        tokens=token_texts(pre[1], [t for d in docs for t in d])))


def _positions_example():
    fixed = flatten(_DOCS, return_flash_attn_kwargs=True)
    T = fixed["input_ids"].shape[1]
    broken = dict(fixed, cu_seq_lens_q=np.array([0, T]), cu_seq_lens_k=np.array([0, T]), max_length_q=T,
                  max_length_k=T)
    return broken, fixed, {"attn_implementation": "varlen"}


def _sliding_window() -> ZooResult:
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, sliding_window=4,
                        max_position_embeddings=128, attn_implementation="sdpa")
    model = MistralForCausalLM(cfg).eval()
    fixed = flatten(default_documents((12, 8, 10), seed=1))
    broken = dict(fixed, attention_mask=np.ones_like(fixed["input_ids"]))
    out = compare_batches(model, broken, fixed, LEAK)
    # transformers.masking_utils.sliding_window_overlay: key j is read by query i when j > i - window,
    # on top of whichever causal (or packed) mask the path chose; the check's reading leaves it out.
    i, j = np.indices(out.broken_mask.shape)
    window = j > i - cfg.sliding_window
    return replace(out, symptom="sliding window 4 spans documents: " + out.symptom,
                   broken_mask=out.broken_mask & window, fixed_mask=out.fixed_mask & window)


BUGS: tuple[Bug, ...] = (
    Bug("mask-hides-packing", "An all-ones attention_mask switches off transformers' sdpa/eager/flex packed detection",
        "transformers' sdpa/eager/flex find documents from position_ids only when attention_mask is None and there "
        "is no cache. A collator that adds an all-ones 2D mask to a padding-free batch gets a plain causal mask: "
        "every document reads the ones before it, silently; the loss still falls. (flash_attention_2 drops an "
        "all-ones mask and reads cu_seq_lens or the positions: there it is harmless.)",
        ("huggingface/transformers #46634 (closed, not merged): 'the attention_mask is typically a 2D all-ones "
         "tensor, which silently disables packed detection'",
         "huggingface/transformers #39194: packed format for flex/sdpa/eager through the mask",
         "axolotl-ai-cloud/axolotl #3796 (merged): sdpa/eager never dropped the mask, so 'documents attended "
         "across each other'"),
        "Pass no attention_mask with packed position_ids (TRL's collator does not create one), or a 4D mask.",
        "SmolLM2-135M, transformers' own sdpa", LEAK, _mask_hides_packing, _mask_example),
    Bug("cache-hides-packing", "A KV cache switches off transformers' sdpa/eager/flex packed detection",
        "LLaMA-style configs default to use_cache=True, so a plain model(**batch) call creates a cache even in "
        "train mode, and transformers' sdpa/eager/flex skip packed-sequence detection: documents read each other. "
        "flash_attention_2's detection does not look at the cache.",
        ("huggingface/transformers #46634 (the same gate, attention_mask is None and cache is None)",
         "huggingface/trl trl/trainer/sft_trainer.py compute_loss: inputs['use_cache'] = False"),
        "use_cache=False (Trainer sets config.use_cache from TrainingArguments.use_cache, default False; "
        "TRL forces it); a hand-written loop must pass it.",
        "SmolLM2-135M, transformers' own sdpa", LEAK, _cache_hides_packing, _cache_example),
    Bug("positions-without-mask", "Positions reset per document, but the mask comes from elsewhere",
        "Where the mask comes from elsewhere (an explicit causal mask, cu_seqlens [0, T], a 2D attention_mask or "
        "a cache), resetting position_ids changes only the rotary phases and document 1 still reads document 0. "
        "(Only transformers' padding-free path, with no mask and no cache, turns the resets into a document mask.)",
        ("huggingface/trl #784: 'the second sample paying attention to the first'",
         "huggingface/trl #1230 / #1235 (not merged): packing without cross contamination",
         "allenai/open-instruct #669", "hiyouga/LlamaFactory #2289",
         "huggingface/nanoVLM #204: 'resetting position IDs alone is not enough'"),
        "A document mask: TRL #3526 (position_ids + flash varlen), LlamaFactory #4224 (neat_packing), "
        "torchtune #875 (block-causal mask and per-sample positions).",
        "SmolLM2-135M, our segments backend with cu_seqlens [0, T]", LEAK, _positions_without_mask,
        _positions_example),
    Bug("sliding-window-crosses", "A sliding window that spans documents",
        "A window mask built from token indices, without the document mask, lets a token read the last few "
        "tokens of the previous document. transformers 5.24 combines the window with the packed mask, but only "
        "when packed detection is on: an all-ones attention_mask turns it off.",
        ("axolotl-ai-cloud/axolotl #2449 (merged): the mask must be dropped for sliding window attention",
         "AI-Hypercomputer/maxtext #5001 (merged): sliding window mask for packed sequences",
         "unslothai/unsloth #8253 (merged): carry the sliding window into SDPA"),
        "No 2D mask (transformers then ANDs window and document masks), or a window inside each document.",
        "a tiny MistralForCausalLM (random init, sliding_window=4), transformers' own sdpa", LEAK, _sliding_window,
        _mask_example),
)
