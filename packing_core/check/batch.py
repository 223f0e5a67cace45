"""Check a batch for the attention implementation that will read it: one result type for all.

``check_hf_batch`` takes what a trainer passes to ``model(**batch)`` (transformers' keys, or
torchtune's ``tokens`` / ``labels`` / ``input_pos`` / ``mask``); ``check_batch`` takes the lab's
own :class:`PackedBatch`: it is ``check_hf_batch`` on ``batch.to_hf()`` plus what only a
PackedBatch knows (its targets, loss mask and segment ids). Both return a :class:`BatchCheck`.

The verdict is a comparison: the intended documents (:mod:`packing_core.attention.documents`)
against the keys each query can read under the implementation (:mod:`packing_core.attention.semantics`).

    >>> packed_rows = {"input_ids": [[5, 6, 7, 8], [1, 2, 3, 4]], "position_ids": [[0, 1, 0, 1], [0, 1, 2, 0]]}
    >>> check_hf_batch(packed_rows, "sdpa").sound
    True
    >>> c = check_hf_batch(packed_rows, "flash_attention_2")
    >>> [f.name for f in c.errors]
    ['documents_share_attention']
    >>> [f.name for f in check_hf_batch(packed_rows, "sdpa").notes]
    ['leaks_under_other_implementation']
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from packing_core._validate import InputError
from packing_core.attention.documents import IGNORE_INDEX, Evidence, IntendedDocuments, intended_documents
from packing_core.attention.semantics import (
    IMPLEMENTATIONS,
    READERS,
    BatchTensors,
    EffectiveAttention,
    effective_attention,
    four_d_allowed,
    shared_attention,
    skipped_tokens,
)
from packing_core.batch.packed import PackedBatch, segment_layout
from packing_core.check.rules import Finding

FORMATS = ("padding-free", "padded", "packed rows", "4D mask", "plain")
# the keys a trainer's batch may use for each tensor: transformers' first, then torchtune's
_ALIASES = {"input_ids": ("input_ids", "tokens"), "position_ids": ("position_ids", "input_pos"),
            "attention_mask": ("attention_mask", "mask"), "labels": ("labels",),
            "cu_seq_lens_q": ("cu_seq_lens_q",), "cu_seq_lens_k": ("cu_seq_lens_k",)}
_LENGTH_KEYS = ("max_length_q", "max_length_k")
# entries a trainer passes that attention does not read: ignored without a note
_QUIET = {"use_cache", "return_dict", "num_items_in_batch", "seq_lens"}


@dataclass(frozen=True)
class BatchCheck:
    """What a check found, for one attention implementation: the findings and the evidence behind them.

    ``errors`` make ``check`` exit 1; ``warnings`` too with ``strict``; ``notes`` never.
    """

    attn_implementation: str
    use_cache: bool
    format: str
    shape: tuple[int, int]
    findings: tuple[Finding, ...]
    documents: IntendedDocuments = field(compare=False, repr=False)
    effective: EffectiveAttention = field(compare=False, repr=False)
    tensors: BatchTensors = field(compare=False, repr=False)
    ignored: tuple[str, ...] = ()

    def _of(self, severity: str) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == severity)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return self._of("error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return self._of("warning")

    @property
    def notes(self) -> tuple[Finding, ...]:
        return self._of("note")

    @property
    def sound(self) -> bool:
        """No error: the documents stay apart and the loss is right, for this implementation."""
        return not self.errors

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.findings)

    def exit_code(self, strict: bool = False) -> int:
        return 1 if self.errors or (strict and self.warnings) else 0

    @property
    def n_documents(self) -> int:
        return self.documents.count

    @property
    def row_document_ids(self) -> np.ndarray:
        """int64 [B, T]: the intended document of each token, counted per row from 0 (-1 on pads)."""
        d = self.documents.document_ids
        first = np.where(d >= 0, d, np.iinfo(np.int64).max).min(1, keepdims=True)
        return np.where(d >= 0, d - first, -1)

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """The batch's [B, T] arrays by transformers' names (a 4D mask is left out), for a figure."""
        t = self.tensors
        out = {"input_ids": t.input_ids, "position_ids": t.positions, "labels": t.labels,
               "attention_mask": None if t.mask_2d is None else t.mask_2d.astype(np.int64)}
        return {k: v for k, v in out.items() if v is not None}

    @property
    def marks(self) -> tuple[tuple[str, int, int], ...]:
        return tuple((f.name, r, s) for f in self.findings for r, s in f.marks)

    @property
    def verdict(self) -> str:
        """One line: SOUND or LEAKS / ERRORS for this implementation, as the CLI and pages print it."""
        if self.sound:
            extra = f", {len(self.warnings)} warning(s)" if self.warnings else ""
            return f"{self.attn_implementation}: SOUND{extra}"
        return f"{self.attn_implementation}: {len(self.errors)} ERROR(S): {', '.join(f.name for f in self.errors)}"

    def to_dict(self) -> dict:
        return {"attn_implementation": self.attn_implementation, "use_cache": self.use_cache, "format": self.format,
                "shape": list(self.shape), "sound": self.sound, "documents": [[list(d) for d in row] for row in
                                                                            self.documents.per_row()],
                "labels": self.documents.labels_reason, "attention": self.effective.to_dict(),
                "findings": [f.to_dict() for f in self.findings], "ignored": list(self.ignored)}

    def format_table(self) -> str:
        rows, width = self.shape
        sources = ", ".join(e.source for e in self.documents.evidence) or "none (each row is one document)"
        lines = [f"{self.format} batch: {rows} row(s) x {width} tokens, {self.n_documents} intended document(s) "
                 f"from {sources}; {self.documents.labels_reason}",
                 f"read by {self.attn_implementation}{' with a cache' if self.use_cache else ''}: "
                 f"{self.effective.path}", self.verdict]
        for f in self.findings:
            lines.append(f"  {f.severity.upper():<7} {f.name}: {f.title}\n    {f.detail}\n    fix: {f.fix}")
        return "\n".join(lines)


# ---------------------------------------------------------------- reading a batch
def _describe(value) -> str:
    return type(value).__name__


def _array(name: str, value, *, kind: str = "int") -> np.ndarray:
    """One entry as a numpy array; tensors on an accelerator are copied to the CPU, meta tensors refused."""
    device = getattr(value, "device", None)
    if device is not None and getattr(device, "type", "") == "meta":
        raise InputError(f"{name} is a tensor on the meta device: it has a shape but no values, so there is "
                         "nothing to check; pass the batch the dataloader yields (on cpu or cuda)")
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu()
        if str(getattr(value, "dtype", "")) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        raise InputError(f"{name} is ragged (rows of different lengths) or not numbers: give every row the same "
                         "length, integers only") from None
    if arr.dtype == object:
        raise InputError(f"{name} is ragged or holds non-numbers: give every row the same length, integers only")
    if kind == "mask":
        if arr.dtype.kind not in "biuf":
            raise InputError(f"{name} must hold numbers or booleans, got dtype {arr.dtype}")
        return arr
    if arr.dtype.kind not in "iu":
        raise InputError(f"{name} must hold integers, got dtype {arr.dtype}: token ids, labels and positions "
                         "are whole numbers (store them as int64)")
    return arr.astype(np.int64)


def _pick(batch: Mapping, key: str):
    for alias in _ALIASES[key]:
        if alias in batch and batch[alias] is not None:
            return alias, batch[alias]
    return None, None


def batch_tensors(batch: Mapping) -> tuple[BatchTensors, tuple[str, ...]]:
    """``(BatchTensors, ignored entry names)`` from a trainer's batch; bad shapes raise ``ValueError``.

    >>> t, ignored = batch_tensors({"tokens": [[1, 2, 3]], "input_pos": [[0, 1, 2]], "seq_lens": [[3]], "tag": "x"})
    >>> t.position_ids.tolist(), ignored
    ([[0, 1, 2]], ('tag',))
    """
    if not isinstance(batch, Mapping):
        raise InputError(f"a batch is a mapping of names to arrays, got {_describe(batch)}")
    key, ids = _pick(batch, "input_ids")
    if key is None:
        raise InputError(f"the batch has no input_ids (or torchtune's tokens); keys: {', '.join(map(str, batch)) or 'none'}: "
                         "give the dict a trainer passes to model(**batch)")
    ids = _array(key, ids)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[1] == 0:
        raise InputError(f"{key} must be [batch, tokens] with at least one token, got shape {ids.shape}")
    B, T = ids.shape
    out: dict = {"input_ids": ids}
    used = {key}
    for name in ("position_ids", "labels"):
        k, v = _pick(batch, name)
        if k is None:
            continue
        used.add(k)
        arr = _array(k, v)
        arr = arr[None] if arr.ndim == 1 else arr
        if arr.ndim != 2 or arr.shape[1] != T or arr.shape[0] not in (1, B) or (name == "labels" and arr.shape[0] != B):
            raise InputError(f"{k} has shape {tuple(arr.shape)} but {key} has {(B, T)}: pad them to the same length (a "
                             f"collator that pads input_ids to a multiple must pad {k} too)")
        out[name] = arr
    k, m = _pick(batch, "attention_mask")
    if k is not None:
        used.add(k)
        m = _array(k, m, kind="mask")
        if m.ndim == 1:
            m = m[None]
        if m.ndim == 3:            # torchtune's block mask [B, T, T]: one head
            m = m[:, None]
        if m.ndim == 2:
            if m.shape != (B, T):
                raise InputError(f"{k} has shape {tuple(m.shape)} but {key} has {(B, T)}")
            if not np.isin(m, (0, 1)).all():
                raise InputError(f"a 2D {k} holds 1 for real tokens and 0 for pads only, got values "
                                 f"{np.unique(m)[:6].tolist()}")
            m = m.astype(bool)
        elif m.ndim == 4:
            if m.shape[0] not in (1, B) or m.shape[2:] != (T, T):
                raise InputError(f"a 4D {k} is [batch, heads, {T}, {T}] (queries x keys), got {tuple(m.shape)}")
            m = four_d_allowed(m)
        else:
            raise InputError(f"{k} must be 2D [batch, tokens], 3D (torchtune) or 4D [batch, heads, q, k], "
                             f"got shape {tuple(m.shape)}")
        out["attention_mask"] = m
    for name in ("cu_seq_lens_q", "cu_seq_lens_k"):
        if batch.get(name) is not None:
            used.add(name)
            cu = _array(name, batch[name]).reshape(-1)
            if len(cu) < 2:
                raise InputError(f"{name} needs at least 2 offsets (e.g. [0, 5, 9]), got {cu.tolist()}")
            out[name] = cu
    for name in _LENGTH_KEYS:
        if batch.get(name) is not None:
            used.add(name)
            v = _array(name, batch[name]).reshape(-1)
            if v.size != 1:
                raise InputError(f"{name} is one whole number (the longest document), got {v.size} values")
            out[name] = int(v[0])
    ignored = tuple(str(k) for k in batch if k not in used and k not in _QUIET)
    return BatchTensors(**out), ignored


def _format(t: BatchTensors) -> str:
    if t.mask_4d is not None:
        return "4D mask"
    if t.cu_seq_lens_q is not None or t.cu_seq_lens_k is not None or (
            t.position_ids is not None and t.mask_2d is None and t.shape[0] == 1):
        return "padding-free"
    if t.mask_2d is not None:
        return "padded"
    return "packed rows" if t.position_ids is not None else "plain"


def _first(where: np.ndarray) -> tuple[int, int]:
    r, s = np.argwhere(where)[0]
    return int(r), int(s)


def _marks(where: np.ndarray, limit: int = 2000) -> tuple[tuple[int, int], ...]:
    return tuple((int(r), int(s)) for r, s in np.argwhere(where)[:limit])


# ---------------------------------------------------------------- the checks
def _static(t: BatchTensors, docs: IntendedDocuments, *, eos_given: bool) -> list[Finding]:
    """Findings that do not depend on the attention implementation: offsets, positions, labels, pads."""
    out: list[Finding] = []
    B, T = t.shape
    real, starts = docs.real, docs.starts
    row_start = np.zeros((B, T), dtype=bool)
    row_start[np.arange(B), np.argmax(real, 1)] = real.any(1)
    for name in ("cu_seq_lens_q", "cu_seq_lens_k"):
        cu = getattr(t, name)
        if cu is not None and (cu[0] != 0 or (np.diff(cu) <= 0).any() or cu[-1] > B * T):
            out.append(Finding("cu_seq_lens_malformed", f"{name} = {cu[:10].tolist()}{' ...' if len(cu) > 10 else ''} "
                                                        f"for {B * T} tokens"))
    if t.cu_seq_lens_q is not None and t.cu_seq_lens_k is not None and not np.array_equal(t.cu_seq_lens_q,
                                                                                          t.cu_seq_lens_k):
        out.append(Finding("cu_seq_lens_q_differs_from_k",
                           f"q {t.cu_seq_lens_q[:8].tolist()} vs k {t.cu_seq_lens_k[:8].tolist()}"))
    pos = t.positions
    if pos is not None and real.any():
        first_pos = int(pos[real].min())
        continued = row_start & (pos != first_pos)
        if continued.any():
            r, s = _first(continued)
            out.append(Finding("document_continues_from_previous_row",
                               f"{int(continued.sum())} row(s) begin mid-document, first row {r} at position "
                               f"{int(pos[r, s])} (documents start at {first_pos})", marks=_marks(continued)))
        late = starts & ~row_start & (pos != first_pos)
        if late.any():
            r, s = _first(late)
            out.append(Finding("positions_do_not_restart",
                               f"{int(late.sum())} document start(s) not at position {first_pos}, first row {r}, token "
                               f"{s}: position {int(pos[r, s])}", marks=_marks(late)))
        if t.mask_2d is None:
            zero_pads = ~real & (pos == 0)
            if zero_pads.sum() >= 2:
                r = int(np.argmax(zero_pads.sum(1)))
                seen = int((np.diff(pos[r]) != 1).sum()) + 1
                out.append(Finding("pads_given_position_zero",
                                   f"{int(zero_pads.sum())} pads at position 0: transformers' packed detection sees "
                                   f"{seen} sequences in row {r}, the data {len(docs.per_row()[r])} documents and a pad "
                                   "tail (harmless: no real token reads a later pad)", marks=_marks(zero_pads)))
    if t.labels is not None:
        lab, ids = t.labels, t.input_ids
        counted = lab != IGNORE_INDEX
        if docs.labels_mode == "unshifted":
            crossing = starts & ~row_start & counted
            wrong = real & counted & (lab != ids)
            wrong_name, wrong_what = "label_is_not_the_token", "differ from their token"
        else:
            nxt_start = np.concatenate([starts[:, 1:] | ~real[:, 1:], np.ones((B, 1), bool)], 1)
            crossing = real & nxt_start & counted
            nxt = np.concatenate([ids[:, 1:], np.full((B, 1), -1)], 1)
            wrong = real & counted & ~nxt_start & (lab != nxt)
            wrong_name, wrong_what = "target_is_not_the_next_token", "differ from the next token"
        if crossing.any():
            r, s = _first(crossing)
            out.append(Finding("label_crosses_boundary", f"{int(crossing.sum())} label(s) train across a document edge, "
                                                         f"first row {r}, token {s} (label {int(lab[r, s])})",
                               marks=_marks(crossing)))
        if wrong.any():
            r, s = _first(wrong)
            out.append(Finding(wrong_name, f"{int(wrong.sum())} counted label(s) {wrong_what}, first row {r}, token {s}: "
                                           f"label {int(lab[r, s])}, token {int(ids[r, s])}", marks=_marks(wrong)))
        in_loss = ~real & counted
        if in_loss.any():
            r, s = _first(in_loss)
            out.append(Finding("pad_in_loss", f"{int(in_loss.sum())} pad(s) carry a label, first row {r}, token {s}",
                               marks=_marks(in_loss)))
    strong = [e for e in docs.evidence if e.source in ("cu_seq_lens", "position_ids")]
    lines = []
    if len(strong) == 2 and not np.array_equal(strong[0].starts & real, strong[1].starts & real):
        lines.append(f"cu_seq_lens start documents at flattened tokens {strong[0].flat_starts()[:8]}, position_ids "
                     f"at {strong[1].flat_starts()[:8]}")
    known = np.zeros((B, T), bool)
    for e in strong:
        known |= e.starts
    for e in docs.evidence:
        extra = e.starts & real & ~known
        if e.source not in ("cu_seq_lens", "position_ids") and strong and extra.any():
            lines.append(f"{e.source} start documents at flattened tokens {np.flatnonzero(extra)[:8].tolist()} where "
                         f"{' and '.join(s.source for s in strong)} mark none")
    if lines:
        out.append(Finding("boundaries_disagree", "; ".join(lines)))
    inside = starts & ~row_start
    # full rows (the last may be short) and no boundary in any: a wrapped stream looks just like this
    full = real.all(1)
    if not eos_given and not inside.any() and full[:-1].all() and (full.sum() >= 2 or (B == 1 and full[0])) and T > 1:
        out.append(Finding("no_document_boundaries",
                           f"no cu_seq_lens, position reset, label separator or EOS id marks a document boundary inside "
                           f"any of the {B} row(s), which are full: each row is read as one document"))
    return out


def _leak(eff: EffectiveAttention, docs: IntendedDocuments, allow: bool) -> list[Finding]:
    out = []
    if eff.refused:
        return [Finding("kernel_cannot_read_batch", eff.refused)]
    shared = shared_attention(eff, docs.document_ids)
    if shared.count:
        r, i, kr, k = shared.example
        d = docs.document_ids
        rows = shared.rows
        detail = (f"under {eff.attn_implementation} ({eff.path}), {shared.count} quer(ies) in row(s) "
                  f"{list(rows[:8])}{' ...' if len(rows) > 8 else ''} read keys of another document; first: row {r}, "
                  f"token {i} (document {int(d[r, i])}) reads row {kr}, token {k} (document {int(d[kr, k])})")
        if allow:
            out.append(Finding("cross_document_allowed", detail, marks=_marks(shared.queries)))
        else:
            out.append(Finding("documents_share_attention", detail, marks=_marks(shared.queries)))
    skipped = skipped_tokens(eff, docs.real)
    if skipped.any():
        r, s = _first(skipped)
        out.append(Finding("kernel_skips_tokens", f"under {eff.attn_implementation} ({eff.path}), {int(skipped.sum())} "
                                                  f"real token(s) get no output, first row {r}, token {s}",
                           marks=_marks(skipped)))
    return out


def _check(t: BatchTensors, ignored, attn_implementation: str, *, use_cache: bool, eos_ids, bos_ids, labels: str,
           allow_cross_document: bool, compare: bool, extra: list[Finding] | None = None,
           evidence: tuple[Evidence, ...] = ()) -> BatchCheck:
    if attn_implementation not in READERS:
        raise InputError(f"unknown attention implementation {attn_implementation!r}: choose one of "
                         f"{', '.join(READERS)}")
    docs = intended_documents(t, eos_ids=eos_ids, bos_ids=bos_ids, labels=labels, extra=evidence)
    findings = _static(t, docs, eos_given=bool(len(eos_ids) or len(bos_ids)))
    eff = effective_attention(t, attn_implementation, use_cache=use_cache)
    findings += _leak(eff, docs, allow_cross_document)
    findings += extra or []
    if compare and not any(f.name in ("documents_share_attention", "kernel_cannot_read_batch", "kernel_skips_tokens")
                           for f in findings):
        others = []
        for other in IMPLEMENTATIONS:          # five cheap readings of the same arrays
            if other == attn_implementation:
                continue
            o = effective_attention(t, other, use_cache=use_cache)
            if o.refused or shared_attention(o, docs.document_ids).count or skipped_tokens(o, docs.real).any():
                others.append(f"{other} ({o.refused or o.path})")
        if others:
            findings.append(Finding("leaks_under_other_implementation",
                                    f"sound for {attn_implementation}, but documents meet or the batch is misread "
                                    f"under {'; '.join(others)}"))
    if ignored:
        findings.append(Finding("entries_ignored", f"not read: {', '.join(ignored)}"))
    order = {"error": 0, "warning": 1, "note": 2}
    findings = sorted(findings, key=lambda f: order[f.severity])
    return BatchCheck(attn_implementation, bool(use_cache), _format(t), t.shape, tuple(findings), docs, eff, t,
                      tuple(ignored))


def check_hf_batch(batch: Mapping, attn_implementation: str = "sdpa", *, use_cache: bool = False, eos_ids=(),
                   bos_ids=(), labels: str = "auto", allow_cross_document: bool = False,
                   compare: bool = True) -> BatchCheck:
    """Every finding of a trainer's batch, for the attention implementation that will read it.

    ``batch`` maps names to arrays, lists or tensors, as a trainer passes to ``model(**batch)``.
    ``use_cache`` is the value the forward call uses (Trainer and TRL pass False). ``eos_ids`` /
    ``bos_ids`` (from a tokenizer) find documents separated only by EOS tokens. ``labels`` is
    ``unshifted`` (transformers), ``shifted`` (targets) or ``auto``. With ``compare``, a sound
    verdict notes the implementations under which the same batch leaks.

    >>> pads_at_zero = {"input_ids": [[5, 6, 7, 0, 0, 0]], "position_ids": [[0, 1, 2, 0, 0, 0]]}
    >>> c = check_hf_batch(pads_at_zero)
    >>> c.sound, [f.name for f in c.warnings]
    (True, ['pads_given_position_zero'])
    """
    t, ignored = batch_tensors(batch)
    return _check(t, ignored, attn_implementation, use_cache=use_cache, eos_ids=tuple(eos_ids), bos_ids=tuple(bos_ids),
                  labels=labels, allow_cross_document=allow_cross_document, compare=compare)


def check_all_implementations(batch: Mapping, **kwargs) -> tuple[BatchCheck, ...]:
    """One :class:`BatchCheck` per transformers attention implementation (``IMPLEMENTATIONS``)."""
    return tuple(check_hf_batch(batch, impl, compare=False, **kwargs) for impl in IMPLEMENTATIONS)


# ---------------------------------------------------------------- the lab's own PackedBatch
def _packed_findings(batch: PackedBatch) -> list[Finding]:
    """What only a PackedBatch knows: its targets, loss mask and segment ids against its plan and cu_seqlens."""
    out: list[Finding] = []
    ids = batch.input_ids.numpy()
    seg = batch.segment_ids.numpy()
    tgt = batch.targets.numpy()
    loss = batch.loss_mask.numpy()
    answer = batch.answer_mask.numpy()
    cu = batch.cu_seqlens.numpy().astype(np.int64)
    valid = seg >= 0
    if cu[0] != 0 or (np.diff(cu) <= 0).any():
        out.append(Finding("cu_seqlens_not_monotone", f"cu_seqlens = {cu[:12].tolist()}{' ...' if len(cu) > 12 else ''}"))
    if cu[-1] != valid.sum():
        out.append(Finding("cu_seqlens_wrong_total", f"cu_seqlens ends at {cu[-1]}, but there are {int(valid.sum())} "
                                                     "real tokens"))
    flat_seg, flat_row = seg[valid], np.nonzero(valid)[0]
    starts = np.r_[True, (flat_seg[1:] != flat_seg[:-1]) | (flat_row[1:] != flat_row[:-1])]
    if len(cu) - 1 != starts.sum() or not np.array_equal(np.nonzero(starts)[0], cu[:-1][: starts.sum()]):
        out.append(Finding("segments_disagree_with_cu_seqlens",
                           f"segment ids give {int(starts.sum())} documents starting at "
                           f"{np.nonzero(starts)[0][:8].tolist()}, cu_seqlens gives {len(cu) - 1} starting at "
                           f"{cu[:8].tolist()}"))
    flat_tgt, flat_ids, flat_answer = tgt[valid], ids[valid], answer[valid]
    ends = np.r_[starts[1:], True]
    crossing = np.nonzero(ends & (flat_tgt != IGNORE_INDEX))[0]
    if len(crossing):
        out.append(Finding("label_crosses_boundary", f"{len(crossing)} document-final tokens have a target, first at "
                                                     f"valid token {int(crossing[0])}"))
    inner = ~ends & (flat_tgt != IGNORE_INDEX)
    wrong = np.nonzero(inner & (flat_tgt != np.r_[flat_ids[1:], 0]))[0]
    if len(wrong):
        out.append(Finding("target_is_not_the_next_token", f"{len(wrong)} targets differ from the next token, first at "
                                                           f"valid token {int(wrong[0])}"))
    pads_in = np.nonzero(~valid & ((tgt != IGNORE_INDEX) | loss))
    if len(pads_in[0]):
        out.append(Finding("pad_in_loss", f"{len(pads_in[0])} pad positions in the loss, first at row "
                                          f"{int(pads_in[0][0])}, slot {int(pads_in[1][0])}"))
    plan = batch.plan
    pieces = segment_layout(plan.piece_len)
    planned = np.zeros_like(valid)
    planned.reshape(-1)[plan.piece_row[pieces.segment_ids] * valid.shape[1] + plan.piece_offset[pieces.segment_ids]
                        + pieces.position_ids] = True
    if (valid & ~planned).any():
        r, c = np.nonzero(valid & ~planned)
        out.append(Finding("pad_in_attention", f"{len(r)} pad slots carry a segment id, first at row {int(r[0])}, "
                                               f"slot {int(c[0])}"))
    if (loss != (tgt != IGNORE_INDEX)).any():
        r, c = np.nonzero(loss != (tgt != IGNORE_INDEX))
        out.append(Finding("loss_mask_disagrees_with_targets", f"{len(r)} positions, first at row {int(r[0])}, "
                                                               f"slot {int(c[0])}"))
    expected = int((~ends & np.r_[flat_answer[1:], False]).sum())
    if int(loss.sum()) != expected:
        out.append(Finding("loss_count_mismatch", f"{int(loss.sum())} loss positions, but the data has {expected} "
                                                  "trainable answer tokens"))
    return out


def check_batch(batch: PackedBatch, attn_implementation: str = "sdpa", *, use_cache: bool = False,
                compare: bool = True) -> BatchCheck:
    """``check_hf_batch(batch.to_hf())`` plus what only a PackedBatch knows, in one :class:`BatchCheck`.

    The batch's own segment ids are one more piece of evidence for the intended documents.

    >>> from packing_core.batch.packed import PackedBatch
    >>> check_batch(PackedBatch.from_documents([[5, 6, 7], [8, 9]], 8, "next-fit")).findings
    ()
    """
    hf = batch.to_hf()
    t, _ = batch_tensors(hf)
    seg = batch.segment_ids.numpy()[batch.valid.numpy()][None]
    own = np.r_[False, seg[0, 1:] != seg[0, :-1]][None]
    evidence = (Evidence("segment_ids", own),)
    return _check(t, (), attn_implementation, use_cache=use_cache, eos_ids=(), bos_ids=(), labels="unshifted",
                  allow_cross_document=False, compare=compare, extra=_packed_findings(batch), evidence=evidence)


def kernel_mask(batch: PackedBatch, attn_implementation: str, row: int) -> np.ndarray:
    """bool [width, width]: what ``attn_implementation`` lets each query of ``row`` read, as drawn on the page.

    The batch is read as ``to_hf()`` hands it over (one flattened row of real tokens), then laid
    back into its row; a planted bug such as cu_seqlens over whole rows changes the picture.
    """
    t, _ = batch_tensors(batch.to_hf())
    eff = effective_attention(t, attn_implementation)
    valid = batch.valid.numpy()
    seg = np.full(valid.shape, -2, dtype=np.int64)
    seg[valid] = eff.segment_ids[0]
    s = seg[row]
    width = s.shape[0]
    mask = np.tril(np.ones((width, width), bool)) & (s[:, None] == s[None, :]) & (s[:, None] >= 0) & valid[row][None]
    key_mask = getattr(batch, "key_mask", None)     # a planted fault that hides keys from every query
    if key_mask is not None:
        mask &= key_mask[row].numpy()[None, :] | np.eye(width, dtype=bool)
    return mask
