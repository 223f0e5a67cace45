"""Run a trainer's batch through a model exactly as given, then each document alone.

``check_hf_batch`` reads the batch's fields; this runs it. The batch goes to
``model(**batch)`` as the trainer would pass it (``attention_mask``, ``position_ids``,
``cu_seq_lens_*`` as given, and ``use_cache=False``, as transformers' Trainer and TRL's
SFTTrainer set it), with the model's own attention (SmolLM2: ``sdpa``). Each document
then runs alone from position 0; its logits must match the batch's within the dtype's
tolerance, or the batch leaks.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from packing_core._validate import MAX_RUN_DOCUMENTS, MAX_RUN_ROW_TOKENS
from packing_core.batch.hf_check import HFBatchCheck
from packing_core.verify.equivalence import default_tolerance

_PASSED = ("input_ids", "position_ids", "attention_mask", "cu_seq_lens_q", "cu_seq_lens_k")


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


@torch.inference_mode()
def run_hf_batch(model, check: HFBatchCheck, *, model_name: str = "", tolerance: float | None = None,
                 use_cache: bool | None = False) -> BatchVerdict:
    """Logits of every document of ``check``'s batch, in the batch vs alone, on ``model``.

    ``use_cache=None`` leaves it to the model's config (True for LLaMA-style configs), as a
    plain ``model(**batch)`` call in a hand-written loop does.
    """
    param = next(model.parameters())
    a = check.arrays
    rows, width = check.shape
    if width > MAX_RUN_ROW_TOKENS:   # the model's attention holds rows x heads x width^2 scores
        raise ValueError(f"the batch's rows are {width:,} tokens wide; running a model on it is limited to "
                         f"{MAX_RUN_ROW_TOKENS:,} tokens per row (its attention grows with the square of the row): "
                         "check the file without --model, or cut a smaller batch")
    if check.n_documents > MAX_RUN_DOCUMENTS:
        raise ValueError(f"the batch holds {check.n_documents:,} documents; running a model runs each one alone, "
                         f"and is limited to {MAX_RUN_DOCUMENTS:,}: check the file without --model, or cut a smaller batch")
    if int(a["input_ids"].max()) >= model.config.vocab_size or int(a["input_ids"].min()) < 0:
        raise ValueError(f"input_ids run from {int(a['input_ids'].min())} to {int(a['input_ids'].max())}, outside "
                         f"the model's vocabulary of {model.config.vocab_size}: tokenise with the model's tokenizer")
    kwargs = {}
    for key in _PASSED:
        if key in a:
            dtype = torch.int32 if key.startswith("cu_") else torch.long
            kwargs[key] = torch.as_tensor(a[key], dtype=dtype, device=param.device)
    if "cu_seq_lens_q" in a or "cu_seq_lens_k" in a:
        cu = a.get("cu_seq_lens_q", a.get("cu_seq_lens_k"))
        longest = int((cu[1:] - cu[:-1]).max())
        kwargs.update(max_length_q=longest, max_length_k=longest)
    if use_cache is not None:
        kwargs["use_cache"] = use_cache
    logits = model(**kwargs).logits.float()
    ids = a["input_ids"]
    alone_runs, scale = [], 1.0
    for r, row in enumerate(check.documents):          # documents of one batch: a handful to hundreds
        for start, length in row:
            doc = torch.as_tensor(ids[r, start:start + length], dtype=torch.long, device=param.device)[None]
            alone = model(input_ids=doc, use_cache=False).logits.float()[0]
            inside = logits[r, start:start + length]
            diff = float((alone - inside).abs().max())
            changed = int((alone.argmax(-1) != inside.argmax(-1)).sum())
            alone_runs.append((r, start, length, diff, changed))
            scale = max(scale, float(alone.abs().max()))
    attention = model.config._attn_implementation
    if tolerance is None:
        tolerance, _ = default_tolerance(param.dtype, attention, scale)
    docs = tuple(BatchDocument(r, s, n, d, d <= tolerance, c) for r, s, n, d, c in alone_runs)
    return BatchVerdict(model=model_name, attention=attention, tolerance=float(tolerance), documents=docs)
