"""Run a trainer's batch through a model exactly as given, then each intended document alone.

``check_hf_batch`` reads the batch's fields; this runs it. The batch goes to
``model(**batch)`` as the trainer would pass it (``attention_mask`` 2D, or 4D with its own
dtype: an additive float mask stays additive, a boolean one boolean; ``position_ids``, 3-D
rotary ones included; ``cu_seq_lens_*`` and ``max_length_*`` as given; ``use_cache=False``, as
transformers' Trainer and TRL's SFTTrainer set it), with the attention implementation the check
was for. Each *intended* document (the same documents the static check judged, from the
batch's weighed evidence, :mod:`packing_core.attention.documents`, never from what the kernel
reads) then runs alone from position 0; its logits must match the batch's within the dtype's
tolerance on the positions the loss trains, or the batch leaks. :func:`reconcile` puts the static
verdict and the run in one line; where they disagree, the run decides.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from packing_core._validate import MAX_RUN_DOCUMENTS, MAX_RUN_ROW_TOKENS, InputError, limit_hint
from packing_core.attention.semantics import FLASH, TRAINER_READERS
from packing_core.check.result import BatchCheck
from packing_core.models.api import switch_attention
from packing_core.verify.chunked import QUERY_BLOCK, query_blocks
from packing_core.verify.equivalence import default_tolerance


@dataclass(frozen=True)
class BatchDocument:
    """One document: its largest logit difference batch vs alone, on the positions the loss trains."""

    row: int
    start: int
    length: int
    max_abs_diff: float     # over trained positions (all positions when the batch has no labels)
    equivalent: bool
    changed_top1: int = 0   # trained tokens whose most likely next token differs in the batch vs alone
    trained: int = -1       # trained positions compared (-1: every position)
    untrained_max_abs_diff: float = 0.0   # the largest difference where nothing is trained (reported, not judged)


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
        lines = [f"model {self.model} ({self.attention} attention), the batch as given vs each document alone, "
                 "on the positions the loss trains",
                 f"{'row':>4} {'start':>6} {'length':>6} {'trained':>7} {'max |dlogit|':>13}  verdict"]
        lines += [f"{d.row:>4} {d.start:>6} {d.length:>6} {'all' if d.trained < 0 else d.trained:>7} "
                  f"{d.max_abs_diff:>13.3e}  {'same' if d.equivalent else 'DIFFERENT'}" for d in self.documents]
        lines.append(f"LEAK: documents differ from their alone run by up to {self.max_abs_diff:.2e} "
                     f"> tolerance {self.tolerance:.1e}" if self.leaks else
                     f"NO LEAK: every document matches its alone run within {self.tolerance:.1e}")
        return "\n".join(lines)


def batch_kwargs(check: BatchCheck, device, dtype=torch.float32) -> dict:
    """The batch as ``model(**kwargs)`` takes it, exactly as given.

    A 4D mask keeps its kind: boolean stays boolean, an additive float mask stays additive (in
    the model's ``dtype``, its masked value clamped to that dtype's minimum), integers stay
    integers. A 2D mask of document numbers is passed as given (transformers casts it).
    """
    t = check.tensors
    kwargs = {"input_ids": torch.as_tensor(t.input_ids, dtype=torch.long, device=device)}
    positions = t.rope_position_ids if t.rope_position_ids is not None else t.position_ids
    if positions is not None:
        kwargs["position_ids"] = torch.as_tensor(np.ascontiguousarray(positions), dtype=torch.long, device=device)
    if t.attention_mask is not None:
        m = torch.as_tensor(np.ascontiguousarray(t.attention_mask), device=device)
        if m.ndim == 4 and m.is_floating_point():
            m = m.clamp(min=torch.finfo(dtype).min).to(dtype)
        elif m.ndim == 2:
            m = torch.as_tensor(t.document_mask, device=device) if t.document_mask is not None else m.long()
        kwargs["attention_mask"] = m
    for key in ("cu_seq_lens_q", "cu_seq_lens_k"):
        if getattr(t, key) is not None:
            kwargs[key] = torch.as_tensor(getattr(t, key), dtype=torch.int32, device=device)
    for key in ("max_length_q", "max_length_k"):
        if getattr(t, key) is not None:
            kwargs[key] = int(getattr(t, key))
    return kwargs


def learned_positions(model) -> int | None:
    """Rows of the model's learned position table (GPT-2's ``wpe``, OPT's ``embed_positions``), None without one.

    A model with a learned table looks positions up, so a position past its last row is an index
    error inside ``torch.embedding``; rotary models (LLaMA, Qwen) compute any position. OPT's table
    keeps two extra rows (``OPTLearnedPositionalEmbedding.offset``).
    """
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding) and name.rsplit(".", 1)[-1] in ("wpe", "embed_positions",
                                                                                  "position_embeddings"):
            return int(module.num_embeddings) - int(getattr(module, "offset", 0))
    return None


def _check_positions(model, check: BatchCheck) -> None:
    """Positions the model cannot look up are refused before the forward pass (never an IndexError inside it)."""
    rows = learned_positions(model)
    if rows is None:
        return
    t = check.tensors
    positions = t.rope_position_ids if t.rope_position_ids is not None else t.position_ids
    top = int(np.max(positions)) if positions is not None else check.shape[1] - 1
    longest = max((n for row in check.documents.per_row() for _, n in row), default=0)
    top = max(top, longest - 1)        # each document also runs alone, from position 0
    if top >= rows:
        raise InputError(f"the batch asks for position {top:,}, but {type(model).__name__} learned {rows:,} positions "
                         f"(0 to {rows - 1:,}; n_positions / max_position_embeddings in its config): restart "
                         "position_ids at each document, or cut rows of at most that many tokens")


_SCORES_NOTE = "; eager and flex hold every head's scores at once: half sdpa's row"


def run_side(impl: str) -> int:
    """The longest single row ``check --model`` runs under ``impl``: ``MAX_RUN_ROW_TOKENS`` for sdpa, whose
    queries run in blocks (:mod:`.chunked`), half of it where every head's scores are held at once (eager,
    flex). A batch may hold as many mask cells (rows x width²) as that one row.

    What bounds sdpa's row is the mask transformers builds before any attention runs: ``sdpa_mask``
    (``transformers/masking_utils.py``) combines a causal and a same-document boolean ``[T, T]`` by
    broadcasting, so it holds about three of them at once: 3 x 64 MiB at 8,192 tokens, 3 x 256 MiB at 16,384
    (measured: 1.1 GiB for that row alone on a two-layer model), past the 1 GiB a check may use."""
    return MAX_RUN_ROW_TOKENS if impl == "sdpa" else max(1, MAX_RUN_ROW_TOKENS // 2)


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
    impl = check.attn_implementation
    side = run_side(impl)
    if rows * width * width > side * side:   # the mask transformers builds holds rows x width^2 cells
        cells = rows * width * width
        raise InputError(f"the batch holds {rows:,} row(s) of {width:,} tokens: running {impl} on it builds a mask of "
                         f"{cells:,} cells (transformers holds about {3 * cells / 2**20:,.0f} MiB of booleans to build "
                         f"it), more than the lab runs within 1 GiB ({side:,}² = {side * side:,}: one row of {side:,} "
                         f"tokens{_SCORES_NOTE if impl != 'sdpa' else ''}): check the file without --model, or cut a "
                         f"smaller batch ({limit_hint('MAX_RUN_ROW_TOKENS')})")
    if check.documents.count > MAX_RUN_DOCUMENTS:
        raise InputError(f"the batch holds {check.documents.count:,} documents; running a model runs each one alone, "
                         f"and is limited to {MAX_RUN_DOCUMENTS:,}: check the file without --model, or cut a smaller batch "
                         f"({limit_hint('MAX_RUN_DOCUMENTS')})")
    if int(ids.max()) >= model.config.vocab_size or int(ids.min()) < 0:
        raise InputError(f"input_ids run from {int(ids.min())} to {int(ids.max())}, outside "
                         f"the model's vocabulary of {model.config.vocab_size}: tokenise with the model's tokenizer")
    _check_positions(model, check)
    if impl in TRAINER_READERS:
        raise InputError(f"{impl} is read by its own trainer's model, not by a transformers model: run --model with "
                         "an implementation of transformers (sdpa, eager), or check the batch without --model")
    if impl in FLASH and param.device.type != "cuda":
        raise InputError(f"{impl} runs on a CUDA GPU with its kernel installed; here, run --model with "
                         "--attn-implementation sdpa or eager (the static check covers every implementation)")
    if check.effective.refused:
        raise InputError(check.effective.refused)
    switch_attention(model, impl)
    kwargs = batch_kwargs(check, param.device, param.dtype)
    if use_cache is not None:
        kwargs["use_cache"] = use_cache
    with query_blocks(impl == "sdpa" and width > QUERY_BLOCK):
        logits = model(**kwargs).logits.float()
    trained = check.trained if check.trained is not None else check.documents.real
    judged_all = check.tensors.labels is None
    alone_runs, scale = [], 1.0
    token_diffs = np.zeros(logits.shape[:2])
    for r, row in enumerate(check.documents.per_row()):   # documents of one batch: a handful to hundreds
        for start, length in row:
            doc = torch.as_tensor(ids[r, start:start + length], dtype=torch.long, device=param.device)[None]
            alone = model(input_ids=doc, use_cache=False).logits.float()[0]
            inside = logits[r, start:start + length]
            per_token = (alone - inside).abs().amax(-1).cpu().numpy()
            token_diffs[r, start:start + length] = per_token
            judged = np.ones(length, bool) if judged_all else trained[r, start:start + length]
            diff = float(per_token[judged].max()) if judged.any() else 0.0
            other = float(per_token[~judged].max()) if (~judged).any() else 0.0
            changed = int(((alone.argmax(-1) != inside.argmax(-1)).cpu().numpy() & judged).sum())
            alone_runs.append((r, start, length, diff, changed, -1 if judged_all else int(judged.sum()), other))
            scale = max(scale, float(alone.abs().max()))
    if tolerance is None:
        tolerance, _ = default_tolerance(param.dtype, impl, scale)
    docs = tuple(BatchDocument(r, s, n, d, d <= tolerance, c, k, o) for r, s, n, d, c, k, o in alone_runs)
    return BatchVerdict(model=model_name, attention=impl, tolerance=float(tolerance), documents=docs,
                        token_diffs=token_diffs)


@dataclass(frozen=True)
class Reconciled:
    """The static verdict and the model run in one line, and the exit code that follows the run."""

    line: str
    agree: bool
    exit_code: int

    def to_dict(self) -> dict:
        return asdict(self)


_ISOLATION = ("documents_share_attention", "untrained_tokens_share_attention", "mask_reads_future",
              "query_reads_nothing", "kernel_skips_tokens", "max_length_too_small", "mask_ignores_position_resets",
              "convolution_reads_previous_document", "state_crosses_documents", "logits_differ_beyond_mixers")


def reconcile(check: BatchCheck, run: BatchVerdict, *, strict: bool = False) -> Reconciled:
    """One line for the static check of ``check.attn_implementation`` and its model run; the run decides.

    The static check says whether documents meet where training sees them (in attention, and,
    given a model type, in each layer kind it names); the run measures it on the same documents
    and the same trained positions. Where they disagree the line says so,
    and the exit code follows the run (1 on a measured leak); the static check's other errors
    (labels, offsets: what a forward pass cannot see) still count.

    >>> from packing_core.check.batch import check_hf_batch
    >>> c = check_hf_batch({"input_ids": [[5, 6, 7, 8]], "position_ids": [[0, 1, 0, 1]]})
    >>> reconcile(c, BatchVerdict("tiny", "sdpa", 1e-5, (BatchDocument(0, 0, 2, 0.0, True),))).line
    'sdpa: static check SOUND, model run NO LEAK (max |dlogit| 0.00e+00 on trained positions): they agree'
    """
    static_leak = any(f.name in _ISOLATION and f.severity == "error" for f in check.findings)
    other_errors = [f.name for f in check.errors if f.name not in _ISOLATION]
    where = [k for k, s in check.layer_statuses if s == "LEAKS"]      # with a model type: which layers
    said = "static check " + ("LEAKS" if static_leak else "SOUND") + (f" ({', '.join(where)})" if where else "")
    ran = (f"model run {'LEAK' if run.leaks else 'NO LEAK'} (max |dlogit| {run.max_abs_diff:.2e} on trained "
           "positions)")
    agree = static_leak == run.leaks
    if agree:
        line = f"{check.attn_implementation}: {said}, {ran}: they agree"
    elif run.leaks:
        line = (f"{check.attn_implementation}: {said}, but the {ran}: the run decides, this batch leaks (the static "
                "reading misses something this model does)")
    else:
        line = (f"{check.attn_implementation}: {said}, but the {ran}: the run decides, no trained position changed "
                f"beyond {run.tolerance:.1e} on this model")
    if other_errors:
        line += f"; other errors: {', '.join(other_errors)}"
    code = 1 if run.leaks or other_errors or (strict and check.warnings) else 0
    return Reconciled(line, agree, code)
