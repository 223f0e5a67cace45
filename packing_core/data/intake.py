"""Your data as a LengthProfile: one way in for ``report FILE``, ``scan`` and the explorer's uploader.

Whatever comes in, a profile comes out, and every strategy is then planned from the profile::

    chats.jsonl (messages)        ──┐
    pairs.parquet (prompt, completion) ─┼─> profile_from_inputs ─> LengthProfile ─> profile_table
    shards/ or 'data/*.arrow'     ──┤
    lengths.csv, texts.txt        ──┘
    profile.json (from ``scan``)  ────> LengthProfile.load

The kind comes from the columns (``formats.detect_kind``): messages, prompt + completion,
text, token-id lists (``input_ids``) or a length column. Chat and prompt/completion
records are counted by the scan's own engine (``scan(..., workers=0)``), so their length
and their tokens in the loss both come from the same templated text. A single CSV/TSV,
JSON Lines, Parquet or text file holding one column of text or lengths is read by
``readers`` with its defences (regular files only, escaped names, bytes per value, the
``ReadBudget``); the counting is ``count_tokens`` in both readers.

    >>> from packing_core.data.lengths import byte_tokenizer
    >>> p = profile_from_upload([("lengths.csv", b"length\\n5\\n3\\n5\\n")], lambda: byte_tokenizer)
    >>> p.count_dict(), p.kind, p.tokenizer
    ({3: 1, 5: 2}, 'lengths', 'none')
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import packing_core.data.readers as readers
from packing_core._settings import ReadBudget, read_budget
from packing_core.data.formats import RECORD_KINDS, detect_kind, kind_columns
from packing_core.data.lengths import column_lengths, count_tokens
from packing_core.data.profile import LengthProfile, SourceCount
from packing_core.data.scan import scan, tokenizer_identity
from packing_core.data.shards import SUFFIXES

# what an uploader takes: every data suffix the scan reads (".jsonl.gz" ends in "gz"), and profiles (.json)
UPLOAD_TYPES = sorted({s.rsplit(".", 1)[-1] for s in SUFFIXES})
MAX_PROFILE_BYTES = 64 << 20     # a profile is counts per length: megabytes at most


def looks_like_profile(data: bytes) -> bool:
    """True for the JSON object a scan writes (``schema_version`` and ``counts``), not JSON Lines.

    >>> looks_like_profile(b'{"schema_version": 1, "counts": {}}'), looks_like_profile(b'{"text": "hi"}\\n')
    (True, False)
    """
    head = bytes(data[:4096]).lstrip()
    if not head.startswith(b"{") or b'"schema_version"' not in bytes(data[:1 << 20]):
        return False
    try:
        d = json.loads(bytes(data)) if len(data) <= MAX_PROFILE_BYTES else None
    except (ValueError, UnicodeDecodeError):
        return False    # several objects (JSON Lines), or not JSON: read as data
    return isinstance(d, dict) and "counts" in d


class _Lazy:
    """A tokenizer loaded on its first use: a length column never loads one (nor imports transformers)."""

    def __init__(self, load):
        self._load, self.loaded = load, None

    def _get(self):
        if self.loaded is None:
            self.loaded = self._load()
        return self.loaded

    def __call__(self, texts):
        return self._get()(texts)

    def count(self, texts):
        return count_tokens(self._get(), texts)


def _column_profile(src: readers.Source, column: str, load, budget: ReadBudget | None, shown: str) -> LengthProfile:
    """One column of a single file through ``readers`` (its defences): counted lengths or tokenised text."""
    lazy = _Lazy(load)
    lengths, seen = column_lengths(src, column, lazy, budget=budget)
    sources = (SourceCount(shown, len(lengths)),)
    if seen == "lengths":
        return LengthProfile.from_lengths(lengths, kind="lengths", sources=sources)
    return LengthProfile.from_lengths(lengths, kind="text", **tokenizer_identity(lazy._get()), sources=sources)


def _single_file(inputs) -> Path | None:
    """The one input when it is a file (or names nothing: the reader says so), not a folder or a glob."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = list(inputs)
    if len(inputs) != 1:
        return None
    path = Path(inputs[0]).expanduser()
    if path.is_dir() or (not os.path.lexists(path) and any(c in str(inputs[0]) for c in "*?[")):
        return None
    return path


def _scan_only(path: Path) -> bool:
    """A suffix that only the scan reads (Arrow, JSON Lines .gz)."""
    name = path.name.lower()
    return Path(name).suffix not in readers.FORMATS and any(name.endswith(s) for s in SUFFIXES)


def _from_source(src: readers.Source, load, kind, column, budget, scan_input, shown: str) -> LengthProfile:
    """A single readable file: a text or length column through ``readers``; records through the scan."""
    _check_kind(kind)
    if column is None:
        cols = readers.columns(src)
        if not cols:
            raise ValueError(f"no documents found in {src.name}")
        detected = detect_kind(cols, kind, name=src.name)
        if detected in ("messages", "prompt-completion"):
            return scan_input(detected, None)
        column = kind_columns(detected, cols)[0]
    elif kind in ("messages", "prompt-completion"):
        raise ValueError(f"--column reads one column; kind {kind!r} reads its own columns: drop --column")
    return _column_profile(src, column, load, budget, shown)


def _check_kind(kind) -> None:
    if kind is not None and kind not in RECORD_KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose one of {', '.join(RECORD_KINDS)}")


def profile_from_inputs(inputs, load_tokenizer: Callable, *, kind: str | None = None, column: str | None = None,
                        budget: ReadBudget | None = None) -> LengthProfile:
    """Files, folders (also ``save_to_disk``) or globs as one profile.

    ``load_tokenizer`` is a picklable zero-argument callable, as for ``scan`` (say
    ``functools.partial(load_tokenizer, "smollm2")``); it is called only when text must be
    counted. A profile written by ``scan`` (``.json`` with ``schema_version``) is loaded as it is.
    """
    def scan_input(k, c):
        return scan(inputs, load_tokenizer, kind=k, column=c, workers=0)

    path = _single_file(inputs)
    if path is not None and _scan_only(path):
        readers.as_source(path, fmt="txt")   # the regular-file check alone (the scan reads the format)
        return scan_input(kind, column)
    if path is not None:
        src = readers.as_source(path)     # regular files only, the name escaped
        if path.suffix.lower() == ".json" and path.stat().st_size <= MAX_PROFILE_BYTES:
            data = path.read_bytes()
            if looks_like_profile(data):
                return LengthProfile.load(data)
        return _from_source(src, load_tokenizer, kind, column, budget, scan_input, src.name)
    _check_kind(kind)
    return scan_input(kind, column)


def profile_from_upload(files: list[tuple[str, bytes]], load_tokenizer: Callable, *, kind: str | None = None,
                        column: str | None = None, budget: ReadBudget | None = None) -> LengthProfile:
    """Uploaded files (name, bytes): one data file, the shards of one corpus, or one profile.

    A single CSV/TSV/JSONL/Parquet/TXT file of text or lengths is read in memory; anything
    else is written to a private temporary folder and scanned. Messages name the uploaded
    file, never a server folder.
    """
    files = [(str(n), bytes(d)) for n, d in files]
    if not files:
        raise ValueError("no file uploaded; choose a data file or a length profile")
    if len(files) == 1 and looks_like_profile(files[0][1]):
        return LengthProfile.load(files[0][1])
    with tempfile.TemporaryDirectory(prefix="packing-lab-upload-") as folder:
        def scan_input(k, c):
            # the scan has no read budget of its own yet: its bytes are checked here, before any is written
            limit = (budget or read_budget()).bytes
            size = sum(len(d) for _, d in files)
            if size > limit:
                raise ValueError(f"{readers.display(files[0][0])} is larger than one analysis may read: {size:,} bytes "
                                 f"(limit {limit:,}, PACKING_LAB_MAX_BYTES); analyse a sample or a shard of it")
            return _in_folder(folder, files, lambda: scan([folder], load_tokenizer, kind=k, column=c, workers=0))

        name = files[0][0]
        if len(files) == 1 and Path(name).suffix.lower() in readers.FORMATS:
            buf = io.BytesIO(files[0][1])
            buf.name = name
            src = readers.as_source(buf)
            return _from_source(src, load_tokenizer, kind, column, budget, scan_input, src.name)
        _check_kind(kind)
        return scan_input(kind, column)


def _in_folder(folder: str, files, run) -> LengthProfile:
    """Write the uploads into ``folder`` under their own names, run the scan, and strip the folder from messages."""
    seen = set()
    for name, data in files:
        base = Path(name).name or "upload"
        if base in seen or base.startswith("."):
            raise ValueError(f"two uploads are named {readers.display(base)!r} (or the name starts with a dot); "
                             "give every shard its own plain name")
        seen.add(base)
        (Path(folder) / base).write_bytes(data)
    prefix = str(Path(folder)) + os.sep
    try:
        profile = run()
    except ValueError as e:
        raise ValueError(str(e).replace(prefix, "").replace(str(Path(folder)), "the upload")) from None
    sources = tuple(SourceCount(s.name.replace(prefix, ""), s.rows) for s in profile.sources)
    return dataclasses.replace(profile, sources=sources, over_cap_examples=tuple(
        dataclasses.replace(e, source=e.source.replace(prefix, "")) for e in profile.over_cap_examples))


__all__ = ["UPLOAD_TYPES", "looks_like_profile", "profile_from_inputs", "profile_from_upload"]
