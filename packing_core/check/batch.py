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
from dataclasses import replace

import numpy as np

from packing_core._validate import InputError
from packing_core.attention.documents import Evidence, IntendedDocuments
from packing_core.attention.releases import ReaderRules, not_measured_line, release_rules
from packing_core.attention.semantics import (
    ATTENTION_READERS,
    FLASH,
    IMPLEMENTATIONS,
    TRAINER_READERS,
    EffectiveAttention,
    effective_attention,
)
from packing_core.attention.sharing import future_reads, reached, shared_attention, skipped_tokens, unreadable_queries
from packing_core.attention.tensors import BatchTensors
from packing_core.attention.varlen_grid import varlen_grid
from packing_core.batch.packed import PackedBatch
from packing_core.check.evidence import TokenizerFacts, tokenizer_facts
from packing_core.check.inputs import batch_format, batch_tensors
from packing_core.check.mixers import check_kernels, mixer_findings, model_family
from packing_core.check.result import BatchCheck, by_severity
from packing_core.check.rules import Finding
from packing_core.check.static import StaticCheck, first_hit, marks_of, packed_findings, static_check
from packing_core.check.trainers import batch_trainer, with_advice

# a finding that already says the batch is misread under this implementation: no comparison needed
_MISREAD_FINDINGS = ("documents_share_attention", "kernel_cannot_read_batch", "kernel_skips_tokens",
                     "mask_reads_future", "query_reads_nothing", "max_length_too_small", "mask_ignores_position_resets")


def _readers(names) -> tuple[str, ...]:
    names = (names,) if isinstance(names, str) else tuple(names)
    unknown = [n for n in names if n not in ATTENTION_READERS]
    if unknown or not names:
        raise InputError(f"unknown attention implementation {unknown[0] if unknown else 'none'!r}: choose one of "
                         f"{', '.join(ATTENTION_READERS)}")
    return names


def _where(where: np.ndarray, T: int, limit: int = 4) -> str:
    flat = np.flatnonzero(where)
    return ", ".join(f"row {i // T} token {i % T}" for i in flat[:limit]) + (" ..." if len(flat) > limit else "")


def _misread(eff: EffectiveAttention, docs: IntendedDocuments, trained: np.ndarray) -> bool:
    """Whether documents meet where training sees it, real tokens are lost, the future is read, or the kernel refuses."""
    if eff.refused or skipped_tokens(eff, docs.real).any() or future_reads(eff, docs.real).any():
        return True
    shared = shared_attention(eff, docs.document_ids)
    return bool(shared.count) and bool((reached(eff, shared.queries) & trained).any())


def leak_findings(eff: EffectiveAttention, docs: IntendedDocuments, allow_cross_document: bool,
                  trained: np.ndarray | None = None, t: BatchTensors | None = None) -> list[Finding]:
    """Where the keys ``eff`` lets a query read leave its intended document, and whether training sees it.

    A query that reads another document changes its own output and, through the later layers,
    the output of every query that reads it (:func:`packing_core.attention.sharing.reached`).
    That is an error where it reaches a trained position (``trained``, bool [B, T]; every real
    token when None), and a warning where it reaches none (a pad tail, tokens after the last target).
    """
    if eff.refused:
        return [Finding("kernel_cannot_read_batch", eff.refused)]
    out = []
    trained = docs.real if trained is None else trained
    T = docs.real.shape[1]
    shared = shared_attention(eff, docs.document_ids)
    if shared.count and shared.example is not None:
        r, i, kr, k = shared.example
        d = docs.document_ids
        rows = shared.rows
        hit = reached(eff, shared.queries) & trained
        seen = (f"{int(hit.sum())} trained position(s) see them, first {_where(hit, T, 1)}" if hit.any() else
                f"no trained position sees them (the queries: {_where(shared.queries, T)})")
        detail = (f"under {eff.attn_implementation} ({eff.path}), {shared.count} quer(ies) in row(s) "
                  f"{list(rows[:8])}{' ...' if len(rows) > 8 else ''} read keys of another document; first: row {r}, "
                  f"token {i} (document {int(d[r, i])}) reads row {kr}, token {k} (document {int(d[kr, k])}); {seen}")
        name = ("cross_document_allowed" if allow_cross_document else
                "documents_share_attention" if hit.any() else "untrained_tokens_share_attention")
        out.append(Finding(name, detail, marks=marks_of(shared.queries)))
    future = future_reads(eff, docs.real)
    if future.any():
        out.append(Finding("mask_reads_future", f"under {eff.attn_implementation} ({eff.path}), {int(future.sum())} "
                                                f"real quer(ies) read later tokens, first {_where(future, T, 1)}",
                           marks=marks_of(future)))
    if t is not None and eff.dense is not None and (empty := unreadable_queries(t, docs.real)).any():
        out.append(Finding("query_reads_nothing", f"{int(empty.sum())} real quer(ies) can read no key in some head, "
                                                  f"first {_where(empty, T, 1)}", marks=marks_of(empty)))
    skipped = skipped_tokens(eff, docs.real)
    if skipped.any():
        r, s = first_hit(skipped)
        out.append(Finding("kernel_skips_tokens", f"under {eff.attn_implementation} ({eff.path}), {int(skipped.sum())} "
                                                  f"real token(s) get no output, first row {r}, token {s}",
                           marks=marks_of(skipped)))
    if t is not None:
        out += _reader_notes(eff, t)
        if eff.attn_implementation == "megatron" and eff.dense is not None and not allow_cross_document:
            out += _megatron_fused(eff, t, docs, trained)
    return out


def _megatron_fused(eff: EffectiveAttention, t: BatchTensors, docs: IntendedDocuments,
                    trained: np.ndarray) -> list[Finding]:
    """Where Megatron's mask keeps apart documents that its fused and Transformer Engine paths let meet.

    Those paths attend causally over each row (``attn_mask_type=causal``), which is Megatron's
    reading of the same batch without its mask.
    """
    causal = effective_attention(BatchTensors(t.input_ids), "megatron")
    hit = reached(causal, shared_attention(causal, docs.document_ids).queries) & trained
    hit &= ~(reached(eff, shared_attention(eff, docs.document_ids).queries) & trained)
    if not hit.any():
        return []
    return [Finding("megatron_mask_needs_unfused_softmax",
                    f"the mask keeps documents apart only where it is applied: under attn_mask_type=causal with the "
                    f"fused softmax or Transformer Engine, {int(hit.sum())} trained position(s) would see another "
                    f"document, first {_where(hit, t.shape[1], 1)}", marks=marks_of(hit))]


def _reader_notes(eff: EffectiveAttention, t: BatchTensors) -> list[Finding]:
    """What this reader does with max_length_q/_k, seq_idx and doc_lens."""
    out = []
    impl = eff.attn_implementation
    if (impl in FLASH and "varlen" in eff.path or impl == "varlen") and t.has_varlen_kwargs:
        short = []
        for side in ("q", "k"):
            cu, top = getattr(t, f"cu_seq_lens_{side}"), getattr(t, f"max_length_{side}")
            longest = int(np.diff(cu).max()) if len(cu) > 1 else 0
            if top < longest:
                short.append(f"max_length_{side} = {top}, but cu_seq_lens_{side} hold a document of {longest} tokens")
        if short:
            grid = varlen_grid(t.cu_seq_lens_q, max(int(t.max_length_q or 0), 1))   # flash-attn's forward grid
            short.append(f"flash-attn's forward launches {grid.blocks} block(s) of {grid.block} queries per document: "
                         + (f"{grid.skipped_tokens:,} token(s) get no output" if grid.skipped_tokens else
                            f"here they still cover every token; a document over {grid.blocks * grid.block} tokens "
                            "would lose its last queries"))
            out.append(Finding("max_length_too_small", "; ".join(short)))
    for signal, who in t.signals_beyond_attention().items():
        if not (signal == "doc_lens" and impl == "olmo_core"):
            out.append(Finding("signal_not_read_by_implementation", f"{signal}: {impl} does not read it; {who}"))
    return out


def _release_finding(eff: EffectiveAttention, rules: ReaderRules) -> list[Finding]:
    """A transformers reader outside the measured releases (or flex before packed detection) is not judged."""
    if eff.attn_implementation not in IMPLEMENTATIONS:
        return []
    if not rules.covered:
        return [Finding("release_not_measured", not_measured_line(rules))]
    if eff.attn_implementation == "flex_attention" and rules.flex and not rules.packed_detection:
        return [Finding("release_not_measured", f"flex_attention in {rules.label} builds its block mask without "
                                                "masking_utils; the lab has not measured it: run `check --model` there")]
    return []


def _checked(static: StaticCheck, eff: EffectiveAttention, *, allow_cross_document: bool, others=None,
             model_type: str | None = None, kernels=(), rules: ReaderRules | None = None) -> BatchCheck:
    """One implementation's :class:`BatchCheck` from the shared half and its own reading.

    ``others`` (a function of no argument giving every implementation's reading) adds the
    note that the same batch leaks under another implementation, when this one is sound.
    ``model_type`` adds that family's own layers (:func:`packing_core.check.mixers.mixer_findings`).
    """
    docs, t = static.documents, static.tensors
    rules = rules or release_rules()
    trained = static.trained if static.trained is not None else docs.real
    seen = {f.name for f in static.findings}       # a PackedBatch rule the to_hf() view already reports: once
    unmeasured = _release_finding(eff, rules)     # then what the reader does is not guessed: no reading findings
    findings = [*static.findings, *([] if unmeasured else leak_findings(eff, docs, allow_cross_document, trained, t)),
                *(f for f in static.packed if f.name not in seen), *unmeasured]
    layers: tuple[tuple[str, str], ...] = ()
    if unmeasured:
        others = None
    elif model_type:
        mine, layers = mixer_findings(model_type, t, eff, docs, trained, use_cache=eff.use_cache, kernels=kernels,
                                      allow_cross_document=allow_cross_document, rules=rules)
        if any(f.name == "documents_share_attention" and f.severity == "error" for f in findings):
            mine = [f for f in mine if f.name != "mask_ignores_position_resets"]    # attention already leaks
        findings += mine
    if others is not None and not any(f.name in _MISREAD_FINDINGS for f in findings):
        misread = [f"{o.attn_implementation} ({o.refused or o.path})" for o in others()
                   if o.attn_implementation != eff.attn_implementation and _misread(o, docs, trained)]
        if misread:
            findings.append(Finding("leaks_under_other_implementation",
                                    f"sound for {eff.attn_implementation}, but documents meet or the batch is misread "
                                    f"under {'; '.join(misread)}"))
    if static.ignored:
        findings.append(Finding("entries_ignored", f"not read: {', '.join(static.ignored)}"))
    findings = with_advice(findings, static.trainer, t, eff)
    return BatchCheck(eff.attn_implementation, eff.use_cache, batch_format(t), t.shape, by_severity(findings), docs,
                      eff, t, static.ignored, trained=trained, trainer=static.trainer,
                      model_type=model_family(model_type).model_type if model_type else "", layers=layers,
                      release=rules if eff.attn_implementation in IMPLEMENTATIONS else None)


def _facts(tokenizer) -> TokenizerFacts | None:
    if tokenizer is None or isinstance(tokenizer, TokenizerFacts):
        return tokenizer
    return tokenizer_facts(tokenizer)


def _static_of(batch: Mapping | PackedBatch, *, eos_ids=(), bos_ids=(), labels: str = "auto", tokenizer=None,
               mask_convention: str = "auto", allow_cross_document: bool = False) -> StaticCheck:
    """The implementation-free half of a trainer's batch, or of a PackedBatch read through ``to_hf()``.

    A PackedBatch's labels are ``to_hf()``'s (unshifted), and its own piece ids are the strongest
    evidence for the intended documents.
    """
    if isinstance(batch, PackedBatch):
        t, _ = batch_tensors(batch.to_hf())
        piece = batch.piece_ids.numpy()[batch.valid.numpy()]
        own = np.r_[False, piece[1:] != piece[:-1]][None]
        return static_check(t, eos_ids=eos_ids, bos_ids=bos_ids, labels="unshifted",
                            evidence=(Evidence("piece_ids", own),), packed=tuple(packed_findings(batch)))
    t, ignored = batch_tensors(batch, mask_convention)
    static = static_check(t, ignored, eos_ids=eos_ids, bos_ids=bos_ids, labels=labels, tokenizer=_facts(tokenizer),
                          allow_cross_document=allow_cross_document)
    return replace(static, trainer=batch_trainer(batch.keys(), t))


def _one(static: StaticCheck, attn_implementation: str, *, use_cache: bool, allow_cross_document: bool,
         compare: bool, model_type: str | None = None, kernels=(), rules: ReaderRules | None = None) -> BatchCheck:
    (attn_implementation,) = _readers(attn_implementation)
    rules = rules or release_rules()
    eff = effective_attention(static.tensors, attn_implementation, use_cache=use_cache, rules=rules)
    others = (lambda: [effective_attention(static.tensors, o, use_cache=use_cache, rules=rules) for o in
                       IMPLEMENTATIONS if o != attn_implementation]) \
        if compare and attn_implementation not in TRAINER_READERS else None
    return _checked(static, eff, allow_cross_document=allow_cross_document, others=others, model_type=model_type,
                    kernels=check_kernels(kernels) if model_type else (), rules=rules)


def check_hf_batch(batch: Mapping, attn_implementation: str = "sdpa", *, use_cache: bool = False, eos_ids=(),
                   bos_ids=(), labels: str = "auto", allow_cross_document: bool = False, compare: bool = True,
                   tokenizer=None, mask_convention: str = "auto", model_type: str | None = None,
                   kernels=None, transformers: str | None = None) -> BatchCheck:
    """Every finding of a trainer's batch, for the attention implementation that will read it.

    ``batch`` maps names to arrays, lists or tensors, as a trainer passes to ``model(**batch)``
    (transformers', torchtune's, Megatron's and OLMo-core's keys). ``attn_implementation`` names
    the reader: one of transformers' five (a transformers model given these tensors) or a trainer
    reader, ``megatron`` / ``olmo_core`` (that trainer's own model); the loss is read as the
    batch's labels (and Megatron's ``loss_mask``) say, whoever reads the attention. ``use_cache``
    is the value the forward call uses (Trainer and TRL pass False). ``eos_ids`` / ``bos_ids``, or a ``tokenizer``
    (its EOS id, where it fits the batch), find documents separated only by EOS tokens: EOS ids
    decide only where nothing stronger marks the documents. ``labels`` is ``unshifted``
    (transformers), ``shifted`` (targets) or ``auto``. ``mask_convention`` (``may-read`` /
    ``masked``) says what True means in a 4D mask that does not say it itself.
    ``allow_cross_document`` turns reading across documents, and targets across them, into
    notes. With ``compare``, a sound verdict notes the implementations under which it leaks.
    ``model_type`` (a transformers ``model_type``) also judges that family's layers beyond attention
    and its own mask call (:mod:`packing_core.check.mixers`), for the fast-kernel packages in
    ``kernels`` (None: those installed here); None judges attention only. ``transformers`` names the
    release that reads the batch (the trainer's, ``"4.46.3"``); None judges for the installed one
    (:mod:`packing_core.attention.releases`); the verdict names it.

    >>> pads_at_zero = {"input_ids": [[5, 6, 7, 0, 0, 0]], "position_ids": [[0, 1, 2, 0, 0, 0]]}
    >>> c = check_hf_batch(pads_at_zero)
    >>> c.sound, [f.name for f in c.warnings]
    (True, ['pads_given_position_zero'])
    """
    _readers(attn_implementation)
    rules = release_rules(transformers)
    if model_type:
        model_family(model_type, rules)       # an unknown model type is refused before the batch is read
    static = _static_of(batch, eos_ids=eos_ids, bos_ids=bos_ids, labels=labels, tokenizer=tokenizer,
                        mask_convention=mask_convention, allow_cross_document=allow_cross_document)
    return _one(static, attn_implementation, use_cache=use_cache, allow_cross_document=allow_cross_document,
                compare=compare, model_type=model_type, kernels=kernels, rules=rules)


def check_batch(batch: PackedBatch, attn_implementation: str = "sdpa", *, use_cache: bool = False,
                compare: bool = True, model_type: str | None = None, kernels=None,
                transformers: str | None = None) -> BatchCheck:
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
                compare=compare, model_type=model_type, kernels=kernels, rules=release_rules(transformers))


def check_all_implementations(batch: Mapping | PackedBatch, implementations=IMPLEMENTATIONS, *,
                              use_cache: bool = False, eos_ids=(), bos_ids=(), labels: str = "auto",
                              allow_cross_document: bool = False, compare: bool = False, tokenizer=None,
                              mask_convention: str = "auto", model_type: str | None = None,
                              kernels=None, transformers: str | None = None) -> tuple[BatchCheck, ...]:
    """One :class:`BatchCheck` per implementation, in the order given (transformers' five by default).

    The tensors, the intended documents and the implementation-free findings are computed
    once; only what each implementation reads (``effective_attention``) is computed per
    implementation. ``batch`` is a trainer's dict (the keyword arguments are
    :func:`check_hf_batch`'s) or a ``PackedBatch`` (checked as :func:`check_batch`). With
    ``compare``, each sound verdict also notes the implementations under which the batch leaks.

    >>> rows = {"input_ids": [[5, 6, 7, 8], [1, 2, 3, 4]], "position_ids": [[0, 1, 0, 1], [0, 1, 2, 0]]}
    >>> [c.verdict.split("; judged")[0] for c in check_all_implementations(rows, ("sdpa", "flash_attention_2"))]
    ['sdpa: SOUND', 'flash_attention_2: 1 ERROR(S): documents_share_attention']
    """
    names = _readers(implementations)
    rules = release_rules(transformers)
    if model_type:
        model_family(model_type, rules)
    kernels = check_kernels(kernels) if model_type else ()
    static = _static_of(batch, eos_ids=eos_ids, bos_ids=bos_ids, labels=labels, tokenizer=tokenizer,
                        mask_convention=mask_convention, allow_cross_document=allow_cross_document)
    read = {n: effective_attention(static.tensors, n, use_cache=use_cache, rules=rules) for n in names}

    def others() -> list[EffectiveAttention]:
        return [read[o] if o in read else effective_attention(static.tensors, o, use_cache=use_cache, rules=rules)
                for o in IMPLEMENTATIONS]

    return tuple(_checked(static, read[n], allow_cross_document=allow_cross_document, others=others if compare
                          else None, model_type=model_type, kernels=kernels, rules=rules) for n in names)

