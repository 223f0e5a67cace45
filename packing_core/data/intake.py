"""Your data as a LengthProfile: one way in for ``report FILE``, ``scan`` and the explorer's uploader.

Whatever comes in, a profile comes out, and every strategy is then planned from the profile::

    chats.jsonl (messages)        ──┐
    pairs.parquet (prompt, completion) ─┼─> profile_from_inputs ─> LengthProfile ─> profile_table
    shards/ or 'data/*.arrow'     ──┤
    lengths.csv, texts.txt        ──┘
    profile.json (from ``scan``)  ────> LengthProfile.load

The kind comes from the columns (``kinds.detect_kind``, once per file): messages (or ShareGPT
conversations), prompt + completion, text, token-id lists (``input_ids``) or a length column.
Every file, of every registered format, is read by :mod:`packing_core.data.sources` with its
defences (regular files only, escaped names, bytes per value, the ``ReadBudget``), and every
input is counted by the scan's own engine (``scan(..., workers=0)``): one file, a folder and an
upload give one answer. The header of each file is read once. An upload is never written to
disk: its bytes are a Source in memory.

    >>> from packing_core.data.lengths import byte_tokenizer
    >>> p = profile_from_upload([("lengths.csv", b"length\\n5\\n3\\n5\\n")], lambda: byte_tokenizer)
    >>> p.count_dict(), p.kind, p.tokenizer
    ({3: 1, 5: 2}, 'lengths', 'none')
"""
from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import packing_core.data.sources as sources
from packing_core._settings import ReadBudget, read_budget
from packing_core._validate import MAX_PROFILE_BYTES, InputError
from packing_core.data.kinds import INSTRUCTION_KINDS, RECORD_KINDS
from packing_core.data.profile import LengthProfile


def _scan():
    """``data.scan.scan``, imported when a file is read (a missing pyarrow is one line, where a reader needs it)."""
    from packing_core.data.scan import scan

    return scan


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


def _from_source(src: sources.Source, kind, column, scan_input) -> LengthProfile:
    """A single file, through the scan (which reads its header once and detects its kind once)."""
    _check_kind(kind)
    if column is not None and kind in INSTRUCTION_KINDS:
        raise InputError(f"--column reads one column; kind {kind!r} reads its own columns: drop --column")
    return scan_input(kind, column, [src])


def _check_kind(kind) -> None:
    if kind is not None and kind not in RECORD_KINDS:
        raise InputError(f"unknown kind {kind!r}; choose one of {', '.join(RECORD_KINDS)}")


def profile_from_inputs(inputs, load_tokenizer: Callable, *, kind: str | None = None, column: str | None = None,
                        budget: ReadBudget | None = None) -> LengthProfile:
    """Files, folders (also ``save_to_disk``) or globs as one profile.

    ``load_tokenizer`` is a picklable zero-argument callable, as for ``scan`` (say
    ``functools.partial(load_tokenizer, "smollm2")``); it is called only when text must be
    counted. A profile written by ``scan`` (``.json`` with ``schema_version``) is loaded as it is.
    """
    def scan_input(k, c, given=inputs):
        return _scan()(given, load_tokenizer, kind=k, column=c, workers=0, budget=budget)

    path = _single_file(inputs)
    if path is None:
        profiles = _profiles(inputs)
        if profiles:    # the same answer as each profile alone: their counts add up (a file twice counts twice)
            return profiles[0].merge(*profiles[1:])
        _check_kind(kind)
        return scan_input(kind, column)
    src = sources.open_source(path)     # regular files only, the name escaped, a registered format
    profile = _profile(src, path)
    return profile if profile is not None else _from_source(src, kind, column, scan_input)


def _profile(src: sources.Source, path: Path) -> LengthProfile | None:
    """The profile a ``.json`` file holds (one a scan wrote), or None for data."""
    if src.fmt == "jsonl" and path.suffix.lower() == ".json" and src.size <= MAX_PROFILE_BYTES:
        data = src.read_all(MAX_PROFILE_BYTES, "the profile")
        if looks_like_profile(data):
            return LengthProfile.load(data)
    return None


def _profiles(inputs) -> list[LengthProfile]:
    """The profiles among several inputs: all of them (read as one), or none; a mix of the two is refused."""
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    found: list[tuple] = []
    data: list = []
    for given in inputs:
        path = Path(given).expanduser()
        is_file = path.suffix.lower() == ".json" and path.is_file()
        profile = _profile(sources.open_source(path), path) if is_file else None
        (found if profile is not None else data).append((given, profile))
    if found and data:
        raise InputError(f"{sources.display(str(found[0][0]))} is a length profile but {sources.display(str(data[0][0]))} "
                         "is data: give profiles alone (their counts add up) or data files alone")
    return [p for _, p in found]


def profile_from_upload(files: list[tuple[str, bytes]], load_tokenizer: Callable, *, kind: str | None = None,
                        column: str | None = None, budget: ReadBudget | None = None) -> LengthProfile:
    """Uploaded files (name, bytes): one data file, the shards of one corpus, or one profile.

    Each file is a Source in memory, read by the same readers as a path, with the same
    defences; messages name the uploaded file as the user named it (escaped).
    """
    files = [(str(n), bytes(d)) for n, d in files]
    if not files:
        raise InputError("no file uploaded; choose a data file or a length profile")
    if len(files) == 1 and looks_like_profile(files[0][1]):
        return LengthProfile.load(files[0][1])
    budget = budget or read_budget()
    size = sum(len(d) for _, d in files)   # the upload as a whole, before any of it is parsed
    sources.check_budget(sources.display(files[0][0]), budget, 0, size, 0.0, "")
    names = [Path(n).name or "upload" for n, _ in files]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:   # messages name a shard by its name: two of one name could not be told apart
        raise InputError(f"two uploads are named {sources.display(twice)!r}; give every shard its own plain name")
    shard = "" if len(files) == 1 else "shard "
    opened = [sources.open_source(io.BytesIO(d), name=shard + sources.display(n), fmt=sources.fmt_of(n) or _unknown(n))
              for n, (_, d) in zip(names, files)]

    def scan_input(k, c, given=opened):
        return _scan()(given, load_tokenizer, kind=k, column=c, workers=0, budget=budget)

    if len(opened) == 1:
        return _from_source(opened[0], kind, column, scan_input)
    _check_kind(kind)
    return scan_input(kind, column)


def _unknown(name: str) -> str:
    raise InputError(f"cannot tell the format of {sources.display(name)} from its name; use one of "
                     f"{', '.join(sources.INPUT_SUFFIXES)}")


__all__ = ["looks_like_profile", "profile_from_inputs", "profile_from_upload"]
