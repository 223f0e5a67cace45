"""Files that are not data inputs: small files read whole, outputs written safely, tokenizer folders vetted.

Inputs (data files, shards, uploads) are read by :mod:`packing_core.data.sources`, which
holds every defence; the helpers here use the same ``open_source()`` for a file read whole
(a profile, a config, a tokenizer file): a regular file only, the name escaped, never more
than ``limit + 1`` bytes read. Outputs are vetted (:func:`check_output`) and written all or
nothing (:func:`write_atomic`); a tokenizer folder is vetted before a library opens it
(:func:`vet_tokenizer_folder`).

    >>> read_bytes("/dev/zero", "the profile", 10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core.data.sources.SourceError: /dev/zero is a character device, not a regular file; ...
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import packing_core.data.sources as sources
from packing_core._validate import MAX_TOKENIZER_FILE_BYTES, InputError, limit_hint
from packing_core.data.sources import check_regular, display, load_json

__all__ = ["check_output", "check_regular", "display", "load_json", "read_bytes", "vet_tokenizer_folder",
           "write_atomic"]


def read_bytes(path, what: str, limit: int) -> bytes:
    """The whole of a small regular file (a profile, a config, a batch), refused past ``limit`` bytes.

    Only regular files are opened (a FIFO would block, ``/dev/zero`` never ends) and never
    more than ``limit + 1`` bytes are read, whatever the file claims.
    """
    return sources.open_source(path, sources.WHOLE).read_all(limit, what)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def check_output(path, inputs=(), flag: str = "--out", what: str = "the profile") -> Path:
    """Refuse an output path that would destroy something: an input, a device, a FIFO, a folder.

    ``inputs`` are the paths read (files or folders). The check compares devices and inodes
    (``os.path.samefile``), so a hard link or a symbolic link to an input is caught too;
    only a new file or an existing regular file that is no input may be replaced. ``flag`` and ``what``
    name the option and the file in messages (``--save-state``, "the state").
    """
    path = Path(path).expanduser()
    shown = sources.display(str(path))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise InputError(f"{flag} {shown} is a symbolic link loop; name a new file") from None
        if e.errno == errno.ENOTDIR:
            raise InputError(f"{flag} {shown}: a part of that path is a file, not a folder; name a new file") from None
        raise InputError(f"cannot write {shown} ({e.strerror}); name a file in a folder you can write to") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = sources.file_type(st.st_mode)
        raise InputError(f"{flag} {shown} is {what}; the lab writes only regular files and never replaces "
                         "anything else: name a new file, e.g. profile.json")
    if st is not None:
        for given in inputs:
            given = Path(str(given)).expanduser()
            for candidate in _input_files(given):
                try:
                    if _same_file(st, os.stat(candidate)):
                        raise InputError(f"{flag} {shown} is one of the inputs ({sources.display(str(candidate))}); writing "
                                         f"{what} there would destroy the data: name a new file")
                except OSError:
                    continue
    for given in inputs:
        _refuse_inside(path, Path(str(given)).expanduser(), f"{flag} {shown}", what)
    if os.path.islink(path) and st is not None:
        raise InputError(f"{flag} {shown} is a symbolic link; the lab would replace the link, not its target: "
                         "name the file itself or a new file")
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise InputError(f"{flag} {shown}: {sources.display(str(parent))} is a file, not a folder; name a new file")
    return path


def _refuse_inside(path: Path, given: Path, shown: str, what: str) -> None:
    """An output the next read of a folder (or a glob) input would take as data is refused: ``scan in/ --out
    in/p.json`` would make the next ``scan in/`` read the profile as a shard."""
    import fnmatch

    if not str(path).lower().endswith(tuple(sources.INPUT_SUFFIXES)):
        return
    target = Path(os.path.realpath(path.parent if str(path.parent) else ".")) / path.name
    text = str(given)
    if any(c in text for c in "*?["):
        pattern = os.path.join(os.path.realpath(os.path.dirname(text) or "."), os.path.basename(text)) \
            if not any(c in os.path.dirname(text) for c in "*?[") else os.path.abspath(text)
        inside = fnmatch.fnmatch(str(target), pattern)
    else:
        inside = given.is_dir() and target.is_relative_to(os.path.realpath(given))
    if inside:
        raise InputError(f"{shown} is inside the input {sources.display(text)}: the next read of that input "
                         f"would take {what} for data; write it outside, e.g. beside the folder")


def _input_files(given: Path):
    """The files an input names: itself, or the files under a folder / matched by a glob."""
    text = str(given)
    if any(c in text for c in "*?["):
        import glob as _glob

        yield from (Path(m) for m in _glob.iglob(text))  # one level: a link loop cannot recurse here
        return
    yield given
    if given.is_dir():
        for root, _, files in os.walk(given):   # links to folders are not followed: bounded
            yield from (Path(root) / f for f in files)


def write_atomic(path, data, inputs=(), flag: str = "--out", what: str = "the profile") -> Path:
    """Write ``data`` (bytes, or a function that writes to a binary file) to ``path``, all or nothing.

    The path is vetted by :func:`check_output` first.
    The bytes go to a hidden temporary file beside the target, which is then renamed over
    it; on any failure (Ctrl-C included) the temporary file is removed and the message names
    the target only, never the temporary name.
    """
    import tempfile

    path = check_output(path, inputs, flag, what)
    shown = sources.display(str(path))
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".part", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            data(f) if callable(data) else f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)   # mkstemp makes it private; a profile is meant to be shared
        check_output(path, inputs, flag, what)   # again, just before the rename: nothing swapped in meanwhile
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise InputError(f"could not write {shown} ({e.strerror or type(e).__name__}); nothing was written: "
                         "check the folder and the free space") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return path




TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt")


def vet_tokenizer_folder(folder: Path) -> None:
    """Refuse a tokenizer folder before a library opens it: its files regular and bounded, its JSON plain.

    A FIFO named ``tokenizer.json`` would block the loader forever, ``/dev/zero`` linked as
    one would fill memory, and a ``tokenizer_config.json`` nested past Python's recursion
    limit would crash it with a traceback.
    """
    for name in (*TOKENIZER_FILES, "special_tokens_map.json", "added_tokens.json", "chat_template.jinja",
                 "chat_template.json", "merges.txt"):
        path = folder / name
        if path.exists() or path.is_symlink():
            sources.check_regular(path)
            if path.stat().st_size > MAX_TOKENIZER_FILE_BYTES:
                raise InputError(f"{path} is {path.stat().st_size:,} bytes, more than a tokenizer file may be "
                                 f"({MAX_TOKENIZER_FILE_BYTES:,}); check the folder ({limit_hint('MAX_TOKENIZER_FILE_BYTES')})")
            if name.endswith(".json") and name != "tokenizer.json":
                data = sources.open_source(path, sources.WHOLE).read_all(MAX_TOKENIZER_FILE_BYTES, "the tokenizer file")
                config = load_json(data, str(path))
                if name == "tokenizer_config.json" and not isinstance(config, dict):
                    raise InputError(f"{path} holds a JSON {type(config).__name__}, not an object; save the "
                                     "tokenizer again with save_pretrained()")
