"""Check a batch for the attention implementation that will read it: one result type for all.

``check_hf_batch`` takes what a trainer passes to ``model(**batch)`` (transformers' keys, or
torchtune's ``tokens`` / ``labels`` / ``input_pos`` / ``mask``); ``check_batch`` takes the lab's
own :class:`PackedBatch`: it is ``check_hf_batch`` on ``batch.to_hf()`` plus what only a
PackedBatch knows (its targets, loss mask and piece ids). ``check_all_implementations`` checks
one batch for every transformers implementation. All return :class:`BatchCheck`.

The data flow, one module each: :mod:`.inputs` reads the batch into arrays; :mod:`.static`
finds the intended documents and every implementation-free finding, once; this module adds,
per implementation, whether the keys a query can read (:mod:`packing_core.attention.semantics`)
stay inside its intended document; :mod:`.result` holds the verdict.

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

import numpy as np

from packing_core._lazy import warn_renamed
from packing_core._validate import InputError
from packing_core.attention.documents import Evidence, IntendedDocuments
from packing_core.attention.semantics import (
    ATTENTION_READERS,
    IMPLEMENTATIONS,
    EffectiveAttention,
    effective_attention,
    packed_attention,
    shared_attention,
    skipped_tokens,
)
from packing_core.batch.packed import PackedBatch
from packing_core.check.inputs import batch_format, batch_tensors
from packing_core.check.result import BatchCheck, by_severity
from packing_core.check.rules import Finding
from packing_core.check.static import StaticCheck, first_hit, marks_of, packed_findings, static_check

# a finding that already says the batch is misread under this implementation: no comparison needed
_MISREAD_FINDINGS = ("documents_share_attention", "kernel_cannot_read_batch", "kernel_skips_tokens")


def _readers(names) -> tuple[str, ...]:
    names = (names,) if isinstance(names, str) else tuple(names)
    unknown = [n for n in names if n not in ATTENTION_READERS]
    if unknown or not names:
        raise InputError(f"unknown attention implementation {unknown[0] if unknown else 'none'!r}: choose one of "
                         f"{', '.join(ATTENTION_READERS)}")
    return names


def _misread(eff: EffectiveAttention, docs: IntendedDocuments) -> bool:
    """Whether documents meet, or real tokens are lost, or the kernel refuses: any way the batch is misread."""
    return bool(eff.refused) or bool(shared_attention(eff, docs.document_ids).count) or bool(
        skipped_tokens(eff, docs.real).any())


def leak_findings(eff: EffectiveAttention, docs: IntendedDocuments, allow_cross_document: bool) -> list[Finding]:
    """Where the keys ``eff`` lets a query read leave its intended document, or a real token gets no output."""
    if eff.refused:
        return [Finding("kernel_cannot_read_batch", eff.refused)]
    out = []
    shared = shared_attention(eff, docs.document_ids)
    if shared.count:
        r, i, kr, k = shared.example
        d = docs.document_ids
        rows = shared.rows
        detail = (f"under {eff.attn_implementation} ({eff.path}), {shared.count} quer(ies) in row(s) "
                  f"{list(rows[:8])}{' ...' if len(rows) > 8 else ''} read keys of another document; first: row {r}, "
                  f"token {i} (document {int(d[r, i])}) reads row {kr}, token {k} (document {int(d[kr, k])})")
        if allow_cross_document:
            out.append(Finding("cross_document_allowed", detail, marks=marks_of(shared.queries)))
        else:
            out.append(Finding("documents_share_attention", detail, marks=marks_of(shared.queries)))
    skipped = skipped_tokens(eff, docs.real)
    if skipped.any():
        r, s = first_hit(skipped)
        out.append(Finding("kernel_skips_tokens", f"under {eff.attn_implementation} ({eff.path}), {int(skipped.sum())} "
                                                  f"real token(s) get no output, first row {r}, token {s}",
                           marks=marks_of(skipped)))
    return out


def _checked(static: StaticCheck, eff: EffectiveAttention, *, allow_cross_document: bool, others=None) -> BatchCheck:
    """One implementation's :class:`BatchCheck` from the shared half and its own reading.

    ``others`` (a function of no argument giving every implementation's reading) adds the
    note that the same batch leaks under another implementation, when this one is sound.
    """
    docs = static.documents
    seen = {f.name for f in static.findings}       # a PackedBatch rule the to_hf() view already reports: once
    findings = [*static.findings, *leak_findings(eff, docs, allow_cross_document),
                *(f for f in static.packed if f.name not in seen)]
    if others is not None and not any(f.name in _MISREAD_FINDINGS for f in findings):
        misread = [f"{o.attn_implementation} ({o.refused or o.path})" for o in others()
                   if o.attn_implementation != eff.attn_implementation and _misread(o, docs)]
        if misread:
            findings.append(Finding("leaks_under_other_implementation",
                                    f"sound for {eff.attn_implementation}, but documents meet or the batch is misread "
                                    f"under {'; '.join(misread)}"))
    if static.ignored:
        findings.append(Finding("entries_ignored", f"not read: {', '.join(static.ignored)}"))
    t = static.tensors
    return BatchCheck(eff.attn_implementation, eff.use_cache, batch_format(t), t.shape, by_severity(findings), docs,
                      eff, t, static.ignored)


def _static_of(batch: Mapping | PackedBatch, *, eos_ids=(), bos_ids=(), labels: str = "auto") -> StaticCheck:
    """The implementation-free half of a trainer's batch, or of a PackedBatch read through ``to_hf()``.

    A PackedBatch's labels are ``to_hf()``'s (unshifted), and its own piece ids are one more
    piece of evidence for the intended documents.
    """
    if isinstance(batch, PackedBatch):
        t, _ = batch_tensors(batch.to_hf())
        piece = batch.piece_ids.numpy()[batch.valid.numpy()]
        own = np.r_[False, piece[1:] != piece[:-1]][None]
        return static_check(t, eos_ids=eos_ids, bos_ids=bos_ids, labels="unshifted",
                            evidence=(Evidence("piece_ids", own),), packed=tuple(packed_findings(batch)))
    t, ignored = batch_tensors(batch)
    return static_check(t, ignored, eos_ids=eos_ids, bos_ids=bos_ids, labels=labels)


def _one(static: StaticCheck, attn_implementation: str, *, use_cache: bool, allow_cross_document: bool,
         compare: bool) -> BatchCheck:
    (attn_implementation,) = _readers(attn_implementation)
    eff = effective_attention(static.tensors, attn_implementation, use_cache=use_cache)
    others = (lambda: [effective_attention(static.tensors, o, use_cache=use_cache) for o in IMPLEMENTATIONS
                       if o != attn_implementation]) if compare else None
    return _checked(static, eff, allow_cross_document=allow_cross_document, others=others)


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
    _readers(attn_implementation)
    static = _static_of(batch, eos_ids=eos_ids, bos_ids=bos_ids, labels=labels)
    return _one(static, attn_implementation, use_cache=use_cache, allow_cross_document=allow_cross_document,
                compare=compare)


def check_batch(batch: PackedBatch, attn_implementation: str = "sdpa", *, use_cache: bool = False,
                compare: bool = True) -> BatchCheck:
    """``check_hf_batch(batch.to_hf())`` plus what only a PackedBatch knows, in one :class:`BatchCheck`.

    The batch's own piece ids are one more piece of evidence for the intended documents.

    >>> from packing_core.batch.packed import PackedBatch
    >>> check_batch(PackedBatch.from_documents([[5, 6, 7], [8, 9]], 8, "next-fit")).findings
    ()
    """
    if not isinstance(batch, PackedBatch):
        raise InputError(f"check_batch takes a PackedBatch, got {type(batch).__name__}: check a trainer's dict "
                         "with check_hf_batch")
    _readers(attn_implementation)
    return _one(_static_of(batch), attn_implementation, use_cache=use_cache, allow_cross_document=False,
                compare=compare)


def check_all_implementations(batch: Mapping | PackedBatch, implementations=IMPLEMENTATIONS, *,
                              use_cache: bool = False, eos_ids=(), bos_ids=(), labels: str = "auto",
                              allow_cross_document: bool = False, compare: bool = False) -> tuple[BatchCheck, ...]:
    """One :class:`BatchCheck` per implementation, in the order given (transformers' five by default).

    The tensors, the intended documents and the implementation-free findings are computed
    once; only what each implementation reads (``effective_attention``) is computed per
    implementation. ``batch`` is a trainer's dict (the keyword arguments are
    :func:`check_hf_batch`'s) or a ``PackedBatch`` (checked as :func:`check_batch`). With
    ``compare``, each sound verdict also notes the implementations under which the batch leaks.

    >>> rows = {"input_ids": [[5, 6, 7, 8], [1, 2, 3, 4]], "position_ids": [[0, 1, 0, 1], [0, 1, 2, 0]]}
    >>> [c.verdict for c in check_all_implementations(rows, ("sdpa", "flash_attention_2"))]
    ['sdpa: SOUND', 'flash_attention_2: 1 ERROR(S): documents_share_attention']
    """
    names = _readers(implementations)
    static = _static_of(batch, eos_ids=eos_ids, bos_ids=bos_ids, labels=labels)
    read = {n: effective_attention(static.tensors, n, use_cache=use_cache) for n in names}

    def others() -> list[EffectiveAttention]:
        return [read[o] if o in read else effective_attention(static.tensors, o, use_cache=use_cache)
                for o in IMPLEMENTATIONS]

    return tuple(_checked(static, read[n], allow_cross_document=allow_cross_document,
                          others=others if compare else None) for n in names)


def kernel_mask(batch: PackedBatch, attn_implementation: str, row: int) -> np.ndarray:
    """Deprecated: ``packing_core.attention.packed_attention(batch, attn_implementation).allowed(row)``."""
    warn_renamed("packing_core.check.kernel_mask(batch, impl, row)",
                 "packing_core.attention.packed_attention(batch, impl).allowed(row)")
    return packed_attention(batch, attn_implementation).allowed(row)
