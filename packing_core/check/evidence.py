"""How far the batch's evidence goes: the tokenizer it was given, and what the weighing set aside.

A tokenizer given for a batch it did not tokenise turns pads or ordinary ids into "document
ends". :func:`tokenizer_fit` says so (an id past its vocabulary, its EOS id filling a pad tail
that its own pad id would fill) and keeps its EOS id out of the evidence: a warning, never a
verdict built on it. :func:`evidence_findings` reports what the weighing of
:mod:`packing_core.attention.documents` decided and set aside: an EOS inside a document (a chat
turn's end), a weaker source that disagrees, a batch with no boundary at all, and the formats
it read (document numbers in a 2D mask, a 4D mask's convention, rotary positions, signals that
no attention reads, zero-length documents).

    >>> facts = TokenizerFacts("tiny", eos_ids=(0,), pad_id=3, vocab_size=8)
    >>> t = BatchTensors(np.array([[5, 6, 0, 0]]), labels=np.array([[5, 6, -100, -100]]))
    >>> eos, found = tokenizer_fit(t, facts)
    >>> eos, [f.name for f in found]
    ((), ['tokenizer_does_not_fit'])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core.attention.documents import IntendedDocuments
from packing_core.attention.tensors import BatchTensors, finite_mask_value
from packing_core.batch.packed import IGNORE_INDEX
from packing_core.check.rules import Finding


@dataclass(frozen=True)
class TokenizerFacts:
    """What the check needs of a tokenizer: its EOS ids, its pad id and how many ids it knows."""

    name: str
    eos_ids: tuple[int, ...]
    pad_id: int | None = None
    vocab_size: int | None = None


def tokenizer_facts(tokenizer, name: str = "") -> TokenizerFacts:
    """The facts of a transformers tokenizer (or the lab's wrapper of one, with ``.hf``)."""
    hf = getattr(tokenizer, "hf", tokenizer)
    eos = getattr(hf, "eos_token_id", None)
    eos_ids = tuple(int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos]) if isinstance(e, int))
    pad = getattr(hf, "pad_token_id", None)
    try:
        vocab = len(hf)
    except TypeError:
        vocab = getattr(hf, "vocab_size", None)
    return TokenizerFacts(name or type(hf).__name__, eos_ids, pad if isinstance(pad, int) else None,
                          vocab if isinstance(vocab, int) else None)


def _pad_tail_ids(t: BatchTensors) -> np.ndarray:
    """Per row, the id filling a trailing run of two or more identical untrained tokens (-1: none)."""
    ids = t.input_ids
    B, T = ids.shape
    if T < 2:
        return np.full(B, -1)
    same = ids == ids[:, -1:]
    run = np.where(same.all(1), T, np.argmax(~same[:, ::-1], 1))
    untrained = np.ones((B, T), bool) if t.labels is None else t.labels == IGNORE_INDEX
    if t.mask_2d is not None:
        untrained |= ~t.mask_2d
    tail = np.arange(T)[None] >= (T - run)[:, None]
    known = t.labels is not None or t.mask_2d is not None      # without labels or a mask, no tail is known to be pads
    tail_ok = (untrained | ~tail).all(1) & known
    return np.where((run >= 2) & tail_ok, ids[:, -1], -1)


def tokenizer_fit(t: BatchTensors, facts: TokenizerFacts | None) -> tuple[tuple[int, ...], list[Finding]]:
    """``(EOS ids to use as evidence, findings)``: none of them where the tokenizer does not fit the batch."""
    if facts is None:
        return (), []
    top = int(t.input_ids.max())
    if facts.vocab_size is not None and top >= facts.vocab_size:
        return (), [Finding("tokenizer_does_not_fit",
                            f"input_ids reach {top:,}, past the {facts.vocab_size:,} ids of {facts.name}: it did not "
                            f"tokenise this batch, so its EOS id {list(facts.eos_ids)} is not read as a document end")]
    tails = _pad_tail_ids(t)
    padded_with_eos = sorted({int(x) for x in tails if x in facts.eos_ids})
    if padded_with_eos and facts.pad_id is not None and facts.pad_id not in padded_with_eos:
        return (), [Finding("tokenizer_does_not_fit",
                            f"the pad tails of this batch are filled with id {padded_with_eos[0]}, which is the EOS id "
                            f"of {facts.name}, whose own pad id is {facts.pad_id}: the batch was padded by another "
                            "tokenizer, so the EOS id is not read as a document end")]
    return facts.eos_ids, []


def evidence_findings(t: BatchTensors, docs: IntendedDocuments, *, eos_given: bool) -> list[Finding]:
    """What the weighing of the evidence decided and set aside, and the formats it read."""
    out: list[Finding] = []
    B, T = t.shape
    real = docs.real
    for e in docs.overruled:
        flat = np.flatnonzero(e.starts & real)
        where = ", ".join(f"row {i // T} token {i % T}" for i in flat[:4]) + (" ..." if len(flat) > 4 else "")
        if e.source == "eos":
            out.append(Finding("eos_inside_document", f"{len(flat)} EOS id(s) fall inside documents that "
                                                      f"{' and '.join(docs.decided_by)} mark ({where}): read as turn "
                                                      "ends, not document ends", marks=_marks(e.starts & real)))
        elif e.source != "bos":
            out.append(Finding("boundaries_disagree", f"{e.source} start documents at {where} where "
                                                      f"{' and '.join(docs.decided_by)} mark none"))
    # the two sources implementations read (flash: cu_seq_lens; sdpa, eager, flex: position_ids) must agree
    read = [e for e in docs.evidence if e.source in ("cu_seq_lens", "position_ids")]
    if len(read) == 2 and not np.array_equal(read[0].starts & real, read[1].starts & real) and \
            not any(f.name == "boundaries_disagree" for f in out):
        out.append(Finding("boundaries_disagree", docs.disagreements()[0] if docs.disagreements() else
                           "cu_seq_lens and position_ids start documents at different tokens"))
    if docs.chunks:
        out.append(Finding("fixed_size_chunks",
                           f"{' and '.join(docs.chunks)} cut the tokens into pieces of one length with EOS ids inside "
                           "(wrapped packing): the EOS ids mark the documents"))
    inside = docs.starts & ~_row_starts(real)
    full = real.all(1)
    if not eos_given and not inside.any() and "padding" not in docs.decided_by and full[:-1].all() and \
            (full.sum() >= 2 or (B == 1 and full[0])) and T > 1:
        out.append(Finding("no_document_boundaries",
                           f"no cu_seq_lens, position reset, label separator or EOS id marks a document boundary inside "
                           f"any of the {B} row(s), which are full: each row is read as one document"))
    if t.document_mask is not None:
        n = len(np.unique(t.document_mask[t.document_mask > 0]))
        out.append(Finding("document_ids_in_attention_mask",
                           f"the 2D attention_mask numbers {n} document(s) (1, 2, ...; 0 = pad): read as the documents; "
                           "transformers casts it to booleans before any implementation reads it"))
    info = t.mask_4d_info
    if info is not None and info.kind == "additive" and (said := finite_mask_value(info.raw)) is not None:
        out.append(Finding("additive_mask_finite", said))
    if info is not None and info.kind != "additive":
        out.append(Finding("mask_convention_read", f"a {info.kind} 4D mask, True = "
                                                   f"{'may read' if info.convention == 'may-read' else 'masked'} "
                                                   f"({info.decided_by})"))
    if t.rope_position_ids is not None:
        source = "the text row" if t.position_ids is not None else "every section returning to 0"
        out.append(Finding("rotary_positions_read", f"position_ids {tuple(t.rope_position_ids.shape)}: "
                                                    f"{t.position_layout}; document starts read from {source}"))
    for cu_name in ("cu_seq_lens_q", "cu_seq_lens_k"):
        cu = getattr(t, cu_name)
        if cu is not None and len(cu) > 1 and (np.diff(cu) == 0).any() and (np.diff(cu) >= 0).all():
            out.append(Finding("zero_length_documents",
                               f"{cu_name} hold {int((np.diff(cu) == 0).sum())} zero-length document(s) "
                               f"({cu[:10].tolist()}{' ...' if len(cu) > 10 else ''}): offsets padded to a fixed count"))
            break
    return out


def _row_starts(real: np.ndarray) -> np.ndarray:
    out = np.zeros_like(real)
    out[np.arange(real.shape[0]), np.argmax(real, 1)] = real.any(1)
    return out


def _marks(where: np.ndarray, limit: int = 2000) -> tuple[tuple[int, int], ...]:
    return tuple((int(r), int(s)) for r, s in np.argwhere(where)[:limit])
