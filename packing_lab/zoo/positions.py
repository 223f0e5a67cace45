"""Bugs in position_ids: pads at position 0, positions left unpadded, continuous absolute positions."""
from __future__ import annotations

import numpy as np
import torch

from packing_core.batch.packed import segment_layout
from packing_core.check.batch import check_hf_batch
from packing_core.verify.equivalence import DEFAULT_LENGTHS, default_documents
from packing_lab.zoo._shared import (
    caught,
    flatten,
    report_arrays,
    says,
    smollm2,
    texts_documents,
    token_texts,
)
from packing_lab.zoo._types import Bug, ZooResult

_DOCS = ([11, 12, 13, 14, 15], [21, 22, 23, 24], [31, 32, 33])
PADS = ("pads_given_position_zero",)
RESTART = ("positions_do_not_restart",)


def _pad_row(fixed: dict, pad: int, position_ids: np.ndarray) -> dict:
    """``fixed`` with ``pad`` pad tokens at the end of its row (label -100), given the row's position ids."""
    return {"input_ids": np.pad(fixed["input_ids"], ((0, 0), (0, pad))),
            "labels": np.pad(fixed["labels"], ((0, 0), (0, pad)), constant_values=-100),
            "position_ids": position_ids}


def _documents_then_pads(fixed: dict, pad: int) -> np.ndarray:
    """Each token's document in ``fixed``'s row, then -1 for the ``pad`` pads after it (for a figure)."""
    return np.r_[check_hf_batch(fixed).row_document_ids[0], np.full(pad, -1)]


def _padded(fixed: dict, pad: int, zeros: bool) -> dict:
    pads = np.zeros(pad, dtype=np.int64) if zeros else np.arange(pad)
    return _pad_row(fixed, pad, np.concatenate([fixed["position_ids"], pads[None]], 1))


def _pads_at_zero() -> ZooResult:
    from transformers.masking_utils import find_packed_sequence_indices

    _, tok = smollm2()
    fixed = flatten(texts_documents(tok))
    T = fixed["input_ids"].shape[1]
    pad = -T % 16 or 16                                   # pad_to_multiple_of=16, as a collator would
    broken, good = _padded(fixed, pad, True), _padded(fixed, pad, False)

    def found(batch) -> np.ndarray:   # the sequence transformers assigns each token (None: one sequence)
        seq = find_packed_sequence_indices(torch.as_tensor(batch["position_ids"]))
        return np.zeros(batch["position_ids"].shape[1], dtype=np.int64) if seq is None else seq[0].numpy()

    def segments(batch):
        return int(found(batch).max()) + 1

    cb, cf = check_hf_batch(broken), check_hf_batch(good)
    return ZooResult(
        name="", symptom=f"transformers' find_packed_sequence_indices sees {segments(broken)} sequences in a row of "
                         f"2 documents + {pad} pads", fixed=f"{segments(good)} sequences (the pads are one dummy)",
        broken_max_abs_diff=None, fixed_max_abs_diff=None, changed_predictions=None,
        caught=caught(cb, PADS), silent_on_fix=not caught(cf, PADS), check_says=says(cb),
        document_ids=_documents_then_pads(fixed, pad), input_ids=broken["input_ids"][0],
        tokens=token_texts(tok, broken["input_ids"][0]),
        broken_position_ids=broken["position_ids"][0], fixed_position_ids=good["position_ids"][0],
        broken_segments=found(broken), fixed_segments=found(good))


def _pads_example():
    fixed = flatten(_DOCS)
    return _padded(fixed, 4, True), _padded(fixed, 4, False), {}


def _positions_not_padded() -> ZooResult:
    model, tok = smollm2()
    fixed = flatten(texts_documents(tok))
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
        text, refused = "nothing", False
    except ValueError as e:
        text, refused = f"refused (exit 2): {e}", True
    return ZooResult(
        name="", symptom=f"{T + pad} input_ids, {T} position_ids: transformers' sdpa path raises {raised}",
        fixed=f"{T + pad} of each: runs", broken_max_abs_diff=None, fixed_max_abs_diff=None,
        changed_predictions=None, caught=refused, silent_on_fix=check_hf_batch(good).sound, check_says=text,
        document_ids=_documents_then_pads(fixed, pad), input_ids=broken["input_ids"][0],
        tokens=token_texts(tok, broken["input_ids"][0]),
        broken_position_ids=broken["position_ids"][0], fixed_position_ids=good["position_ids"][0])


def _continuous_absolute() -> ZooResult:
    from packing_core.verify.run import verify_model

    broken = verify_model("tiny-abs", positions="continuous")
    fixed = verify_model("tiny-abs", positions="reset")
    rope = verify_model("tiny-rope", positions="continuous")
    lengths = np.diff(fixed.cu_seqlens)
    b, f, kw = _continuous_example(default_documents((40, 24, 56)))
    cb, cf = check_hf_batch(b, **kw), check_hf_batch(f, **kw)
    return ZooResult(
        name="", symptom=f"learned absolute positions: max |dlogit| {broken.max_abs_diff:.2f} with a correct mask "
                         f"(RoPE, same test: {rope.max_abs_diff:.1e})", fixed=f"max |dlogit| {fixed.max_abs_diff:.1e}",
        broken_max_abs_diff=broken.max_abs_diff, fixed_max_abs_diff=fixed.max_abs_diff, changed_predictions=None,
        caught=caught(cb, RESTART) and not broken.equivalent,
        silent_on_fix=not caught(cf, RESTART) and fixed.equivalent,
        check_says=f"{says(cb)}; verify --model tiny-abs --positions continuous: NOT EQUIVALENT",
        **report_arrays(broken, fixed, masks=False), broken_position_ids=segment_layout(lengths, "continuous").position_ids,
        fixed_position_ids=segment_layout(lengths, "reset").position_ids)


def _continuous_example(docs=_DOCS):
    fixed = flatten(docs, return_flash_attn_kwargs=True)
    broken = dict(fixed, position_ids=np.arange(fixed["input_ids"].shape[1])[None])
    return broken, fixed, {"attn_implementation": "flash_attention_2"}   # flash reads cu_seq_lens: the mask holds


BUGS: tuple[Bug, ...] = (
    Bug("pads-at-position-zero", "Pads given position id 0",
        "Boundaries found from positions treat every step that is not +1 as a new sequence: pads at position 0 "
        "become one-token documents, and cu_seqlens grows with the pad count. Harmless to the numbers at the end "
        "of a row (no real token reads a later pad): a few extra one-token sequences per row in the same varlen "
        "call, slightly wasteful (only a backend that makes one call per document, like the lab's segments, "
        "makes one call more per pad).",
        ("axolotl-ai-cloud/axolotl #2739 (merged): 'pad consecutive numbers for position ids'",
         "ByteDance-Seed/VeOmni #136 (merged): padded tokens belong to a single dummy sequence",
         "huggingface/transformers #35861 (review): position ids 'can include padding'"),
        "Pad position_ids with a running arange (one dummy sequence), and labels with -100.",
        "SmolLM2's tokenizer, transformers' find_packed_sequence_indices", PADS, _pads_at_zero, _pads_example),
    Bug("positions-not-padded", "input_ids padded to a multiple, position_ids not",
        "A collator pads input_ids, labels and attention_mask to a multiple of 8 but not position_ids (not in "
        "the tokenizer's model_input_names): shapes disagree and the model fails, or worse, misaligns.",
        ("hiyouga/LlamaFactory #10736 -> #10737 (merged): 'position_ids is not in model_input_names'",
         "hiyouga/LlamaFactory #10782 -> #10783 (merged)", "hiyouga/LlamaFactory #10659",
         "huggingface/trl #3996 (merged): pad-to-multiple-of and padding-free 'silently not compatible'"),
        "Pad position_ids to the same length as input_ids.",
        "SmolLM2-135M, transformers' own sdpa", (), _positions_not_padded,
        caught_note="the batch check refuses mismatched shapes (exit 2)"),
    Bug("continuous-absolute-positions", "Continuous positions on learned absolute position embeddings",
        "With RoPE and a correct mask, continuous positions are harmless (only distances matter). With learned "
        f"absolute positions (GPT-2 wpe, OPT, RoBERTa), document 1 gets the embeddings of positions {DEFAULT_LENGTHS[0]}.., "
        "so its outputs change even with a perfect mask. (Under transformers' sdpa/eager, continuous positions "
        "also remove the packed mask: documents_share_attention.)",
        ("huggingface/transformers #47496 -> #47525 (merged), a sibling bug: positions that restart at the "
         "wrong origin (0, where RoBERTa-family models start at padding_idx + 1); same mechanism, absolute "
         "embeddings read the wrong rows",
         "meta-pytorch/torchtune #875: 'an unwarranted later position bias'"),
        "Reset positions per document, from the model's own start (position_ids_start).",
        "the lab's tiny-abs model (random init), vs tiny-rope", RESTART, _continuous_absolute, _continuous_example),
)
