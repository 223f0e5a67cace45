"""Packed-vs-alone equivalence: does packing change what the model computes?

Run each document alone, then all of them packed in one row, and compare the logits of
every document's tokens::

    alone:   [a0 a1 a2]            [b0 b1]             positions 0.. each, cu [0 3] / [0 2]
    packed:  [a0 a1 a2 b0 b1]      cu [0 3 5]          positions [0 1 2 0 1]
    compare: logits(a alone) vs logits(row)[0:3],  logits(b alone) vs logits(row)[3:5]

A correct setup agrees within a tolerance fitted to the dtype. With the mask off
(the runner gets ``cu_seqlens = [0, T]``: one causal triangle over the row) document b
reads document a and its logits move; document a still matches, because causality
already hides b from it.

A *runner* is any callable ``runner(input_ids [T] long, position_ids [T] long,
cu_seqlens int32 [n + 1], max_seqlen) -> logits [T, V]``.
"""
from __future__ import annotations

import importlib

from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from .batch import segment_layout

Runner = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]

# Relative tolerance per dtype, times the largest |logit| of the alone run.
_BASE_TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4,
                   torch.float16: 2e-2, torch.bfloat16: 5e-2}
# Flash kernels tile and rescale the softmax online: a different reduction order.
_BACKEND_FACTOR = {"varlen": 2.0}

DEFAULT_LENGTHS = (40, 24, 56)   # the default documents for verify_model


@dataclass(frozen=True)
class DocumentResult:
    index: int            # document number in the row
    start: int            # its first token in the packed row
    length: int
    max_abs_diff: float   # max |logit alone - logit packed| over its tokens and the vocab
    equivalent: bool      # max_abs_diff <= tolerance


@dataclass(frozen=True)
class VerifyReport:
    mask: str                     # "on" | "off"
    positions: str                # "reset" | "continuous"
    backend: str
    dtype: str
    tolerance: float
    tolerance_reason: str
    documents: tuple[DocumentResult, ...]
    cu_seqlens: tuple[int, ...]   # document boundaries in the packed row
    token_diffs: np.ndarray = field(compare=False)   # float64 [T]: max over vocab per token
    model: str = ""

    @property
    def equivalent(self) -> bool:
        """Every document within tolerance: packing preserved the computation."""
        return all(d.equivalent for d in self.documents)

    @property
    def max_abs_diff(self) -> float:
        return max(d.max_abs_diff for d in self.documents)

    def to_dict(self) -> dict:
        return {
            "model": self.model, "mask": self.mask, "positions": self.positions,
            "backend": self.backend, "dtype": self.dtype, "tolerance": self.tolerance,
            "tolerance_reason": self.tolerance_reason, "equivalent": self.equivalent,
            "max_abs_diff": self.max_abs_diff, "cu_seqlens": list(self.cu_seqlens),
            "documents": [asdict(d) for d in self.documents],
            "token_diffs": [float(x) for x in self.token_diffs],
        }

    def format_table(self) -> str:
        head = (f"{self.model + ' ' if self.model else ''}mask={self.mask} "
                f"positions={self.positions} backend={self.backend} dtype={self.dtype}")
        lines = [head, f"{'doc':>4} {'start':>6} {'length':>6} {'max |dlogit|':>13}  verdict"]
        for d in self.documents:
            lines.append(f"{d.index:>4} {d.start:>6} {d.length:>6} {d.max_abs_diff:>13.3e}  "
                         f"{'same' if d.equivalent else 'DIFFERENT'}")
        if self.equivalent:
            verdict = (f"EQUIVALENT: every document matches its alone run within "
                       f"{self.tolerance:.1e}")
        else:
            bad = [str(d.index) for d in self.documents if not d.equivalent]
            verdict = (f"NOT EQUIVALENT: document(s) {', '.join(bad)} differ by up to "
                       f"{self.max_abs_diff:.2e} > tolerance {self.tolerance:.1e}")
        return "\n".join(lines + [verdict])


def default_tolerance(dtype: torch.dtype, backend: str, logit_scale: float) -> tuple[float, str]:
    """Tolerance for |dlogit| and the sentence that justifies it."""
    if dtype not in _BASE_TOLERANCE:
        raise ValueError(f"no default tolerance for dtype {dtype}: pass tolerance= explicitly "
                         f"or use one of {', '.join(str(d) for d in _BASE_TOLERANCE)}")
    base = _BASE_TOLERANCE[dtype]
    factor = _BACKEND_FACTOR.get(backend, 1.0)
    scale = max(1.0, float(logit_scale))
    tol = base * factor * scale
    reason = (f"{base:g} (relative, {str(dtype).replace('torch.', '')})"
              f"{f' x {factor:g} ({backend} kernel)' if factor != 1.0 else ''}"
              f" x {scale:.3g} (largest |logit|) = {tol:.2e}. Bitwise equality is not "
              "expected: kernels, reduction order, dtype and batch shape change the "
              "low-order bits even when the semantics are right; a leak moves logits by "
              "orders of magnitude more.")
    return tol, reason


def _check_choice(name: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


@torch.inference_mode()
def verify(runner: Runner, documents: Sequence[Sequence[int]], *, mask: str = "on",
           positions: str = "reset", dtype: torch.dtype = torch.float32,
           backend_name: str = "segments", tolerance: float | None = None,
           device="cpu", model_name: str = "") -> VerifyReport:
    """Compare each document's logits alone and packed in one row.

    ``dtype`` is the dtype the runner computes in; it picks the default tolerance.
    """
    _check_choice("mask", mask, ("on", "off"))
    _check_choice("positions", positions, ("reset", "continuous"))
    if len(documents) == 0 or any(len(d) == 0 for d in documents):
        raise ValueError("documents must be a non-empty list of non-empty token lists, got "
                         f"lengths {[len(d) for d in documents]}: drop empty documents")
    lengths = [len(d) for d in documents]
    layout = segment_layout(lengths, positions)
    ids = torch.tensor([t for d in documents for t in d], dtype=torch.long, device=device)
    T = len(ids)

    def run(ids_, pos_, cu_, max_len):
        out = runner(ids_, torch.as_tensor(pos_, dtype=torch.long, device=device),
                     torch.as_tensor(cu_, dtype=torch.int32, device=device), int(max_len))
        return out.float()

    cu = layout.cu_seqlens
    alone = [run(ids[a:b], np.arange(b - a), [0, b - a], b - a) for a, b in zip(cu[:-1], cu[1:])]
    # Mask off = row boundaries only: one causal triangle spans every document.
    packed_cu = cu if mask == "on" else np.array([0, T], dtype=np.int32)
    packed = run(ids, layout.position_ids, packed_cu, max(lengths) if mask == "on" else T)

    token_diffs = (torch.cat(alone) - packed).abs().amax(-1).double().cpu().numpy()
    logit_scale = max(float(a.abs().max()) for a in alone)
    if tolerance is None:
        tolerance, reason = default_tolerance(dtype, backend_name, logit_scale)
    else:
        reason = f"{tolerance:.2e}, set by the caller."
    results = tuple(
        DocumentResult(index=i, start=int(a), length=int(b - a),
                       max_abs_diff=float(token_diffs[a:b].max()),
                       equivalent=bool(token_diffs[a:b].max() <= tolerance))
        for i, (a, b) in enumerate(zip(cu[:-1], cu[1:])))
    return VerifyReport(mask=mask, positions=positions, backend=backend_name,
                        dtype=str(dtype).replace("torch.", ""), tolerance=float(tolerance),
                        tolerance_reason=reason, documents=results,
                        cu_seqlens=tuple(int(c) for c in cu), token_diffs=token_diffs,
                        model=model_name)


def default_documents(lengths: Sequence[int] = DEFAULT_LENGTHS, vocab_size: int = 256,
                      seed: int = 0) -> list[list[int]]:
    """Seeded random token ids, one list per length: ``[40, 24, 56]`` by default."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab_size, size=n).tolist() for n in lengths]


def model_runner(model, backend: str = "segments") -> Runner:
    """A runner over a :class:`~packing_core.model.TinyTransformer`."""
    def runner(input_ids, position_ids, cu_seqlens, max_seqlen):
        return model(input_ids, position_ids, cu_seqlens, max_seqlen, backend=backend)
    return runner


def verify_model(model="tiny-rope", *, mask: str = "on", positions: str = "reset",
                 backend: str = "segments", documents=None, seed: int = 0,
                 dtype: torch.dtype = torch.float32, device="cpu", use_cache: bool = False) -> VerifyReport:
    """Verify a named model: ``"tiny-rope"``, ``"tiny-abs"`` or ``"smollm2"`` (pretrained).

    ``use_cache`` matters only for the pretrained model with its own attention
    (``backend="sdpa"`` or ``"eager"``): transformers then skips its packing detection.
    """
    if model == "smollm2":
        try:   # import_module, not "from . import hf": it honours a missing module every time
            hf = importlib.import_module(".hf", __package__)
            return hf.verify_pretrained(mask=mask, positions=positions, backend=backend, use_cache=use_cache)
        except ImportError as exc:
            raise ValueError("the pretrained model's support could not be imported "
                             f"({exc}): bash scripts/install.sh installs it") from exc
    from .model import MODELS, TinyTransformer, tiny_model
    if isinstance(model, TinyTransformer):
        net, name = model, "tiny-rope" if model.cfg.positions == "rope" else "tiny-abs"
    elif model in MODELS:
        net, name = tiny_model(model, dtype=dtype, device=device), model
    else:
        raise ValueError(f"unknown model {model!r}: choose one of "
                         f"{', '.join(MODELS + ('smollm2',))}")
    dtype = next(net.parameters()).dtype
    docs = default_documents(vocab_size=net.cfg.vocab_size, seed=seed) if documents is None \
        else documents
    return verify(model_runner(net, backend), docs, mask=mask, positions=positions,
                  dtype=dtype, backend_name=backend, device=next(net.parameters()).device,
                  model_name=name)
