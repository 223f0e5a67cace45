"""A length profile's file: its JSON schema, read safely and checked, and the invariants of its counts.

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

This module reads and checks plain values (dicts, arrays); :class:`packing_core.data.profile.LengthProfile`
is built from them. A whole number in the file follows the lab's one rule
(``_validate.whole_number_text``): ``7`` or ``"7"``, never ``7.0``, ``true`` or ``"٧"``.

    >>> profile_fields({"schema_version": 1, "kind": "lengths", "tokenizer": {"name": "none"},
    ...                 "counts": {"3": 2}, "sources": []}, "p.json")["counts"]
    {3: 2}
"""
from __future__ import annotations

import os

import numpy as np

from packing_core._validate import (
    MAX_DISTINCT_LENGTHS,
    MAX_DOCUMENTS,
    MAX_LENGTH,
    MAX_PROFILE_BYTES,
    MAX_TOTAL_TOKENS,
    InputError,
    limit_hint,
    whole_number_text,
)
from packing_core.data.files import display, load_json, read_bytes
from packing_core.data.kinds import PROFILE_KINDS
from packing_core.data.sources._range import read_at_most

__all__ = ["MAX_OVER_CAP_EXAMPLES", "SCHEMA_VERSION", "check_counts", "check_totals", "field_number", "profile_fields",
           "read_profile"]

SCHEMA_VERSION = 1
MAX_OVER_CAP_EXAMPLES = 100   # documents over the cap named in the profile (the count is exact)
# two maps (counts, loss tokens) of at most MAX_DISTINCT_LENGTHS lengths each, plus the other fields
_MAX_PROFILE_ITEMS = 4 * MAX_DISTINCT_LENGTHS + 100_000
_SCAN_AGAIN = "the file was edited by hand or is damaged: scan the data again"


def read_profile(source) -> tuple[object, str]:
    """``(parsed JSON, name)`` of a profile file: a path, bytes or an upload (a binary file-like object).

    At most ``MAX_PROFILE_BYTES`` are read, from regular files only, and the JSON is parsed
    safely (``files.load_json``): no NaN or Infinity, no length given twice, no nesting past
    a few levels, and no more values than ``MAX_DISTINCT_LENGTHS`` lengths need.
    """
    if isinstance(source, (bytes, bytearray)):
        name, raw = "<bytes>", bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        name, raw = display(str(source)), read_bytes(source, "the profile", MAX_PROFILE_BYTES)
    else:
        name, raw = display(str(getattr(source, "name", None) or "<upload>")), read_at_most(source, MAX_PROFILE_BYTES)
    if len(raw) > MAX_PROFILE_BYTES:
        raise InputError(f"the profile {name} is larger than {MAX_PROFILE_BYTES:,} bytes, more than the lab "
                         "reads; a profile of every length the lab accepts is smaller: check the file "
                         f"({limit_hint('MAX_PROFILE_BYTES')})")
    try:
        return load_json(raw, name, max_items=_MAX_PROFILE_ITEMS, duplicates=True), name
    except ValueError as e:
        if " is not JSON (" in str(e) or "not UTF-8" in str(e):
            raise InputError(f"{e}; a length profile is the JSON file that "
                             "`python -m packing_core scan ... --out profile.json` writes") from None
        raise


def profile_fields(d, name: str = "the profile") -> dict:
    """The checked fields of a profile's JSON form: ``counts`` and ``loss_tokens`` ({length: number})
    plus the keyword arguments of ``LengthProfile`` (sources and examples as plain tuples).

    Other versions are refused, and so is every value a scan could not have written.
    """
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
        return {
            "counts": counts, "loss_tokens": loss, "kind": d["kind"], "tokenizer": text(tok["name"]),
            "vocab_hash": text(tok.get("vocab_hash")), "chat_template_hash": text(tok.get("chat_template_hash")),
            "sources": tuple((text(s["name"]), field_number(s["rows"], "source rows", name, MAX_DOCUMENTS))
                             for s in d["sources"]),
            "cap": None if d.get("cap") is None else field_number(d["cap"], "cap", name, MAX_LENGTH),
            "over_cap_examples": tuple((text(e["source"]), text(e["where"]),
                                        field_number(e["length"], "length", name, MAX_LENGTH))
                                       for e in list(over.get("examples", []))[:MAX_OVER_CAP_EXAMPLES]),
            "scan_seconds": _seconds(d.get("scan_seconds", 0.0), name)}
    except (KeyError, TypeError, AttributeError) as e:
        raise InputError(f"{name} is missing or mangles the field {e}; it is not a complete length "
                         f"profile of schema_version {SCHEMA_VERSION}: scan the data again") from None


def check_totals(d: dict, documents: int, tokens: int, over_cap: int, name: str) -> None:
    """The totals a file states (documents, tokens, over_cap) must be what its counts give."""
    over = d.get("over_cap") or {}
    for key, value in (("documents", documents), ("tokens", tokens), ("over_cap", over_cap)):
        stored = over.get("documents") if key == "over_cap" else d.get(key)
        if stored is not None and (type(stored) is not int or stored != value):
            raise InputError(f"{name} says {key} = {stored!r} but its counts give {value:,}; {_SCAN_AGAIN}")


def _int_map(values, what: str, name: str, maximum: int) -> dict[int, int]:
    """``{length: number}`` from a JSON object; a length written twice ("7" and "07") is refused."""
    if not isinstance(values, dict):
        raise TypeError(what)
    if len(values) > MAX_DISTINCT_LENGTHS:
        raise InputError(f"{name} holds {len(values):,} distinct lengths, more than the lab accepts "
                         f"({MAX_DISTINCT_LENGTHS:,}); merge nearby lengths or profile a shard "
                         f"({limit_hint('MAX_DISTINCT_LENGTHS')})")
    out: dict[int, int] = {}
    for k, v in values.items():
        length = field_number(k, "length", name, MAX_LENGTH, minimum=1)
        if length in out:
            raise InputError(f"{name}: the length {length:,} appears twice in {what}s ({repr(str(k))[:40]}); "
                             "each length may appear once: the file was edited by hand, scan again")
        out[length] = field_number(v, f"{what} of length {length:,}", name, maximum)
    return out


def _seconds(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e9:
        raise InputError(f"{name}: scan_seconds is {str(value)[:40]!r}, not a number of seconds; scan again")
    return float(value)


def field_number(value, what: str, name: str, maximum: int | None = None, minimum: int = 0) -> int:
    """A whole number from a JSON field (or a key's text), within the lab's limits, else one line.

    The lab's one rule for whole numbers written as text (``_validate.whole_number_text``):
    booleans, fractions and non-ASCII digits are refused; so are numbers past ``maximum``
    (the lab's ``MAX_*``), before any int64 arithmetic can wrap them.
    """
    number = whole_number_text(value)
    if number is None:
        raise InputError(f"{name}: {what} is {str(value)[:40]!r}, not a whole number; {_SCAN_AGAIN}")
    if number < minimum:
        low = "negative" if number < 0 else f"below {minimum}"
        raise InputError(f"{name}: {what} is {number:,}, {low}; {_SCAN_AGAIN}")
    if maximum is not None and number > maximum:
        raise InputError(f"{name}: {what} is {number:,}, more than the lab accepts ({maximum:,}); "
                         "profile a shard of the data, or fix the file")
    return number


def check_counts(lengths: np.ndarray, counts: np.ndarray, loss_tokens: np.ndarray | None, kind: str,
                 source_rows: int | None, cap: int | None) -> None:
    """A profile's invariants: lengths distinct, ascending and >= 1, counts >= 0, loss within its
    tokens, a known kind, sources adding up, and the lab's ``MAX_*`` limits (no int64 sum can wrap)."""
    if lengths.ndim != 1 or counts.shape != lengths.shape:
        raise InputError(f"lengths and counts must be 1-D and the same size, got {lengths.shape} and {counts.shape}")
    if len(lengths) and (lengths < 1).any():
        raise InputError(f"profile length {int(lengths[lengths < 1][0])} is below 1; every document has "
                         "at least one token: the file was edited by hand, scan the data again")
    if (np.diff(lengths) <= 0).any():
        raise InputError("profile lengths must be distinct and ascending; build it with from_counts()")
    if (counts < 0).any():
        i = int(np.argmax(counts < 0))
        raise InputError(f"profile count of length {int(lengths[i])} is {int(counts[i])}, negative; "
                         "counts are documents: the file was edited by hand, scan the data again")
    documents = _check_limits(lengths, counts)
    if loss_tokens is not None:
        if loss_tokens.shape != lengths.shape:
            raise InputError("loss_tokens must have one entry per length")
        bad = (loss_tokens < 0) | (loss_tokens > lengths * counts)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"profile loss tokens of length {int(lengths[i])} are {int(loss_tokens[i])}, outside "
                             f"0..{int(lengths[i] * counts[i])} (length x documents); the file was edited "
                             "by hand, scan the data again")
    if kind not in PROFILE_KINDS:
        raise InputError(f"profile kind must be one of {', '.join(PROFILE_KINDS)}, got {str(kind)[:60]!r}")
    if source_rows is not None and source_rows != documents:
        raise InputError(f"the profile's sources hold {source_rows:,} documents but its counts hold {documents:,}; "
                         "the file was edited by hand, scan the data again")
    if cap is not None and cap < 1:
        raise InputError(f"profile cap must be at least 1, got {cap}")


def _check_limits(lengths: np.ndarray, counts: np.ndarray) -> int:
    """The lab's ``MAX_*`` limits; the number of documents.

    Each test runs in float64 first (no wrap, a relative error of 1e-16) and, only past a
    limit, names the exact figure from Python integers.
    """
    if len(lengths) > MAX_DISTINCT_LENGTHS:
        raise InputError(f"the profile holds {len(lengths):,} distinct lengths, more than the lab accepts "
                         f"({MAX_DISTINCT_LENGTHS:,}); profile a shard of the data ({limit_hint('MAX_DISTINCT_LENGTHS')})")
    if len(lengths) and int(lengths[-1]) > MAX_LENGTH:
        raise InputError(f"profile length {int(lengths[-1]):,} is above the largest length the lab accepts "
                         f"({MAX_LENGTH:,} tokens)")
    docs = float(counts.sum(dtype=np.float64))
    if docs > MAX_DOCUMENTS:
        exact = sum(int(c) for c in counts.tolist())
        raise InputError(f"the profile holds {exact:,} documents, more than the lab accepts ({MAX_DOCUMENTS:,}); "
                         "profile a shard of the data")
    tokens = float(np.dot(lengths.astype(np.float64), counts.astype(np.float64)))
    if tokens > MAX_TOTAL_TOKENS * (1 - 1e-12):
        exact = sum(int(n) * int(c) for n, c in zip(lengths.tolist(), counts.tolist()))
        if exact > MAX_TOTAL_TOKENS:
            raise InputError(f"the profile holds {exact:,} tokens, more than the lab accepts ({MAX_TOTAL_TOKENS:,}); "
                             "profile a shard of the data")
    return int(counts.sum())
