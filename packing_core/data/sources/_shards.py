"""A corpus as shards: files, folders (also ``save_to_disk``) and globs, each file a Source.

``find_shards`` turns what the user typed into a sorted list of sources::

    corpus/                    find_shards(["corpus"])        -> [part-0.parquet, part-1.parquet]
      part-0.parquet           find_shards(["corpus/*.jsonl"]) -> []  -> an error naming the glob
      part-1.parquet
    saved/ (save_to_disk)      find_shards(["saved"])         -> [saved/data-00000-of-00001.arrow]

Every file goes through ``open_source`` (regular files only, names escaped); walks are
bounded (``MAX_DEPTH`` levels, each real folder once, at most ``MAX_SHARDS`` files).
"""
from __future__ import annotations

import glob
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import packing_core.data.sources._base as base
import packing_core.data.sources._lines as _lines
from packing_core._validate import MAX_DEPTH, MAX_SHARDS, limit_hint
from packing_core.data.sources._saved import saved_dataset, shard


def _walk(folder: Path, hidden: bool = False) -> Iterator[Path]:
    """Every file under ``folder`` in sorted order; each real folder is entered once.

    Links to folders are followed, but a folder reached again (through a link to itself or
    to a parent) is skipped, and at most ``MAX_DEPTH`` levels are descended: a self-linking
    folder cannot make a file count twice, or a walk go on for ever.
    """
    seen: set[tuple[int, int]] = set()

    def visit(d: Path, depth: int) -> Iterator[Path]:
        try:
            st = os.stat(d)
        except OSError:
            return
        key = (st.st_dev, st.st_ino)
        if key in seen or depth > MAX_DEPTH:
            return
        seen.add(key)
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if not hidden and e.name.startswith("."):
                continue
            try:
                is_dir = e.is_dir()
            except OSError:
                continue
            if is_dir:
                yield from visit(Path(e.path), depth + 1)
            else:
                yield Path(e.path)

    yield from visit(folder, 0)


def _glob_regex(pattern: str) -> re.Pattern:
    r"""A compiled regex for a relative glob: ``**`` spans folders, ``*`` and ``?`` stay inside one name.

    >>> bool(_glob_regex("**/*.jsonl").match("a/b/c.jsonl")), bool(_glob_regex("*.jsonl").match("a/c.jsonl"))
    (True, False)
    """
    out = []
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        seg, k = "", 0
        while k < len(part):
            c = part[k]
            if c == "*":
                seg += "[^/]*"
            elif c == "?":
                seg += "[^/]"
            elif c == "[" and (j := part.find("]", k + 2)) != -1:
                inner = part[k + 1:j]
                seg += "[" + ("^" + inner[1:] if inner.startswith("!") else inner).replace("\\", "\\\\") + "]"
                k = j
            else:
                seg += re.escape(c)
            k += 1
        out.append(seg + ("" if last else "/"))
    return re.compile("".join(out) + r"\Z", re.S)


def _glob(given: str) -> list[Path]:
    """Files matching a glob, each counted once; ``**`` walks with :func:`_walk` (loops cut, depth bounded)."""
    path = str(Path(given).expanduser())
    if "**" not in path:
        return [Path(m) for m in sorted(glob.glob(path))]   # one level per part: bounded even through links
    parts = path.split("/")
    first = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
    base = Path("/".join(parts[:first]) or ("/" if path.startswith("/") else "."))
    regex = _glob_regex("/".join(parts[first:]))
    out = []
    for f in _walk(base):
        rel = os.path.relpath(f, base)
        if regex.match(rel):
            out.append(f if path.startswith("/") or parts[:first] else Path(rel))
            if len(out) > MAX_SHARDS:
                break
    return out


def _regular_once(paths) -> list[Path]:
    """Regular data files only (FIFOs and devices are skipped), one entry per real file (same inode: once)."""
    seen: set[tuple[int, int]] = set()
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if not stat.S_ISREG(st.st_mode) or key in seen or not base.fmt_of(p.name):
            continue
        seen.add(key)
        out.append(p)
        if len(out) > MAX_SHARDS:
            raise base.SourceError(f"more than {MAX_SHARDS:,} data files found; scan a smaller folder or a narrower glob "
                                   f"({limit_hint('MAX_SHARDS')})")
    return out


def find_shards(inputs) -> list[base.Source]:
    """The shards named by files, folders and globs, in a stable (sorted) order.

    Within one folder or glob each real file counts once (a hard link, or a folder reached
    again through a link, adds nothing); a file named twice on the command line counts twice.
    """
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike, base.Source)) else list(inputs)
    if not inputs:
        raise base.SourceError("no input given; pass a file, a folder or a glob such as 'data/*.parquet'")
    shards: list[base.Source] = []
    for given in inputs:
        if isinstance(given, base.Source):   # an upload, already open: read as it is
            shards.append(given)
            continue
        given = str(given)
        path = Path(given).expanduser()
        if any(c in given for c in "*?["):
            files = _regular_once(_glob(given))
            if not files:
                raise base.SourceError(f"the glob {base.display(given)!r} matches no data files; check the pattern "
                                 f"(quote it so the shell leaves it alone) and the folder ({base.display(os.getcwd())})")
            shards += [shard(f) for f in files]
        elif path.is_dir():
            saved = saved_dataset(path)
            if saved is None:
                saved = [shard(f) for f in _regular_once(_walk(path))]
            if not saved:
                raise base.SourceError(f"the folder {base.display(given)!r} holds no data files ({', '.join(base.SUFFIXES)})")
            shards += saved
        elif path.exists() or path.is_symlink():
            shards.append(shard(path))
        else:
            raise base.SourceError(f"input not found: {base.display(given)!r}; check the path and the current folder "
                             f"({base.display(os.getcwd())})")
        if len(shards) > MAX_SHARDS:
            raise base.SourceError(f"more than {MAX_SHARDS:,} data files given; scan a smaller folder or a narrower glob "
                                   f"({limit_hint('MAX_SHARDS')})")
    return shards


def split_shard(src: base.Source, pieces: int) -> list[base.Source]:
    """A big file as up to ``pieces`` scan tasks: Parquet by ranges of row groups, JSON Lines and text
    by ranges of lines; other formats stay whole."""
    return split_parquet(src, pieces) if src.fmt == "parquet" else _lines.split(src, pieces)


def split_parquet(src: base.Source, pieces: int) -> list[base.Source]:
    """A Parquet file in about ``pieces`` shards by row groups (pyarrow imported here, on first use)."""
    base.pyarrow()
    import packing_core.data.sources._parquet as parquet

    return parquet.split(src, pieces)
