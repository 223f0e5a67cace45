"""What a check found, for one attention implementation: :class:`BatchCheck` and its text.

One type for every check (``check_hf_batch``, ``check_batch``, ``check_all_implementations``):
the findings sorted by severity, the evidence behind them (the intended documents, what the
implementation reads, the tensors), a one-line verdict, a table for people and a dict for JSON.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from packing_core.attention.documents import IntendedDocuments
from packing_core.attention.families import family
from packing_core.attention.releases import ReaderRules
from packing_core.attention.semantics import EffectiveAttention
from packing_core.attention.tensors import BatchTensors
from packing_core.check.rules import Finding

_ORDER = {"error": 0, "warning": 1, "note": 2}
# the findings that say attention itself lets documents meet, or misreads the batch
_ATTENTION = ("documents_share_attention", "mask_ignores_position_resets", "mask_reads_future", "query_reads_nothing",
              "kernel_skips_tokens", "kernel_cannot_read_batch", "max_length_too_small")


def by_severity(findings) -> tuple[Finding, ...]:
    """Errors first, then warnings, then notes; the order within each is kept."""
    return tuple(sorted(findings, key=lambda f: _ORDER[f.severity]))


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
    trained: np.ndarray | None = field(default=None, compare=False, repr=False)   # bool [B, T]: in the loss
    trainer: str = ""                                                            # check.trainers.TRAINERS
    model_type: str = ""         # the family judged beyond attention (check.mixers); "" = attention only
    layers: tuple[tuple[str, str], ...] = ()    # (kind, status) of each layer kind beyond attention
    release: ReaderRules | None = field(default=None, compare=False, repr=False)   # the transformers release judged for

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
    def unmeasured(self) -> bool:
        """Judged for a transformers release outside the measured ones: never SOUND, exit 1 (no reading is guessed)."""
        return any(f.name == "release_not_measured" for f in self.findings)

    @property
    def sound(self) -> bool:
        """No error: the documents stay apart and the loss is right, for this implementation (and its release
        is measured)."""
        return not self.errors and not self.unmeasured

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.findings)

    def exit_code(self, strict: bool = False) -> int:
        return 1 if self.errors or self.unmeasured or (strict and self.warnings) else 0

    @property
    def format_words(self) -> str:
        """The format in words: ``"padded batch"``, or for a 2D mask of ones, a batch that has none of its pads.

        >>> from packing_core.check import check_hf_batch
        >>> check_hf_batch({"input_ids": [[5, 6, 7]], "attention_mask": [[1, 1, 1]]}).format_words
        'batch with a 2D attention_mask (all ones: no pads)'
        """
        m = self.tensors.mask_2d
        if self.format == "padded" and m is not None and m.all():
            return "batch with a 2D attention_mask (all ones: no pads)"
        return f"{self.format} batch"

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
    def layer_statuses(self) -> tuple[tuple[str, str], ...]:
        """``(kind, STATUS)`` per layer kind of the model judged: attention from the findings, the others from
        :mod:`packing_core.check.mixers` (``()`` when no model type was given: attention only)."""
        if not self.model_type:
            return ()
        attention = "LEAKS" if any(f.name in _ATTENTION and f.severity == "error" for f in self.findings) else "SOUND"
        words = {"sound": "SOUND", "leaks": "LEAKS", "refused": "REFUSED here", "unreached": "not reached"}
        own = dict(self.layers)
        first = (("attention", words[own["attention"]]) if "attention" in own else ("attention", attention),)
        return first * self.has_attention + tuple((k, words.get(s, s)) for k, s in self.layers if k != "attention")

    @property
    def has_attention(self) -> bool:
        return "attention" in family(self.model_type).kinds if self.model_type else True

    @property
    def verdict(self) -> str:
        """One line: SOUND or LEAKS / ERRORS for this implementation, as the CLI and pages print it; with a
        model type, each layer kind's status after it (attention, then the layers beyond it)."""
        unmeasured = next((f for f in self.findings if f.name == "release_not_measured"), None)
        if unmeasured is not None:
            return f"{self.attn_implementation}: {unmeasured.detail}"
        layers = ", ".join(f"{k} {s}" for k, s in self.layer_statuses)
        layers = f" ({self.model_type}: {layers})" if layers else ""
        judged = f"; judged for {self.release.label}" if self.release is not None else ""
        if self.sound:
            extra = f", {len(self.warnings)} warning(s)" if self.warnings else ""
            return f"{self.attn_implementation}: SOUND{extra}{layers}{judged}"
        return (f"{self.attn_implementation}: {len(self.errors)} ERROR(S): {', '.join(f.name for f in self.errors)}"
                f"{layers}{judged}")

    def to_dict(self) -> dict:
        return {"attn_implementation": self.attn_implementation, "use_cache": self.use_cache, "format": self.format,
                "shape": list(self.shape), "sound": self.sound, "documents": [[list(d) for d in row] for row in
                                                                            self.documents.per_row()],
                "labels": self.documents.labels_reason, "evidence": list(self.documents.decided_by),
                "trainer": self.trainer, "attention": self.effective.to_dict(),
                "findings": [f.to_dict() for f in self.findings], "ignored": list(self.ignored),
                "model_type": self.model_type, "layers": dict(self.layer_statuses),
                "transformers": self.release.to_dict() if self.release is not None else None}

    def format_table(self) -> str:
        rows, width = self.shape
        sources = ", ".join(self.documents.decided_by) or "none (each row is one document)"
        lines = [f"{self.format_words}: {rows} row(s) x {width} tokens, {self.n_documents} intended document(s) "
                 f"from {sources}; {self.documents.labels_reason}",
                 f"read by {self.attn_implementation}{' with a cache' if self.use_cache else ''}: "
                 f"{self.effective.path}", self.verdict]
        if self.model_type:
            lines.append(f"layers of {self.model_type} judged: " + "; ".join(f"{k} {s}" for k, s in self.layer_statuses))
        for f in self.findings:
            lines.append(f"  {f.severity.upper():<7} {f.name}: {f.title}\n    {f.detail}\n    fix: {f.fix}")
        return "\n".join(lines)
