"""Run a trainer's batch through a model exactly as given, then each intended document alone.

``check_hf_batch`` reads the batch's fields; this runs it. The batch goes to
``model(**batch)`` as the trainer would pass it (``attention_mask`` 2D or 4D, ``position_ids``,
``cu_seq_lens_*`` and ``max_length_*`` as given, and ``use_cache=False``, as transformers'
Trainer and TRL's SFTTrainer set it), with the attention implementation the check was for.
Each *intended* document (from the batch's evidence, :mod:`packing_core.attention.documents`,
never from what the kernel reads) then runs alone from position 0; its logits must match the
batch's within the dtype's tolerance, or the batch leaks. So a batch whose documents are
separated only by EOS tokens shows its leak in the logits too.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from packing_core._validate import MAX_RUN_DOCUMENTS, MAX_RUN_ROW_TOKENS, InputError
from packing_core.attention.semantics import FLASH
from packing_core.check.result import BatchCheck
from packing_core.verify.equivalence import default_tolerance


@dataclass(frozen=True)
class BatchDocument:
    row: int
    start: int
    length: int
    max_abs_diff: float
    equivalent: bool
    changed_top1: int = 0   # tokens whose most likely next token differs in the batch vs alone


@dataclass(frozen=True)
class BatchVerdict:
    """Each document of the batch: its logits in the batch vs alone."""

    model: str
    attention: str
    tolerance: float
    documents: tuple[BatchDocument, ...]
    token_diffs: np.ndarray | None = field(default=None, compare=False, repr=False)  # float [B, T], 0 off documents

    @property
    def leaks(self) -> bool:
        return not all(d.equivalent for d in self.documents)

    @property
    def max_abs_diff(self) -> float:
        return max((d.max_abs_diff for d in self.documents), default=0.0)

    @property
    def changed_top1(self) -> int:
        return sum(d.changed_top1 for d in self.documents)

    def to_dict(self) -> dict:
        return {"model": self.model, "attention": self.attention, "tolerance": self.tolerance,
                "leaks": self.leaks, "max_abs_diff": self.max_abs_diff,
                "documents": [asdict(d) for d in self.documents]}

    def format_table(self) -> str:
        lines = [f"model {self.model} ({self.attention} attention), the batch as given vs each document alone",
                 f"{'row':>4} {'start':>6} {'length':>6} {'max |dlogit|':>13}  verdict"]
        lines += [f"{d.row:>4} {d.start:>6} {d.length:>6} {d.max_abs_diff:>13.3e}  "
                  f"{'same' if d.equivalent else 'DIFFERENT'}" for d in self.documents]
        lines.append(f"LEAK: documents differ from their alone run by up to {self.max_abs_diff:.2e} "
                     f"> tolerance {self.tolerance:.1e}" if self.leaks else
                     f"NO LEAK: every document matches its alone run within {self.tolerance:.1e}")
        return "\n".join(lines)


def batch_kwargs(check: BatchCheck, device) -> dict:
    """The batch as ``model(**kwargs)`` takes it, exactly as given (a 4D mask as booleans)."""
    t = check.tensors
    kwargs = {"input_ids": torch.as_tensor(t.input_ids, dtype=torch.long, device=device)}
    if t.position_ids is not None:
        kwargs["position_ids"] = torch.as_tensor(t.position_ids, dtype=torch.long, device=device)
    if t.attention_mask is not None:
        m = torch.as_tensor(np.ascontiguousarray(t.attention_mask), device=device)
        kwargs["attention_mask"] = m if m.ndim == 4 else m.long()
    for key in ("cu_seq_lens_q", "cu_seq_lens_k"):
        if getattr(t, key) is not None:
            kwargs[key] = torch.as_tensor(getattr(t, key), dtype=torch.int32, device=device)
    for key in ("max_length_q", "max_length_k"):
        if getattr(t, key) is not None:
            kwargs[key] = int(getattr(t, key))
    return kwargs


@torch.inference_mode()
def run_hf_batch(model, check: BatchCheck, *, model_name: str = "", tolerance: float | None = None,
                 use_cache: bool | None = False) -> BatchVerdict:
    """Logits of every intended document of ``check``'s batch, in the batch vs alone, on ``model``.

    The model runs with ``check.attn_implementation``. ``use_cache=None`` leaves it to the
    model's config (True for LLaMA-style configs), as a plain ``model(**batch)`` call in a
    hand-written loop does.
    """
    param = next(model.parameters())
    ids = check.tensors.input_ids
    rows, width = check.shape
    if width > MAX_RUN_ROW_TOKENS:   # the model's attention holds rows x heads x width^2 scores
        raise InputError(f"the batch's rows are {width:,} tokens wide; running a model on it is limited to "
                         f"{MAX_RUN_ROW_TOKENS:,} tokens per row (its attention grows with the square of the row): "
                         "check the file without --model, or cut a smaller batch")
    if check.documents.count > MAX_RUN_DOCUMENTS:
        raise InputError(f"the batch holds {check.documents.count:,} documents; running a model runs each one alone, "
                         f"and is limited to {MAX_RUN_DOCUMENTS:,}: check the file without --model, or cut a smaller batch")
    if int(ids.max()) >= model.config.vocab_size or int(ids.min()) < 0:
        raise InputError(f"input_ids run from {int(ids.min())} to {int(ids.max())}, outside "
                         f"the model's vocabulary of {model.config.vocab_size}: tokenise with the model's tokenizer")
    impl = check.attn_implementation
    if impl in FLASH and param.device.type != "cuda":
        raise InputError(f"{impl} runs on a CUDA GPU with its kernel installed; here, run --model with "
                         "--attn-implementation sdpa or eager (the static check covers every implementation)")
    if check.effective.refused:
        raise InputError(check.effective.refused)
    if getattr(model.config, "_attn_implementation", None) != impl:
        model.set_attn_implementation(impl)
    kwargs = batch_kwargs(check, param.device)
    if use_cache is not None:
        kwargs["use_cache"] = use_cache
    logits = model(**kwargs).logits.float()
    alone_runs, scale = [], 1.0
    token_diffs = np.zeros(logits.shape[:2])
    for r, row in enumerate(check.documents.per_row()):   # documents of one batch: a handful to hundreds
        for start, length in row:
            doc = torch.as_tensor(ids[r, start:start + length], dtype=torch.long, device=param.device)[None]
            alone = model(input_ids=doc, use_cache=False).logits.float()[0]
            inside = logits[r, start:start + length]
            per_token = (alone - inside).abs().amax(-1)
            token_diffs[r, start:start + length] = per_token.cpu().numpy()
            diff = float(per_token.max())
            changed = int((alone.argmax(-1) != inside.argmax(-1)).sum())
            alone_runs.append((r, start, length, diff, changed))
            scale = max(scale, float(alone.abs().max()))
    if tolerance is None:
        tolerance, _ = default_tolerance(param.dtype, impl, scale)
    docs = tuple(BatchDocument(r, s, n, d, d <= tolerance, c) for r, s, n, d, c in alone_runs)
    return BatchVerdict(model=model_name, attention=impl, tolerance=float(tolerance), documents=docs,
                        token_diffs=token_diffs)
