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

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from packing_core._validate import MASKS, POSITIONS, InputError, Mask, Positions, choice
from packing_core.batch.packed import segment_layout
from packing_core.check.rules import Finding

Runner = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]


# Relative tolerance per dtype, times the largest |logit| of the alone run.
_BASE_TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4,
                   torch.float16: 2e-2, torch.bfloat16: 5e-2}


# Flash kernels tile and rescale the softmax online: a different reduction order.
_BACKEND_FACTOR = {"varlen": 2.0}
DEFAULT_LENGTHS = (40, 24, 56)   # the default documents for verify_model


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
class DocumentResult:
    index: int            # document number in the row
    start: int            # its first token in the packed row
    length: int
    max_abs_diff: float   # max |logit alone - logit packed| over its tokens and the vocab
    equivalent: bool      # max_abs_diff <= tolerance

    @property
    def verdict(self) -> str:
        """One word, as every table shows it: ``same`` or ``DIFFERENT``."""
        return "same" if self.equivalent else "DIFFERENT"


@dataclass(frozen=True)
class Cut:
    """One cut: every token after ``position`` (in ``row``) changed; the largest move at or before it."""

    row: int
    position: int
    max_abs_diff: float
    first_moved: int | None       # the first position at or before the cut that moved beyond the tolerance


@dataclass(frozen=True)
class CausalityReport:
    """The second check (:mod:`.causality`) of one run: each cut, and whether the future was visible.

    ``token_diffs`` (float [B, T]) holds, at each position, the largest |logit difference| any cut
    caused there while the position was at or before the cut (0 where no cut covered it).
    """

    tolerance: float
    cuts: tuple[Cut, ...]
    token_diffs: np.ndarray = field(compare=False, repr=False)
    attention: str = ""

    @property
    def future_visible(self) -> bool:
        return any(c.first_moved is not None for c in self.cuts)

    @property
    def max_abs_diff(self) -> float:
        return max((c.max_abs_diff for c in self.cuts), default=0.0)

    @property
    def first_moved(self) -> tuple[int, int] | None:
        """``(row, position)`` of the earliest position a later change moved, or None."""
        moved = [(c.row, c.first_moved) for c in self.cuts if c.first_moved is not None]
        return min(moved) if moved else None

    @property
    def verdict(self) -> str:
        """The causality verdict in one sentence, separate from the isolation verdict."""
        if not self.cuts:
            return "CAUSALITY NOT TESTED: no document of two or more tokens to cut."
        if not self.future_visible:
            return (f"CAUSAL. Changing every token after a cut moved no earlier logit beyond {self.tolerance:.1e} "
                    f"({len(self.cuts)} cut(s)).")
        c = next(c for c in self.cuts if c.first_moved is not None and (c.row, c.first_moved) == self.first_moved)
        return (f"FUTURE VISIBLE. Changing the tokens after position {c.position} (row {c.row}) moved the logits at "
                f"position {c.first_moved} by up to {c.max_abs_diff:.2e}, more than {self.tolerance:.1e}: a query "
                "reads keys after it.")

    def finding(self) -> Finding | None:
        """``future_visible`` (error) with the first position that moved, or None when causal."""
        moved = self.first_moved             # set exactly when the future is visible
        if moved is None:
            return None
        r, p = moved
        return Finding("future_visible", f"{self.verdict} (under {self.attention or 'this attention'})",
                       marks=((r, p),))

    def to_dict(self) -> dict:
        return {"future_visible": self.future_visible, "verdict": self.verdict, "tolerance": self.tolerance,
                "attention": self.attention, "first_moved": self.first_moved, "max_abs_diff": self.max_abs_diff,
                "cuts": [asdict(c) for c in self.cuts]}

    def format_table(self) -> str:
        lines = ["causality: the tokens after each cut changed, the logits up to it compared",
                 f"{'row':>4} {'cut':>5} {'max |dlogit| up to it':>22}  first moved"]
        lines += [f"{c.row:>4} {c.position:>5} {c.max_abs_diff:>22.3e}  "
                  f"{'-' if c.first_moved is None else c.first_moved}" for c in self.cuts]
        lines.append(self.verdict)
        return "\n".join(lines)


@dataclass(frozen=True)
class VerifyReport:
    """One packed-vs-alone run. ``verdict`` is its sentence, the one the CLI and the pages print.

    >>> r = VerifyReport("on", "reset", "segments", "float32", 1e-4, "", (DocumentResult(0, 0, 3, 0.0, True),
    ...                  DocumentResult(1, 3, 2, 2.5, False)), (0, 3, 5), np.zeros(5))
    >>> r.verdict
    'NOT EQUIVALENT. Document(s) 1 differ by up to 2.50e+00, more than the tolerance 1.0e-04.'
    """

    mask: str                     # "on" | "off"
    positions: str                # "reset" | "continuous"
    backend: str                  # the lab's backend that ran ("" when transformers' own attention ran)
    dtype: str
    tolerance: float
    tolerance_reason: str
    documents: tuple[DocumentResult, ...]
    cu_seqlens: tuple[int, ...]   # document boundaries in the packed row
    token_diffs: np.ndarray = field(compare=False)   # float64 [T]: max over vocab per token
    model: str = ""
    texts: tuple[str, ...] = ()            # the documents as text, when they came from text
    changes: tuple[TokenChange, ...] | None = None  # top-1 changes; None when not decoded
    attn_implementation: str = ""          # transformers' own attention that ran (sdpa, eager), else ""
    # the second check, run on the same packed row (verify.causality): printed and judged apart from isolation
    causality: CausalityReport | None = field(default=None, compare=False)

    @property
    def equivalent(self) -> bool:
        """Every document within tolerance: packing preserved the computation."""
        return all(d.equivalent for d in self.documents)

    @property
    def max_abs_diff(self) -> float:
        return max(d.max_abs_diff for d in self.documents)

    @property
    def future_visible(self) -> bool:
        """The causality check (when it ran) saw a later token change an earlier output."""
        return self.causality is not None and self.causality.future_visible

    @property
    def verdict(self) -> str:
        """The verdict in one sentence: computed here once; the CLI and the pages show it as it is."""
        if self.equivalent:
            return f"EQUIVALENT. Every document matches its alone run within {self.tolerance:.1e}."
        bad = ", ".join(str(d.index) for d in self.documents if not d.equivalent)
        return (f"NOT EQUIVALENT. Document(s) {bad} differ by up to {self.max_abs_diff:.2e}, more than the "
                f"tolerance {self.tolerance:.1e}.")

    @property
    def attention(self) -> str:
        """What attended, in the words of the flags: ``backend=segments`` or ``attn_implementation=sdpa``."""
        return (f"attn_implementation={self.attn_implementation}" if self.attn_implementation
                else f"backend={self.backend}")

    def to_dict(self) -> dict:
        return {
            "model": self.model, "mask": self.mask, "positions": self.positions,
            "backend": self.backend, "attn_implementation": self.attn_implementation, "dtype": self.dtype,
            "tolerance": self.tolerance,
            "tolerance_reason": self.tolerance_reason, "equivalent": self.equivalent, "verdict": self.verdict,
            "max_abs_diff": self.max_abs_diff, "cu_seqlens": list(self.cu_seqlens),
            "documents": [asdict(d) for d in self.documents],
            "token_diffs": [float(x) for x in self.token_diffs],
            "texts": list(self.texts),
            "changes": None if self.changes is None else [asdict(c) for c in self.changes],
            "causality": None if self.causality is None else self.causality.to_dict(),
        }

    def format_table(self) -> str:
        head = (f"{self.model + ' ' if self.model else ''}mask={self.mask} "
                f"positions={self.positions} {self.attention} dtype={self.dtype}")
        lines = [head, f"{'doc':>4} {'start':>6} {'length':>6} {'max |dlogit|':>13}  verdict"]
        lines += [f"{d.index:>4} {d.start:>6} {d.length:>6} {d.max_abs_diff:>13.3e}  {d.verdict}" for d in self.documents]
        lines.append(self.verdict)
        if self.backend == "segments" and self.max_abs_diff == 0.0:
            lines.append("(exactly 0: segments runs each document in its own call, the same computation alone and "
                         "packed; a kernel that runs the documents together, bf16 or a GPU can change the last bits, "
                         "which is what the tolerance is for)")
        if self.texts:
            lines.append("")
            lines += [f"text {i}: {t[:70]!r}{'...' if len(t) > 70 else ''} ({d.length} tokens)"
                      for i, (t, d) in enumerate(zip(self.texts, self.documents))]
        if self.changes is not None:
            if not self.changes:
                lines.append("top-1 next-token predictions: all unchanged by packing")
            else:
                lines.append(f"top-1 next-token predictions changed by packing: {len(self.changes)}")
                lines += [f"  doc {c.document} token {c.position:>3} {c.token_text!r:>14}: alone -> "
                          f"{c.alone_top1!r}, packed -> {c.packed_top1!r} (max |dlogit| {c.delta:.2f})"
                          for c in self.changes]
        if self.causality is not None:
            lines += ["", self.causality.format_table()]
        return "\n".join(lines)


def default_tolerance(dtype: torch.dtype, backend: str, logit_scale: float) -> tuple[float, str]:
    """Tolerance for |dlogit| and the sentence that justifies it."""
    if dtype not in _BASE_TOLERANCE:
        raise InputError(f"no default tolerance for dtype {dtype}: pass tolerance= explicitly "
                         f"or use one of {', '.join(str(d) for d in _BASE_TOLERANCE)}")
    base = _BASE_TOLERANCE[dtype]
    factor = _BACKEND_FACTOR.get(backend, 1.0)
    scale = max(1.0, float(logit_scale))
    tol = base * factor * scale
    reason = (f"{base:g} (relative, {str(dtype).replace('torch.', '')})"
              f"{f' x {factor:g} ({backend} kernel)' if factor != 1.0 else ''}"
              f" x {scale:.3g} (largest |logit|) = {tol:.2e}. Bitwise equality is not "
              "guaranteed: kernels, reduction order, dtype and batch shape can change the "
              "low-order bits even when the semantics are right; a leak moves logits by "
              "orders of magnitude more."
              + (" (segments runs each document in its own call, the same computation alone and "
                 "packed, so with its mask on the match is exact here.)" if backend == "segments" else ""))
    return tol, reason


def measured_note(diffs: Sequence[float], tolerance: float) -> str:
    """What this run's differences say about the tolerance: bitwise agreement is said as such, never hidden.

    >>> measured_note([0.0, 0.0], 1e-4)[:60]
    ' Here packed and alone agree bitwise on this machine: the to'
    >>> measured_note([1.5e-6, 0.0], 4.3e-4)
    ' Here they differ by up to 1.5e-06, in the last bits: well inside the tolerance.'
    """
    top = max(diffs, default=0.0)
    if top == 0.0:
        return (" Here packed and alone agree bitwise on this machine: the tolerance is for the last bits that a GPU "
                "kernel, bf16 or another batch shape changes.")
    if top <= tolerance:
        return f" Here they differ by up to {top:.1e}, in the last bits: well inside the tolerance."
    return ""


@torch.inference_mode()
def verify_runner(runner: Runner, documents: Sequence[Sequence[int]], *, mask: Mask = "on",
           positions: Positions = "reset", dtype: torch.dtype = torch.float32,
           backend_name: str = "segments", tolerance: float | None = None,
           device="cpu", model_name: str = "", decode: Callable[[list[int]], str] | None = None,
           texts: Sequence[str] = (), attn_implementation: str = "") -> VerifyReport:
    """Compare each document's logits alone and packed in one row.

    ``dtype`` is the dtype the runner computes in; it picks the default tolerance.
    ``backend_name`` or ``attn_implementation`` names the attention the runner uses.
    With ``decode`` (a tokenizer's), the report also lists every token whose top-1 next
    token differs alone vs packed, read from the same logits (no second forward pass).
    """
    choice("mask", mask, MASKS)
    choice("positions", positions, POSITIONS)
    if len(documents) == 0 or any(len(d) == 0 for d in documents):
        raise InputError("documents must be a non-empty list of non-empty token lists, got "
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
        tolerance, reason = default_tolerance(dtype, backend_name or attn_implementation, logit_scale)
    else:
        reason = f"{tolerance:.2e}, set by the caller."
    results = tuple(
        DocumentResult(index=i, start=int(a), length=int(b - a),
                       max_abs_diff=float(token_diffs[a:b].max()),
                       equivalent=bool(token_diffs[a:b].max() <= tolerance))
        for i, (a, b) in enumerate(zip(cu[:-1], cu[1:])))
    if all(r.equivalent for r in results):
        reason += measured_note([r.max_abs_diff for r in results], float(tolerance))
    changes = None
    if decode is not None:
        changes = _top1_changes(documents, alone, packed, cu, decode)
    return VerifyReport(mask=mask, positions=positions, backend=backend_name,
                        dtype=str(dtype).replace("torch.", ""), tolerance=float(tolerance),
                        tolerance_reason=reason, documents=results,
                        cu_seqlens=tuple(int(c) for c in cu), token_diffs=token_diffs,
                        model=model_name, texts=tuple(texts), changes=changes,
                        attn_implementation=attn_implementation)


def _top1_changes(documents, alone, packed, cu, decode) -> tuple[TokenChange, ...]:
    """Tokens whose argmax next token differs between the alone and the packed logits."""
    changes = []
    for d, (doc, a) in enumerate(zip(documents, alone)):  # documents of one row: a handful
        inside = packed[int(cu[d]):int(cu[d + 1])]
        a_top, p_top = a.argmax(-1), inside.argmax(-1)
        delta = (a - inside).abs().amax(-1)
        for i in torch.nonzero(a_top != p_top).flatten().tolist():
            changes.append(TokenChange(i, d, decode([int(doc[i])]), decode([int(a_top[i])]),
                                       decode([int(p_top[i])]), float(delta[i])))
    return tuple(changes)


def default_documents(lengths: Sequence[int] = DEFAULT_LENGTHS, vocab_size: int = 256,
                      seed: int = 0) -> list[list[int]]:
    """Seeded random token ids, one list per length: ``[40, 24, 56]`` by default."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab_size, size=n).tolist() for n in lengths]


def model_runner(model, backend: str = "segments", causal: bool = True) -> Runner:
    """A runner over one of the lab's own models (``TinyTransformer``, ``HybridModel``); ``causal=False``
    runs its attention without the causal flag (:func:`packing_core.attention.attend`)."""
    def runner(input_ids, position_ids, cu_seqlens, max_seqlen):
        return model(input_ids, position_ids, cu_seqlens, max_seqlen, backend=backend, causal=causal)
    return runner

