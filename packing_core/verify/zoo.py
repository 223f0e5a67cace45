"""The bug zoo: packing bugs that reached users of real projects, each reproduced live.

Every entry says what goes wrong, where it was reported (repository and number), how it
is fixed, and reproduces it on the lab's models, through transformers' own code where
the bug lives there: the broken setup, the fixed one, and what the lab's checks say of
each. The listing needs no model; a reproduction loads one (SmolLM2, or a tiny one).

    >>> [b.name for b in ZOO][:3]
    ['mask-hides-packing', 'cache-hides-packing', 'positions-without-mask']
    >>> len(ZOO) >= 8
    True
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
import torch

from packing_core._validate import choice
from packing_core.batch.hf_check import check_hf_batch
from packing_core.verify.batch_run import run_hf_batch
from packing_core.verify.equivalence import DEFAULT_LENGTHS, default_documents


@dataclass(frozen=True)
class ZooBug:
    name: str
    title: str
    what: str                    # what goes wrong
    reported: tuple[str, ...]    # "owner/repo #N: what it says", from the trackers
    fix: str
    model: str                   # what the reproduction runs on
    check: str                   # which of the lab's checks catches it

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ZooResult:
    """One reproduction: the broken setup and the fixed one, measured and checked."""

    name: str
    symptom: str                          # the measured symptom of the broken setup, in words
    fixed: str                            # the same measurement on the fixed setup
    broken_max_abs_diff: float | None     # max |dlogit| vs each document alone (None: not a logit bug)
    fixed_max_abs_diff: float | None
    changed_predictions: int | None       # top-1 next tokens changed by the bug
    caught: bool                          # the lab's check flags the broken setup
    silent_on_fix: bool                   # ... and says nothing of the fixed one
    check_says: str                       # what the check reported on the broken setup

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- models and batches
@lru_cache(maxsize=1)
def _smollm2():
    from packing_core.models.pretrained import load_pretrained

    return load_pretrained()


def _texts_documents(tokenizer) -> list[list[int]]:
    from packing_core.verify.registry import DEFAULT_TEXTS, tokenise_texts

    return tokenise_texts(tokenizer, DEFAULT_TEXTS)


def _flatten(documents, **kw) -> dict:
    """transformers' own ``DataCollatorWithFlattening``: the padding-free batch as trainers build it."""
    from transformers import DataCollatorWithFlattening

    batch = DataCollatorWithFlattening(return_tensors="np", **kw)([{"input_ids": d} for d in documents])
    return {k: np.asarray(v, dtype=np.int64) for k, v in batch.items() if not k.startswith("max_length")}


def _names(check) -> str:
    return ", ".join(v.name for v in check.violations) or "nothing"


def _compare_batches(model, broken: dict, fixed: dict, *, use_cache_broken=False) -> ZooResult:
    cb, cf = check_hf_batch(broken), check_hf_batch(fixed)
    vb = run_hf_batch(model, cb, use_cache=use_cache_broken)
    vf = run_hf_batch(model, cf)
    return ZooResult(
        name="", symptom=f"max |dlogit| {vb.max_abs_diff:.2f} vs each document alone; {vb.changed_top1} top-1 "
                         "predictions changed", fixed=f"max |dlogit| {vf.max_abs_diff:.1e}",
        broken_max_abs_diff=vb.max_abs_diff, fixed_max_abs_diff=vf.max_abs_diff,
        changed_predictions=vb.changed_top1, caught=bool(cb.violations), silent_on_fix=cf.sound,
        check_says=_names(cb))


# ---------------------------------------------------------------- reproductions
def _mask_hides_packing() -> ZooResult:
    model, tok = _smollm2()
    fixed = _flatten(_texts_documents(tok))
    broken = dict(fixed, attention_mask=np.ones_like(fixed["input_ids"]))
    return _compare_batches(model, broken, fixed)


def _verified(broken_settings: dict, fixed_settings: dict, check_says: str) -> ZooResult:
    """A bug that only the alone-vs-packed check sees: SmolLM2 verified broken and fixed."""
    from packing_core.verify.registry import verify_pretrained

    pre = _smollm2()
    broken = verify_pretrained(pretrained=pre, **broken_settings)
    fixed = verify_pretrained(pretrained=pre, **fixed_settings)
    return ZooResult(
        name="", symptom=f"max |dlogit| {broken.max_abs_diff:.2f}; {len(broken.changes)} top-1 predictions changed",
        fixed=f"max |dlogit| {fixed.max_abs_diff:.1e}", broken_max_abs_diff=broken.max_abs_diff,
        fixed_max_abs_diff=fixed.max_abs_diff, changed_predictions=len(broken.changes),
        caught=not broken.equivalent, silent_on_fix=fixed.equivalent, check_says=check_says)


def _cache_hides_packing() -> ZooResult:
    return _verified(dict(backend="sdpa", use_cache=True), dict(backend="sdpa", use_cache=False),
                     "verify --model smollm2 --backend sdpa --use-cache: NOT EQUIVALENT (the batch itself is sound)")


def _positions_without_mask() -> ZooResult:
    return _verified(dict(mask="off", positions="reset"), dict(mask="on", positions="reset"),
                     "verify --mask off: NOT EQUIVALENT (positions reset, yet document 1 reads document 0)")


def _labels_over_row() -> ZooResult:
    model, tok = _smollm2()
    fixed = _flatten(_texts_documents(tok))
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
        caught=bool(cb.violations), silent_on_fix=cf.sound, check_says=_names(cb))


def _pad_row(fixed: dict, pad: int, position_ids: np.ndarray) -> dict:
    """``fixed`` with ``pad`` pad tokens at the end of its row (label -100), given the row's position ids."""
    return {"input_ids": np.pad(fixed["input_ids"], ((0, 0), (0, pad))),
            "labels": np.pad(fixed["labels"], ((0, 0), (0, pad)), constant_values=-100),
            "position_ids": position_ids}


def _pads_at_zero() -> ZooResult:
    from transformers.masking_utils import find_packed_sequence_indices

    _, tok = _smollm2()
    fixed = _flatten(_texts_documents(tok))
    T = fixed["input_ids"].shape[1]
    pad = -T % 16 or 16                                   # pad_to_multiple_of=16, as a collator would

    def padded(pad_positions):
        return _pad_row(fixed, pad, np.concatenate([fixed["position_ids"], pad_positions[None]], 1))

    broken, good = padded(np.zeros(pad, dtype=np.int64)), padded(np.arange(pad))

    def segments(batch):
        found = find_packed_sequence_indices(torch.as_tensor(batch["position_ids"]))
        return 1 if found is None else int(found.max()) + 1

    cb, cf = check_hf_batch(broken), check_hf_batch(good)
    return ZooResult(
        name="", symptom=f"transformers' find_packed_sequence_indices sees {segments(broken)} sequences in a row of "
                         f"2 documents + {pad} pads", fixed=f"{segments(good)} sequences (the pads are one dummy)",
        broken_max_abs_diff=None, fixed_max_abs_diff=None, changed_predictions=None,
        caught=bool(cb.violations), silent_on_fix=cf.sound, check_says=_names(cb))


def _positions_not_padded() -> ZooResult:
    model, tok = _smollm2()
    fixed = _flatten(_texts_documents(tok))
    T = fixed["input_ids"].shape[1]
    pad = -T % 8 or 8
    broken = _pad_row(fixed, pad, fixed["position_ids"])     # the bug: positions left unpadded
    good = dict(broken, position_ids=np.concatenate([fixed["position_ids"], np.arange(pad)[None]], 1))
    try:
        with torch.inference_mode():
            model(input_ids=torch.as_tensor(broken["input_ids"]), position_ids=torch.as_tensor(broken["position_ids"]),
                  use_cache=False)
        raised = "no error"
    except (IndexError, RuntimeError, ValueError) as e:
        raised = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    try:
        check_hf_batch(broken)
        says, caught = "nothing", False
    except ValueError as e:
        says, caught = f"refused (exit 2): {e}", True
    return ZooResult(
        name="", symptom=f"{T + pad} input_ids, {T} position_ids: transformers' sdpa path raises {raised}",
        fixed=f"{T + pad} of each: runs", broken_max_abs_diff=None, fixed_max_abs_diff=None,
        changed_predictions=None, caught=caught, silent_on_fix=check_hf_batch(good).sound, check_says=says)


def _continuous_absolute() -> ZooResult:
    from packing_core.verify.registry import verify_model

    broken = verify_model("tiny-abs", positions="continuous")
    fixed = verify_model("tiny-abs", positions="reset")
    rope = verify_model("tiny-rope", positions="continuous")
    docs = default_documents((40, 24, 56))
    fixed_batch = _flatten(docs, return_flash_attn_kwargs=True)
    broken_batch = dict(fixed_batch, position_ids=np.arange(fixed_batch["input_ids"].shape[1])[None])
    cb, cf = check_hf_batch(broken_batch), check_hf_batch(fixed_batch)
    return ZooResult(
        name="", symptom=f"learned absolute positions: max |dlogit| {broken.max_abs_diff:.2f} with a correct mask "
                         f"(RoPE, same test: {rope.max_abs_diff:.1e})", fixed=f"max |dlogit| {fixed.max_abs_diff:.1e}",
        broken_max_abs_diff=broken.max_abs_diff, fixed_max_abs_diff=fixed.max_abs_diff, changed_predictions=None,
        caught=bool(cb.violations) and not broken.equivalent, silent_on_fix=cf.sound and fixed.equivalent,
        check_says=f"{_names(cb)}; verify --model tiny-abs --positions continuous: NOT EQUIVALENT")


def _sliding_window() -> ZooResult:
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, sliding_window=4,
                        max_position_embeddings=128, attn_implementation="sdpa")
    model = MistralForCausalLM(cfg).eval()
    fixed = _flatten(default_documents((12, 8, 10), seed=1))
    broken = dict(fixed, attention_mask=np.ones_like(fixed["input_ids"]))
    out = _compare_batches(model, broken, fixed)
    return ZooResult(**{**asdict(out), "symptom": "sliding window 4 spans documents: " + out.symptom})


def _loss_per_row() -> ZooResult:
    from packing_core.verify.loss_lesson import loss_lesson

    lesson = loss_lesson([[4], [60, 60]])   # a short document alone in its row, two long ones sharing one
    token, row = np.array(lesson.expected["token"]), np.array(lesson.measured["row"])
    return ZooResult(
        name="", symptom=f"per-row mean: the 4-token document weighs {row[0]:.3f} of the gradient, "
                         f"{row[0] / token[0]:.1f}x its per-token share {token[0]:.3f}",
        fixed=f"per-token mean (Trainer/TRL): weights {np.round(lesson.measured['token'], 3).tolist()} = token shares",
        broken_max_abs_diff=None, fixed_max_abs_diff=None, changed_predictions=None,
        caught=not np.allclose(row, token), silent_on_fix=bool(np.allclose(lesson.measured["token"], token)),
        check_says="gradient weights per document (autograd, tiny model) differ from the per-token shares")


# ---------------------------------------------------------------- the entries
ZOO: tuple[ZooBug, ...] = (
    ZooBug("mask-hides-packing", "An all-ones attention_mask switches off sdpa/eager's packed detection",
           "transformers' sdpa/eager find documents from position_ids only when attention_mask is None and there is "
           "no cache. A collator that adds an all-ones 2D mask to a padding-free batch gets a plain causal mask: "
           "every document reads the ones before it, silently; the loss still falls.",
           ("huggingface/transformers #46634 (closed, not merged): 'the attention_mask is typically a 2D all-ones "
            "tensor, which silently disables packed detection'",
            "huggingface/transformers #39194: packed format for flex/sdpa/eager through the mask",
            "axolotl-ai-cloud/axolotl #3796 (merged): sdpa/eager never dropped the mask, so 'documents attended "
            "across each other'"),
           "Pass no attention_mask with packed position_ids (TRL's collator does not create one), or a 4D mask.",
           "SmolLM2-135M, transformers' own sdpa", "check_hf_batch: attention_mask_hides_packing"),
    ZooBug("cache-hides-packing", "A KV cache (use_cache defaults to True) switches off sdpa/eager/flex's packed detection",
           "LLaMA-style configs default to use_cache=True, so a plain model(**batch) call creates a cache even in "
           "train mode, and transformers' sdpa/eager/flex skip their packed-sequence detection: documents read "
           "each other. (FlashAttention's detection does not look at the cache.)",
           ("huggingface/transformers #46634 (the same gate, attention_mask is None and cache is None)",
            "huggingface/trl sft_trainer.py compute_loss: inputs['use_cache'] = False"),
           "use_cache=False (Trainer sets config.use_cache from TrainingArguments.use_cache, default False; "
           "TRL forces it); a hand-written loop must pass it.",
           "SmolLM2-135M, transformers' own sdpa", "verify --backend sdpa --use-cache (the batch looks sound)"),
    ZooBug("positions-without-mask", "Positions reset per document, but no document mask",
           "Where the mask comes from elsewhere (an explicit causal mask, cu_seqlens [0, T], a 2D attention_mask "
           "or a cache), resetting position_ids changes only the rotary phases, and document 1 still reads "
           "document 0. (Only transformers' padding-free path, with no mask and no cache, turns the resets into a "
           "document mask.)",
           ("huggingface/trl #784: 'the second sample paying attention to the first'",
            "huggingface/trl #1230 / #1235 (not merged): packing without cross contamination",
            "allenai/open-instruct #669", "hiyouga/LlamaFactory #2289",
            "huggingface/nanoVLM #204: 'resetting position IDs alone is not enough'"),
           "A document mask: TRL #3526 (position_ids + flash varlen), LlamaFactory #4224 (neat_packing), "
           "torchtune #875 (block-causal mask and per-sample positions).",
           "SmolLM2-135M, our segments backend with cu_seqlens [0, T]", "verify --mask off: NOT EQUIVALENT"),
    ZooBug("labels-over-row", "Labels shifted over the whole row",
           "transformers shifts labels by one over the whole row, so the last token of document 0 is trained to "
           "predict the first token of document 1 unless that label is -100.",
           ("pytorch/torchtitan #4075 (merged): 'the last token of one document is used to predict the first token "
            "of the next document'",
            "meta-pytorch/torchtune #1177", "alex-hh/profam #504 (merged)", "huggingface/trl #5854 (review comment)"),
           "-100 at every document's first label: DataCollatorWithFlattening's separator_id, TRL's "
           "labels[position_ids == 0] = -100.",
           "SmolLM2-135M, transformers' ForCausalLMLoss", "check_hf_batch: label_crosses_boundary"),
    ZooBug("pads-at-position-zero", "Pads given position id 0",
           "Boundaries found from positions treat every step that is not +1 as a new sequence: pads at position 0 "
           "become one-token documents, and cu_seqlens grows with the pad count.",
           ("axolotl-ai-cloud/axolotl #2739 (merged): 'pad consecutive numbers for position ids'",
            "ByteDance-Seed/VeOmni #136 (merged): padded tokens belong to a single dummy sequence",
            "huggingface/transformers #35861 (review): position ids 'can include padding'"),
           "Pad position_ids with a running arange (one dummy sequence), and labels with -100.",
           "SmolLM2's tokenizer, transformers' find_packed_sequence_indices", "check_hf_batch: pads_given_position_zero"),
    ZooBug("positions-not-padded", "input_ids padded to a multiple, position_ids not",
           "A collator pads input_ids, labels and attention_mask to a multiple of 8 but not position_ids (not in "
           "the tokenizer's model_input_names): shapes disagree and the model fails, or worse, misaligns.",
           ("hiyouga/LlamaFactory #10736 -> #10737 (merged): 'position_ids is not in model_input_names'",
            "hiyouga/LlamaFactory #10782 -> #10783 (merged)", "hiyouga/LlamaFactory #10659",
            "huggingface/trl #3996 (merged): pad-to-multiple-of and padding-free 'silently not compatible'"),
           "Pad position_ids to the same length as input_ids.",
           "SmolLM2-135M, transformers' own sdpa", "check_hf_batch refuses the batch (exit 2), naming both shapes"),
    ZooBug("continuous-absolute-positions", "Continuous positions on learned absolute position embeddings",
           "With RoPE and a correct mask, continuous positions are harmless (only distances matter). With learned "
           f"absolute positions (GPT-2 wpe, OPT, RoBERTa), document 1 gets the embeddings of positions {DEFAULT_LENGTHS[0]}.., "
           "so its outputs change even with a perfect mask.",
           ("huggingface/transformers #47496 -> #47525 (merged), a sibling bug: positions that restart at the "
            "wrong origin (0, where RoBERTa-family models start at padding_idx + 1); same mechanism, absolute "
            "embeddings read the wrong rows",
            "meta-pytorch/torchtune #875: 'an unwarranted later position bias'"),
           "Reset positions per document, from the model's own start (position_ids_start).",
           "the lab's tiny-abs model (random init), vs tiny-rope",
           "check_hf_batch: positions_do_not_restart; verify --positions continuous"),
    ZooBug("sliding-window-crosses", "A sliding window that spans documents",
           "A window mask built from token indices, without the document mask, lets a token read the last few "
           "tokens of the previous document. transformers 5.24 combines the window with the packed mask, but only "
           "when packed detection is on: an all-ones attention_mask turns it off.",
           ("axolotl-ai-cloud/axolotl #2449 (merged): the mask must be dropped for sliding window attention",
            "AI-Hypercomputer/maxtext #5001 (merged): sliding window mask for packed sequences",
            "unslothai/unsloth #8253 (merged): carry the sliding window into SDPA"),
           "No 2D mask (transformers then ANDs window and document masks), or a window inside each document.",
           "a tiny MistralForCausalLM (random init, sliding_window=4), transformers' own sdpa",
           "check_hf_batch: attention_mask_hides_packing"),
    ZooBug("loss-per-row", "Loss averaged per row (or per micro-batch) instead of per token",
           "A mean per row, then over rows, gives every row the same weight: a short document alone in a row weighs "
           "as much as two long ones together, far above its tokens' share; how rows are packed then changes what "
           "is learned.",
           ("huggingface/transformers #34191 (merged): num_items_in_batch for gradient accumulation",
            "huggingface/transformers #34242 -> #34373 (merged): average tokens across devices",
            "huggingface/trl #2175", "hiyouga/LlamaFactory #7443", "volcengine/verl #3994 (merged): normalize sft "
            "loss by num_tokens in global batch"),
           "Sum the token losses and divide by the number of counted tokens in the global batch "
           "(transformers' Trainer: num_items_in_batch; TRL's SFTTrainer inherits it).",
           "the lab's tiny-rope model (random init)", "gradient weight per document vs its token share"),
)

_REPRODUCE: dict[str, Callable[[], ZooResult]] = {
    "mask-hides-packing": _mask_hides_packing, "cache-hides-packing": _cache_hides_packing,
    "positions-without-mask": _positions_without_mask, "labels-over-row": _labels_over_row,
    "pads-at-position-zero": _pads_at_zero, "positions-not-padded": _positions_not_padded,
    "continuous-absolute-positions": _continuous_absolute, "sliding-window-crosses": _sliding_window,
    "loss-per-row": _loss_per_row,
}
ZOO_NAMES = tuple(b.name for b in ZOO)


def zoo_entry(name: str) -> ZooBug:
    choice("bug", name, ZOO_NAMES)
    return next(b for b in ZOO if b.name == name)


def reproduce_bug(name: str) -> ZooResult:
    """Run one entry's reproduction: the broken setup and the fixed one, measured and checked."""
    choice("bug", name, ZOO_NAMES)
    with torch.inference_mode(False):
        result = _REPRODUCE[name]()
    return ZooResult(**{**asdict(result), "name": name})
