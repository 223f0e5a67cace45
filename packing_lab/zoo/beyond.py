"""Bugs beyond attention: the layers that mix tokens without a mask, and a kernel's missing causal flag.

Reproduced on a CPU with the real library code where it runs here: transformers' own Qwen3-Next
and LFM2 classes (tiny, random-init, for speed: :mod:`packing_core.verify.families_build`). Their
fast kernels (causal-conv1d, flash-linear-attention) need CUDA; without them transformers refuses
a batch that carries ``seq_idx`` or ``cu_seq_lens``, so the fix shown here is the one that runs
without them, one document per row, and each entry names the GPU fix. Where no library code runs
here (flash-linear-attention's layers, a varlen kernel), the lab's own teaching models reproduce
the same arithmetic, and the entry says so.
"""
from __future__ import annotations

import contextlib
import importlib
from functools import lru_cache

import numpy as np
import torch

from packing_core.check.batch import check_hf_batch
from packing_core.verify.batch_run import run_hf_batch
from packing_lab.zoo._shared import caught, flatten, says
from packing_lab.zoo._types import Bug, ZooResult

_DOCS = ([11, 12, 13, 14, 15, 16, 17], [21, 22, 23, 24, 25, 26, 27, 28, 29], [31, 32, 33, 34, 35])
BOTH_KERNELS = ("causal-conv1d", "flash-linear-attention")
STATE, CONV = ("state_crosses_documents",), ("convolution_reads_previous_document",)
# model type -> (its modeling module, the kernel functions whose first call is each layer kind's output)
_TRACED = {"qwen3_next": ("qwen3_next", (("convolution", "causal_conv1d_fn"),
                                         ("recurrence", "torch_chunk_gated_delta_rule"))),
           "lfm2": ("lfm2", (("convolution", "causal_conv1d_fn"),))}


@lru_cache(maxsize=2)
def _model(model_type: str):
    from packing_core.verify.families_build import build_tiny

    return build_tiny(model_type)


def _one_per_row(docs) -> dict:
    """The same documents, one per row, right-padded: what runs without the kernels."""
    width = max(map(len, docs))
    ids = np.zeros((len(docs), width), np.int64)
    for r, d in enumerate(docs):
        ids[r, :len(d)] = d
    mask = (np.arange(width)[None] < np.array([len(d) for d in docs])[:, None]).astype(np.int64)
    return {"input_ids": ids, "attention_mask": mask, "labels": np.where(mask == 1, ids, -100)}


@contextlib.contextmanager
def _traced(model_type: str):
    """Record the first output of each traced kernel function (the first layer's) during a forward."""
    module_name, traced = _TRACED[model_type]
    module = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
    seen: dict[str, torch.Tensor] = {}
    saved = {name: getattr(module, name) for _, name in traced}

    def wrap(kind, fn):
        def inner(*args, **kwargs):
            out = fn(*args, **kwargs)
            first = out[0] if isinstance(out, tuple) else out
            if kind not in seen:       # conv [B, C, T] or recurrence [B, T, H, D] -> [B, T, C]
                seen[kind] = first.transpose(1, 2) if kind == "convolution" else first.flatten(2)
            return out
        return inner

    try:
        for kind, name in traced:
            setattr(module, name, wrap(kind, saved[name]))
        yield seen
    finally:
        for name, fn in saved.items():
            setattr(module, name, fn)


@torch.inference_mode()
def _layer_diffs(model_type: str, batch: dict, spans) -> np.ndarray:
    """float [kinds, T]: each traced layer's output in ``batch`` vs each document alone, in packed-row order."""
    model = _model(model_type)
    kinds = [k for k, _ in _TRACED[model_type][1]]
    ids = torch.as_tensor(batch["input_ids"])
    kw = {k: torch.as_tensor(v) for k, v in batch.items() if k in ("position_ids", "attention_mask")}
    with _traced(model_type) as packed:
        model(input_ids=ids, use_cache=False, **kw)
    out = []
    for kind in kinds:
        row = []
        for (r, s, n), doc in zip(spans, _DOCS):
            with _traced(model_type) as alone:
                model(input_ids=torch.tensor([doc]), use_cache=False)
            row.append((packed[kind][r, s:s + n] - alone[kind][0]).abs().amax(-1).float().numpy())
        out.append(np.concatenate(row))
    return np.stack(out)


def _transformers_bug(model_type: str, caught_by) -> ZooResult:
    """The flattened batch (position_ids only) against one document per row, on transformers' own class."""
    model = _model(model_type)
    broken, fixed = flatten(_DOCS), _one_per_row(_DOCS)
    cb = check_hf_batch(broken, "sdpa", model_type=model_type, kernels=())
    cf = check_hf_batch(fixed, "sdpa", model_type=model_type, kernels=())
    vb, vf = run_hf_batch(model, cb), run_hf_batch(model, cf)
    assert vb.token_diffs is not None and vf.token_diffs is not None          # a run over every row keeps them
    starts = np.cumsum([0, *map(len, _DOCS)])[:-1]
    packed_spans = [(0, int(s), len(d)) for s, d in zip(starts, _DOCS)]
    row_spans = [(r, 0, len(d)) for r, d in enumerate(_DOCS)]
    b_diffs = vb.token_diffs[0]
    f_diffs = np.concatenate([vf.token_diffs[r, :len(d)] for r, d in enumerate(_DOCS)])
    kinds = tuple(k for k, _ in _TRACED[model_type][1])
    return ZooResult(
        name="", symptom=f"max |dlogit| {b_diffs.max():.2f} vs each document alone; {vb.changed_top1} top-1 "
                         f"predictions changed; the check says {', '.join(s for k, s in cb.layer_statuses)}",
        fixed=f"max |dlogit| {f_diffs.max():.1e} (one document per row)", broken_max_abs_diff=float(b_diffs.max()),
        fixed_max_abs_diff=float(f_diffs.max()), changed_predictions=vb.changed_top1,
        caught=caught(cb, caught_by), silent_on_fix=not caught(cf, caught_by), check_says=says(cb),
        document_ids=cb.row_document_ids[0], input_ids=broken["input_ids"][0],
        tokens=tuple(map(str, broken["input_ids"][0])), tolerance=max(vb.tolerance, vf.tolerance),
        broken_token_diffs=b_diffs, fixed_token_diffs=f_diffs, layer_kinds=kinds,
        broken_layer_diffs=_layer_diffs(model_type, broken, packed_spans),
        fixed_layer_diffs=_layer_diffs(model_type, fixed, row_spans))


def _recurrent_state() -> ZooResult:
    return _transformers_bug("qwen3_next", STATE)


def _short_conv() -> ZooResult:
    return _transformers_bug("lfm2", CONV)


def _flat_example(model_type: str):
    def example():
        return flatten(_DOCS), _one_per_row(_DOCS), {"model_type": model_type, "kernels": ()}
    return example


def _unpad_offsets(T: int) -> np.ndarray:
    """cu_seqlens as transformers' flash path derives them from a 2D mask: an all-ones one gives ``[0, T]``."""
    from transformers.modeling_flash_attention_utils import _get_unpad_data

    return _get_unpad_data(torch.ones(1, T, dtype=torch.long))[1].numpy()


def _mask_example():
    fixed = flatten(_DOCS, return_flash_attn_kwargs=True, return_seq_idx=True)
    T = fixed["input_ids"].shape[1]
    cu = _unpad_offsets(T)
    broken = dict(fixed, cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=T, max_length_k=T)
    return broken, fixed, {"model_type": "qwen3_next", "kernels": BOTH_KERNELS}


@torch.inference_mode()
def _boundaries_from_mask() -> ZooResult:
    """The teaching model's recurrence given cu_seqlens re-derived from an all-ones mask; the others given the right ones."""
    from packing_core.models.hybrid import KINDS, hybrid_model, seq_idx_from_cu

    model = hybrid_model()
    ids = torch.tensor([t for d in _DOCS for t in d])
    T = len(ids)
    right = torch.tensor(np.cumsum([0, *map(len, _DOCS)]), dtype=torch.int32)
    seq_idx = seq_idx_from_cu(right, T)

    def run(recurrence_cu):
        x, inputs, outputs = model.tok_emb(ids), {}, {}
        for norm, kind in zip(model.norms, KINDS):
            h = norm(x)
            cu = recurrence_cu if kind == "recurrence" else right
            inputs[kind], outputs[kind] = h, model.layer(kind, h, cu, T, seq_idx=seq_idx)
            x = x + outputs[kind]
        return model.lm_head(model.norms[3](x)), outputs

    alone_logits, alone_layers = [], []
    for d in _DOCS:
        cu = torch.tensor([0, len(d)], dtype=torch.int32)
        trace: dict = {}
        alone_logits.append(model(torch.tensor(d), torch.arange(len(d)), cu, len(d), trace=trace))
        alone_layers.append({k: model.layer(k, trace[k], cu, len(d)) for k in KINDS})
    ref = torch.cat(alone_logits)
    out = {}
    for name, cu in (("broken", torch.as_tensor(_unpad_offsets(T), dtype=torch.int32)), ("fixed", right)):
        logits, layers = run(cu)
        out[name] = ((logits - ref).abs().amax(-1).numpy(),
                     np.stack([(layers[k] - torch.cat([a[k] for a in alone_layers])).abs().amax(-1).numpy()
                               for k in KINDS]))
    broken_batch, fixed_batch, kw = _mask_example()
    cb, cf = check_hf_batch(broken_batch, **kw), check_hf_batch(fixed_batch, **kw)
    tol = 1e-4 * max(1.0, float(ref.abs().max()))
    (bd, bl), (fd, fl) = out["broken"], out["fixed"]
    return ZooResult(
        name="", symptom=f"max |dlogit| {bd.max():.2f} vs each document alone: only the recurrence read the "
                         f"re-derived cu_seqlens {_unpad_offsets(T).tolist()}", fixed=f"max |dlogit| {fd.max():.1e}",
        broken_max_abs_diff=float(bd.max()), fixed_max_abs_diff=float(fd.max()), changed_predictions=None,
        caught=caught(cb, STATE), silent_on_fix=not caught(cf, STATE), check_says=says(cb),
        document_ids=np.repeat(np.arange(len(_DOCS)), [len(d) for d in _DOCS]), input_ids=ids.numpy(),
        tokens=tuple(map(str, ids.tolist())), tolerance=tol, broken_token_diffs=bd, fixed_token_diffs=fd,
        layer_kinds=KINDS, broken_layer_diffs=bl, fixed_layer_diffs=fl)


def _varlen_without_causal() -> ZooResult:
    from packing_core.verify.run import verify_model

    broken, fixed = verify_model("tiny-rope", causal=False), verify_model("tiny-rope")
    bc, fc = broken.causality, fixed.causality
    assert bc is not None and fc is not None and bc.first_moved is not None    # verify_model runs causality too
    cu = np.asarray(fixed.cu_seqlens)
    return ZooResult(
        name="", symptom=f"alone vs packed: {broken.verdict.split('.')[0]} (max |dlogit| {broken.max_abs_diff:.1e}); "
                         f"causality: changing later tokens moved earlier logits by {bc.max_abs_diff:.2f}, first at "
                         f"position {bc.first_moved[1]}",
        fixed=f"causality: max |dlogit| {fc.max_abs_diff:.1e}", broken_max_abs_diff=bc.max_abs_diff,
        fixed_max_abs_diff=fc.max_abs_diff, changed_predictions=None, caught=bc.future_visible,
        silent_on_fix=not fc.future_visible,
        check_says=f"verify: {broken.verdict.split('.')[0]} (isolation); causality: future_visible (error)",
        document_ids=np.repeat(np.arange(len(cu) - 1), np.diff(cu)), tolerance=bc.tolerance,
        broken_token_diffs=bc.token_diffs[0], fixed_token_diffs=fc.token_diffs[0])


BUGS: tuple[Bug, ...] = (
    Bug("recurrent-state-crosses", "A recurrent state carries one document into the next",
        "A Gated DeltaNet, Mamba or RWKV layer keeps a state from token to token. Packed with position_ids "
        "alone, the state runs from each document into every token of the next: the attention layers isolate "
        "the documents and the check of attention says SOUND, while every later document differs from its alone "
        "run. transformers' reference torch code never receives the boundaries, and refuses them (it needs "
        "flash-linear-attention): silent unless the batch carries cu_seq_lens.",
        ("huggingface/transformers #46851 / #46859: Qwen3.5 silently produced incorrect results whenever "
         "cu_seqlens were omitted with variable-length inputs",
         "THUDM/slime #1686 (merged): cu_seqlens reached ShortConvolution but not chunk_gated_delta_rule",
         "NVIDIA-NeMo/Automodel #2147 (merged): layer-output difference 4.0e-01 before the fix, 0 after"),
        "Pass cu_seq_lens_q/_k (TRL's padding-free collator does) and install flash-linear-attention on the CUDA "
        "machine that trains; without it, one document per row (shown here).",
        "a tiny Qwen3NextForCausalLM (random init), transformers' own code", STATE, _recurrent_state,
        _flat_example("qwen3_next")),
    Bug("short-conv-bleeds", "A short convolution reads the last tokens of the previous document",
        "A causal convolution of width k reads the k - 1 tokens before each token: 3 in Mamba's and Gated "
        "DeltaNet's (k = 4), 2 in LFM2's (k = 3, conv_L_cache). Packed, the first k - 1 tokens of each document "
        "read the end of the previous one, and every later layer carries it to the rest of the document. The "
        "convolution keeps documents apart only when its kernel reads the boundaries in its own form: seq_idx for "
        "causal-conv1d (Mamba, LFM2), cu_seqlens for flash-linear-attention's ShortConvolution (Gated DeltaNet).",
        ("NVIDIA-NeMo/Automodel #2147 (merged): causal_conv1d_fn was called without seq_idx, so sample 1's last 3 "
         "tokens bled into sample 2's first 3",
         "EvolvingLMMs-Lab/lmms-engine #167 (merged): the depthwise Conv1d (kernel 4) bleeds across sample "
         "boundaries; fixed by passing seq_idx to causal_conv1d_fn",
         "huggingface/transformers #46588 (merged): Lfm2ShortConv threads seq_idx to causal_conv1d_fn"),
        "Pass seq_idx (TRL's padding-free collator, or DataCollatorWithFlattening(return_seq_idx=True)) and "
        "install causal-conv1d on the CUDA machine that trains; without it, one document per row (shown here).",
        "a tiny Lfm2ForCausalLM (random init), transformers' own code", CONV, _short_conv, _flat_example("lfm2")),
    Bug("boundaries-from-attention-mask", "Boundaries re-derived from an all-ones attention_mask",
        "A layer that derives its sequence offsets from a 2D attention_mask, instead of the cu_seqlens it was "
        "given, sees one sequence per row when the mask is all ones ([0, T]): its recurrent state runs across "
        "every packed document, although every other layer keeps them apart. Reproduced on the lab's teaching "
        "model (flash-linear-attention needs CUDA): only its recurrence reads the re-derived offsets.",
        ("fla-org/flash-linear-attention #838 (fixed by #842): gated_deltanet overwrote the caller's cu_seqlens "
         "with those of an all-ones attention_mask, collapsing them to [0, total]",
         "fla-org/flash-linear-attention #1086 / #1088: the same in KimiDeltaAttention, 0.92 max difference"),
        "Give the kernel the batch's own cu_seqlens (built from the documents), and pass no all-ones "
        "attention_mask with a padding-free batch.",
        "the lab's tiny-hybrid teaching model (attention, convolution, recurrence)", STATE, _boundaries_from_mask,
        _mask_example),
    Bug("varlen-without-causal", "A varlen kernel called without its causal flag",
        "torch's varlen_attn defaults to window_size=(-1, -1) and flash-attn's flash_attn_varlen_func to "
        "causal=False: full attention inside each document, so every token reads its own future. Alone and "
        "packed compute the same wrong thing, so comparing them says EQUIVALENT; only the causality check (change "
        "the tokens after position i, the logits up to i must not move) sees it.",
        ("pytorch/pytorch torch/nn/attention/varlen.py: varlen_attn(..., window_size=(-1, -1)), '(-1, -1) for "
         "full attention (default), (-1, 0) for causal attention'",
         "Dao-AILab/flash-attention flash_attn/flash_attn_interface.py: flash_attn_varlen_func(..., causal=False)"),
        "Ask for causality: flash_attn_varlen_func(..., causal=True), varlen_attn(..., window_size=(-1, 0)).",
        "the lab's tiny-rope model, its segments backend with causal=False (what both kernels compute by default)",
        ("future_visible",), _varlen_without_causal),
)
