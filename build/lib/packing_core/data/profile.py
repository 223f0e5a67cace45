"""LengthProfile: a corpus as exact counts per length, small enough to mail, exact to merge.

A scan of any corpus ends here. The profile keeps how many documents have each length
(and, for supervised data, how many of their tokens are trained), never the documents::

    lengths  [3, 5, 3, 9]          -> counts {3: 2, 5: 1, 9: 1}
    two shards' profiles            -> merged by adding the counts

    >>> p = LengthProfile.from_lengths([3, 5, 3, 9], loss_tokens=[1, 2, 1, 4])
    >>> p.count_dict(), p.documents, p.tokens, round(p.loss_share, 3)
    ({3: 2, 5: 1, 9: 1}, 4, 20, 0.4)
    >>> p.merge(p).count_dict()
    {3: 4, 5: 2, 9: 2}

The saved file is JSON (its schema and every check on reading it: :mod:`packing_core.data.profile_io`).
Saving writes a temporary file and renames it, so a reader never sees half a profile.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from packing_core._validate import MAX_DOCUMENTS, MAX_LENGTH, MAX_TOTAL_TOKENS, InputError
from packing_core.data.files import write_atomic
from packing_core.data.profile_io import (
    MAX_OVER_CAP_EXAMPLES,
    SCHEMA_VERSION,
    check_counts,
    check_totals,
    field_number,
    profile_fields,
    read_profile,
)

__all__ = ["MAX_OVER_CAP_EXAMPLES", "SCHEMA_VERSION", "LengthProfile", "OverCap", "SourceCount"]


@dataclass(frozen=True)
class SourceCount:
    """One input of a scan, and how many documents it gave."""

    name: str
    rows: int

    def to_dict(self) -> dict:
        return {"name": self.name, "rows": self.rows}


@dataclass(frozen=True)
class OverCap:
    """A document longer than the profile's cap, named so that it can be found and fixed."""

    source: str
    where: str
    length: int

    def to_dict(self) -> dict:
        return {"source": self.source, "where": self.where, "length": self.length}


def _frozen(a) -> np.ndarray:
    a = np.array(a, dtype=np.int64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class LengthProfile:
    """Exact document counts per length (ascending, distinct), with what the scan saw."""

    lengths: np.ndarray                 # int64 [distinct]: each length that occurs, ascending
    counts: np.ndarray                  # int64 [distinct]: documents of that length
    loss_tokens: np.ndarray | None = None   # int64 [distinct]: trained tokens summed over them; None: all
    kind: str = "lengths"
    tokenizer: str = "none"
    vocab_hash: str | None = None
    chat_template_hash: str | None = None
    sources: tuple[SourceCount, ...] = ()
    cap: int | None = None
    over_cap_examples: tuple[OverCap, ...] = ()
    scan_seconds: float = 0.0
    _check: bool = field(default=True, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "lengths", _frozen(self.lengths))
        object.__setattr__(self, "counts", _frozen(self.counts))
        if self.loss_tokens is not None:
            object.__setattr__(self, "loss_tokens", _frozen(self.loss_tokens))
        if self._check:
            check_counts(self.lengths, self.counts, self.loss_tokens, self.kind,
                         sum(s.rows for s in self.sources) if self.sources else None, self.cap)

    # --- numbers ---------------------------------------------------------------------
    @property
    def documents(self) -> int:
        return int(self.counts.sum())

    @property
    def tokens(self) -> int:
        return int((self.lengths * self.counts).sum())

    @property
    def trained_tokens(self) -> int:
        """Tokens in the loss: the answers of supervised data, every token of plain text."""
        return self.tokens if self.loss_tokens is None else int(self.loss_tokens.sum())

    @property
    def loss_share(self) -> float:
        return self.trained_tokens / self.tokens if self.tokens else 0.0

    @property
    def over_cap(self) -> int:
        """Documents longer than ``cap`` (exact, from the counts)."""
        return 0 if self.cap is None else int(self.counts[self.lengths > self.cap].sum())

    def count_dict(self) -> dict[int, int]:
        return dict(zip(self.lengths.tolist(), self.counts.tolist()))

    # --- building --------------------------------------------------------------------
    @classmethod
    def from_lengths(cls, lengths, loss_tokens=None, **meta) -> LengthProfile:
        """Count an array of lengths (and per-document trained tokens) into a profile."""
        try:
            lengths = np.asarray(lengths, dtype=np.int64)
        except OverflowError:
            raise InputError("a length does not fit a 64-bit integer; lengths are at most "
                             f"{MAX_LENGTH:,} tokens") from None
        values, inverse = np.unique(lengths, return_inverse=True)
        counts = np.bincount(inverse, minlength=len(values))
        loss = None
        if loss_tokens is not None:
            loss = np.bincount(inverse, weights=np.asarray(loss_tokens, dtype=np.float64),
                               minlength=len(values)).astype(np.int64)
        return cls(values, counts, loss, **meta)

    @classmethod
    def from_counts(cls, counts: dict, loss_tokens: dict | None = None, **meta) -> LengthProfile:
        """A profile from ``{length: documents}`` (and ``{length: trained tokens}``)."""
        given = sorted(field_number(k, "length", "the counts", MAX_LENGTH, minimum=1) for k in counts)
        if len(set(given)) < len(given):
            raise InputError("the counts hold one length twice (as 7 and '7', say); give each length once")
        by_key = {field_number(k, "length", "the counts", MAX_LENGTH): v for k, v in counts.items()}
        c = np.array([field_number(by_key[k], f"count of length {k:,}", "the counts", MAX_DOCUMENTS) for k in given],
                     dtype=np.int64)
        loss = None
        if loss_tokens is not None:
            by_len = {field_number(k, "length", "the loss tokens", MAX_LENGTH):
                      field_number(v, "loss tokens", "the loss tokens", MAX_TOTAL_TOKENS) for k, v in loss_tokens.items()}
            loss = np.array([by_len.get(k, 0) for k in given], dtype=np.int64)
        return cls(np.array(given, dtype=np.int64), c, loss, **meta)

    def merge(self, *others: LengthProfile) -> LengthProfile:
        """The profile of all inputs together: counts add, sources and examples concatenate."""
        every = (self, *others)
        for p in others:
            for what in ("kind", "tokenizer", "vocab_hash", "chat_template_hash", "cap"):
                if getattr(p, what) != getattr(self, what):
                    raise InputError(f"cannot merge profiles with different {what}: {getattr(self, what)!r} "
                                     f"vs {getattr(p, what)!r}; scan both inputs with the same settings")
        lengths = np.unique(np.concatenate([p.lengths for p in every]))
        counts = np.zeros(len(lengths), np.int64)
        has_loss = any(p.loss_tokens is not None for p in every)
        loss = np.zeros(len(lengths), np.int64) if has_loss else None
        for p in every:
            at = np.searchsorted(lengths, p.lengths)
            counts[at] += p.counts
            if loss is not None:
                loss[at] += p.lengths * p.counts if p.loss_tokens is None else p.loss_tokens
        examples = tuple(e for p in every for e in p.over_cap_examples)[:MAX_OVER_CAP_EXAMPLES]
        return LengthProfile(lengths, counts, loss, kind=self.kind, tokenizer=self.tokenizer,
                             vocab_hash=self.vocab_hash, chat_template_hash=self.chat_template_hash,
                             sources=tuple(s for p in every for s in p.sources), cap=self.cap,
                             over_cap_examples=examples, scan_seconds=sum(p.scan_seconds for p in every))

    def sample(self, n: int, seed: int = 0) -> np.ndarray:
        """``n`` document lengths drawn without replacement, in a seeded random order.

        >>> LengthProfile.from_counts({3: 2, 9: 1}).sample(10).tolist() != []
        True
        """
        n = min(int(n), self.documents)
        rng = np.random.default_rng(seed)
        if n == self.documents:
            take = self.counts
        elif self.documents < 10**9:
            take = rng.multivariate_hypergeometric(self.counts, n)
        else:   # numpy's exact draw stops at 1e9; from that many, with or without replacement is alike
            take = rng.multinomial(n, self.counts / self.documents)
        out = np.repeat(self.lengths, take)
        rng.shuffle(out)
        return out

    # --- files -----------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": self.kind,
            "tokenizer": {"name": self.tokenizer, "vocab_hash": self.vocab_hash,
                          "chat_template_hash": self.chat_template_hash},
            "documents": self.documents,
            "tokens": self.tokens,
            "counts": {str(k): v for k, v in zip(self.lengths.tolist(), self.counts.tolist())},
            "loss_tokens": None if self.loss_tokens is None else {
                str(k): v for k, v in zip(self.lengths.tolist(), self.loss_tokens.tolist())},
            "cap": self.cap,
            "over_cap": {"documents": self.over_cap, "examples": [e.to_dict() for e in self.over_cap_examples]},
            "sources": [s.to_dict() for s in self.sources],
            "scan_seconds": round(float(self.scan_seconds), 3),
        }

    @classmethod
    def from_dict(cls, d, name: str = "the profile") -> LengthProfile:
        """A profile from its JSON form, refusing other versions and hand-edited inconsistencies."""
        f = profile_fields(d, name)
        profile = cls.from_counts(
            f["counts"], f["loss_tokens"], kind=f["kind"], tokenizer=f["tokenizer"], vocab_hash=f["vocab_hash"],
            chat_template_hash=f["chat_template_hash"], sources=tuple(SourceCount(*s) for s in f["sources"]),
            cap=f["cap"], over_cap_examples=tuple(OverCap(*e) for e in f["over_cap_examples"]),
            scan_seconds=f["scan_seconds"])
        check_totals(d, profile.documents, profile.tokens, profile.over_cap, name)
        return profile

    def save(self, path, inputs=()) -> Path:
        """Write the profile as JSON atomically: a temporary file in the same folder, then a rename.

        ``inputs`` (the paths scanned) may not be overwritten, and neither may anything that
        is not a regular file (a device, a FIFO, a folder): see ``files.write_atomic``.
        """
        def write(f):
            text = io.TextIOWrapper(f, encoding="utf-8", write_through=True)
            json.dump(self.to_dict(), text)
            text.write("\n")
            text.detach()

        return write_atomic(path, write, inputs)

    @classmethod
    def load(cls, source) -> LengthProfile:
        """Read a profile from a path, bytes or an upload (a binary file-like object), safely and bounded
        (``profile_io.read_profile``), and check it (``from_dict``)."""
        d, name = read_profile(source)
        return cls.from_dict(d, name)
