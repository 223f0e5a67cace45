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

The saved file is JSON, schema version ``SCHEMA_VERSION`` (1)::

    {"schema_version": 1,
     "kind": "text" | "prompt-completion" | "messages" | "lengths",
     "tokenizer": {"name": "smollm2", "vocab_hash": "sha256:...", "chat_template_hash": "sha256:..." | null},
     "documents": 4, "tokens": 20,                  (totals: checked against the counts on load)
     "counts": {"3": 2, "5": 1, "9": 1},            (length -> documents of that length)
     "loss_tokens": {"3": 2, "5": 2, "9": 4} | null, (length -> trained tokens; null: every token)
     "cap": 8 | null, "over_cap": {"documents": 1, "examples": [{"source": ..., "where": ..., "length": 9}]},
     "sources": [{"name": "shard-0.parquet", "rows": 4}],  (rows: documents counted from it)
     "scan_seconds": 0.8}

Saving writes a temporary file and renames it, so a reader never sees half a profile.
"""
from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from packing_core._validate import (
    MAX_DISTINCT_LENGTHS,
    MAX_DOCUMENTS,
    MAX_LENGTH,
    MAX_PROFILE_BYTES,
    MAX_TOTAL_TOKENS,
    InputError,
)

SCHEMA_VERSION = 1
KINDS = ("text", "prompt-completion", "messages", "lengths")
MAX_OVER_CAP_EXAMPLES = 100   # documents over the cap named in the profile (the count is exact)


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
            _validate(self)

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
        keys = sorted(_int(k, "length", "the counts", MAX_LENGTH, minimum=1) for k in counts)
        if len(set(keys)) < len(keys):
            raise InputError("the counts hold one length twice (as 7 and '7', say); give each length once")
        by_key = {_int(k, "length", "the counts", MAX_LENGTH): v for k, v in counts.items()}
        c = np.array([_int(by_key[k], f"count of length {k:,}", "the counts", MAX_DOCUMENTS) for k in keys],
                     dtype=np.int64)
        keys = np.array(keys, dtype=np.int64)
        loss = None
        if loss_tokens is not None:
            by_len = {_int(k, "length", "the loss tokens", MAX_LENGTH): _int(v, "loss tokens", "the loss tokens",
                                                                             MAX_TOTAL_TOKENS)
                      for k, v in loss_tokens.items()}
            loss = np.array([by_len.get(int(k), 0) for k in keys], dtype=np.int64)
        return cls(keys, c, loss, **meta)

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
            if has_loss:
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
        from packing_core.data.readers import display

        if not isinstance(d, dict):
            raise InputError(f"{name} is not a length profile (a JSON object with schema_version); "
                             "write one with: python -m packing_core scan INPUT --out profile.json")
        version = d.get("schema_version")
        if type(version) is not int or version != SCHEMA_VERSION:   # `true == 1` in Python: not a version
            raise InputError(f"{name} has schema_version {version!r}; this lab reads version {SCHEMA_VERSION}: "
                             "scan the data again with this version")
        try:
            tok = d["tokenizer"]
            counts = _int_map(d["counts"], "count", name, MAX_DOCUMENTS)
            loss = d.get("loss_tokens")
            if loss is not None:
                loss = _int_map(loss, "loss tokens", name, MAX_TOTAL_TOKENS)
                if set(loss) - set(counts):
                    raise InputError(f"{name}: loss_tokens has lengths {sorted(set(loss) - set(counts))[:5]} "
                                     "that counts lacks; the file was edited by hand, scan again")
            over = d.get("over_cap") or {}
            # names from a file are shown in tables and messages: control characters escaped here, once
            text = (lambda v: None if v is None else display(str(v))[:500])
            profile = cls.from_counts(
                counts, loss, kind=d["kind"], tokenizer=text(tok["name"]), vocab_hash=text(tok.get("vocab_hash")),
                chat_template_hash=text(tok.get("chat_template_hash")),
                sources=tuple(SourceCount(text(s["name"]), _int(s["rows"], "source rows", name, MAX_DOCUMENTS))
                              for s in d["sources"]),
                cap=None if d.get("cap") is None else _int(d["cap"], "cap", name, MAX_LENGTH),
                over_cap_examples=tuple(OverCap(text(e["source"]), text(e["where"]),
                                                _int(e["length"], "length", name, MAX_LENGTH))
                                        for e in list(over.get("examples", []))[:MAX_OVER_CAP_EXAMPLES]),
                scan_seconds=_seconds(d.get("scan_seconds", 0.0), name))
        except (KeyError, TypeError, AttributeError) as e:
            raise InputError(f"{name} is missing or mangles the field {e}; it is not a complete length "
                             f"profile of schema_version {SCHEMA_VERSION}: scan the data again") from None
        for key, value in (("documents", profile.documents), ("tokens", profile.tokens),
                           ("over_cap", profile.over_cap)):
            stored = over.get("documents") if key == "over_cap" else d.get(key)
            if stored is not None and (type(stored) is not int or stored != value):
                raise InputError(f"{name} says {key} = {stored!r} but its counts give {value:,}; "
                                 "the file was edited by hand or is damaged: scan the data again")
        return profile

    def save(self, path, inputs=()) -> Path:
        """Write the profile as JSON atomically: a temporary file in the same folder, then a rename.

        ``inputs`` (the paths scanned) may not be overwritten, and neither may anything that
        is not a regular file (a device, a FIFO, a folder): see ``readers.write_atomic``.
        """
        from packing_core.data.readers import write_atomic

        def write(f):
            text = io.TextIOWrapper(f, encoding="utf-8", write_through=True)
            json.dump(self.to_dict(), text)
            text.write("\n")
            text.detach()

        return write_atomic(path, write, inputs)

    @classmethod
    def load(cls, source) -> LengthProfile:
        """Read a profile from a path, bytes or an upload (a binary file-like object).

        At most ``MAX_PROFILE_BYTES`` are read, from regular files only, and the JSON is parsed
        safely (see ``readers.load_json``): no NaN or Infinity, no length given twice, no nesting
        past a few levels, and no more values than ``MAX_DISTINCT_LENGTHS`` lengths need.
        """
        from packing_core.data.readers import display, load_json, read_bytes

        if isinstance(source, (bytes, bytearray)):
            name, raw = "<bytes>", bytes(source)
        elif isinstance(source, (str, os.PathLike)):
            name, raw = display(str(source)), read_bytes(source, "the profile", MAX_PROFILE_BYTES)
        else:
            name, raw = display(str(getattr(source, "name", None) or "<upload>")), source.read(MAX_PROFILE_BYTES + 1)
        if len(raw) > MAX_PROFILE_BYTES:
            raise InputError(f"the profile {name} is larger than {MAX_PROFILE_BYTES:,} bytes, more than the lab "
                             "reads; a profile of every length the lab accepts is smaller: check the file")
        try:
            d = load_json(raw, name, max_items=_MAX_PROFILE_ITEMS, duplicates=True)
        except ValueError as e:
            if " is not JSON (" in str(e) or "not UTF-8" in str(e):
                raise InputError(f"{e}; a length profile is the JSON file that "
                                 "`python -m packing_core scan ... --out profile.json` writes") from None
            raise
        return cls.from_dict(d, name)


# two maps (counts, loss tokens) of at most MAX_DISTINCT_LENGTHS lengths each, plus the other fields
_MAX_PROFILE_ITEMS = 4 * MAX_DISTINCT_LENGTHS + 100_000


def _int_map(values, what: str, name: str, maximum: int) -> dict[int, int]:
    """``{length: number}`` from a JSON object; a length written twice ("7" and "07") is refused."""
    if not isinstance(values, dict):
        raise TypeError(what)
    if len(values) > MAX_DISTINCT_LENGTHS:
        raise InputError(f"{name} holds {len(values):,} distinct lengths, more than the lab accepts "
                         f"({MAX_DISTINCT_LENGTHS:,}); merge nearby lengths or profile a shard")
    out: dict[int, int] = {}
    for k, v in values.items():
        length = _int(k, "length", name, MAX_LENGTH, minimum=1)
        if length in out:
            raise InputError(f"{name}: the length {length:,} appears twice in {what}s ({display_key(k)}); "
                             "each length may appear once: the file was edited by hand, scan again")
        out[length] = _int(v, f"{what} of length {length:,}", name, maximum)
    return out


def display_key(k) -> str:
    return repr(str(k))[:40]


def _seconds(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e9:
        raise InputError(f"{name}: scan_seconds is {str(value)[:40]!r}, not a number of seconds; scan again")
    return float(value)


def _int(value, what: str, name: str, maximum: int | None = None, minimum: int = 0) -> int:
    """A whole number from a JSON field (or a key's text), within the lab's limits, else one line.

    Booleans and fractions are refused; so are numbers past ``maximum`` (the lab's ``MAX_*``),
    before any int64 arithmetic can wrap them.
    """
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        if isinstance(value, str) and not value.strip().lstrip("+-").isdigit():
            raise ValueError
        if isinstance(value, str) and len(value) > 40:
            raise ValueError
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{name}: {what} is {str(value)[:40]!r}, not a whole number; the file was edited by hand "
                         "or is damaged: scan the data again") from None
    if number < minimum:
        low = "negative" if number < 0 else f"below {minimum}"
        raise InputError(f"{name}: {what} is {number:,}, {low}; the file was edited by hand "
                         "or is damaged: scan the data again")
    if maximum is not None and number > maximum:
        raise InputError(f"{name}: {what} is {number:,}, more than the lab accepts ({maximum:,}); "
                         "profile a shard of the data, or fix the file")
    return number


def _validate(p: LengthProfile) -> None:
    if p.lengths.ndim != 1 or p.counts.shape != p.lengths.shape:
        raise InputError(f"lengths and counts must be 1-D and the same size, got {p.lengths.shape} and {p.counts.shape}")
    if len(p.lengths) and (p.lengths < 1).any():
        raise InputError(f"profile length {int(p.lengths[p.lengths < 1][0])} is below 1; every document has "
                         "at least one token: the file was edited by hand, scan the data again")
    if (np.diff(p.lengths) <= 0).any():
        raise InputError("profile lengths must be distinct and ascending; build it with from_counts()")
    if (p.counts < 0).any():
        i = int(np.argmax(p.counts < 0))
        raise InputError(f"profile count of length {int(p.lengths[i])} is {int(p.counts[i])}, negative; "
                         "counts are documents: the file was edited by hand, scan the data again")
    _check_limits(p)
    if p.loss_tokens is not None:
        if p.loss_tokens.shape != p.lengths.shape:
            raise InputError("loss_tokens must have one entry per length")
        bad = (p.loss_tokens < 0) | (p.loss_tokens > p.lengths * p.counts)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"profile loss tokens of length {int(p.lengths[i])} are {int(p.loss_tokens[i])}, outside "
                             f"0..{int(p.lengths[i] * p.counts[i])} (length x documents); the file was edited "
                             "by hand, scan the data again")
    if p.kind not in KINDS:
        raise InputError(f"profile kind must be one of {', '.join(KINDS)}, got {str(p.kind)[:60]!r}")
    rows = sum(s.rows for s in p.sources)
    if p.sources and rows != p.documents:
        raise InputError(f"the profile's sources hold {rows:,} documents but its counts hold {p.documents:,}; "
                         "the file was edited by hand, scan the data again")
    if p.cap is not None and p.cap < 1:
        raise InputError(f"profile cap must be at least 1, got {p.cap}")


def _check_limits(p: LengthProfile) -> None:
    """The lab's ``MAX_*`` limits, checked so that no int64 sum below can wrap.

    Each test runs in float64 first (no wrap, a relative error of 1e-16) and, only past a
    limit, names the exact figure from Python integers.
    """
    if len(p.lengths) > MAX_DISTINCT_LENGTHS:
        raise InputError(f"the profile holds {len(p.lengths):,} distinct lengths, more than the lab accepts "
                         f"({MAX_DISTINCT_LENGTHS:,}); profile a shard of the data")
    if len(p.lengths) and int(p.lengths[-1]) > MAX_LENGTH:
        raise InputError(f"profile length {int(p.lengths[-1]):,} is above the largest length the lab accepts "
                         f"({MAX_LENGTH:,} tokens)")
    docs = float(p.counts.sum(dtype=np.float64))
    if docs > MAX_DOCUMENTS:
        exact = sum(int(c) for c in p.counts.tolist())
        raise InputError(f"the profile holds {exact:,} documents, more than the lab accepts ({MAX_DOCUMENTS:,}); "
                         "profile a shard of the data")
    tokens = float(np.dot(p.lengths.astype(np.float64), p.counts.astype(np.float64)))
    if tokens > MAX_TOTAL_TOKENS * (1 - 1e-12):
        exact = sum(int(n) * int(c) for n, c in zip(p.lengths.tolist(), p.counts.tolist()))
        if exact > MAX_TOTAL_TOKENS:
            raise InputError(f"the profile holds {exact:,} tokens, more than the lab accepts ({MAX_TOTAL_TOKENS:,}); "
                             "profile a shard of the data")
