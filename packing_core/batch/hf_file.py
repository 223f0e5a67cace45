"""Read a trainer's batch from a file: safetensors, ``.npz`` or JSON. Pickle is refused.

A pickle (``torch.save``'s ``.pt``/``.bin``, ``.pkl``) runs code when loaded, so the lab
never opens one: save the batch with ``safetensors.torch.save_file({k: v.contiguous() ...})``
or ``numpy.savez`` instead.

    >>> import json, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "batch.json")
    >>> _ = open(path, "w").write(json.dumps({"input_ids": [[1, 2, 3]], "position_ids": [[0, 1, 2]]}))
    >>> sorted(load_batch_file(path))
    ['input_ids', 'position_ids']
"""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np

PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".pickle", ".bin", ".ckpt")
BATCH_FILE_TYPES = ("safetensors", "npz", "json")
_SAVE_HINT = ("save the batch with safetensors.torch.save_file(batch, 'batch.safetensors') "
              "or numpy.savez('batch.npz', **batch)")


def _refuse_pickle(name: str, why: str):
    raise ValueError(f"{name} is {why}: the lab never loads pickles (unpickling an untrusted file can run "
                     f"arbitrary code); {_SAVE_HINT}")


def load_batch_file(path) -> dict:
    """The batch in ``path`` as a dict of numpy arrays (JSON: lists), ready for ``check_hf_batch``."""
    path = Path(path)
    if path.suffix.lower() in PICKLE_SUFFIXES:
        _refuse_pickle(path.name, f"a {path.suffix} file (torch.save / pickle)")
    if not path.is_file():
        raise ValueError(f"no batch file at {path}: give a .safetensors, .npz or .json file")
    return load_batch_bytes(path.read_bytes(), path.name)


def load_batch_bytes(data: bytes, name: str = "batch") -> dict:
    """The same as :func:`load_batch_file`, from the file's bytes (an upload); ``name`` is for messages."""
    if Path(name).suffix.lower() in PICKLE_SUFFIXES:
        _refuse_pickle(name, f"a {Path(name).suffix} file (torch.save / pickle)")
    head = data[:16]
    if head[:1] == b"\x80" and len(head) > 1 and head[1] <= 5:
        _refuse_pickle(name, "a pickle (it starts with pickle's protocol byte)")
    if head[:2] == b"PK":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                names = z.namelist()
        except zipfile.BadZipFile as e:
            raise ValueError(f"{name} looks like a zip (.npz) but is not readable ({e})") from None
        if any(n.endswith(".pkl") for n in names):
            _refuse_pickle(name, "a torch.save archive (it holds a data.pkl)")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}
        except ValueError as e:
            raise ValueError(f"{name}: an .npz holding Python objects needs pickle, which the lab refuses "
                             f"({e}); store integer arrays") from None
    if head.lstrip()[:1] in (b"{", b"[") or name.lower().endswith(".json"):
        try:
            batch = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{name} is not valid UTF-8 JSON ({e})") from None
        if not isinstance(batch, dict):
            raise ValueError(f"{name} holds a JSON {type(batch).__name__}; give an object "
                             '{"input_ids": [[...]], "labels": [[...]], ...}')
        return batch
    if len(head) >= 9 and head[8:9] == b"{":   # safetensors: 8-byte header size, then a JSON header
        from safetensors import SafetensorError
        from safetensors.numpy import load

        try:
            return load(data)
        except (SafetensorError, ValueError, TypeError) as e:
            raise ValueError(f"{name} is not a readable safetensors file ({e})") from None
    raise ValueError(f"{name} is not a safetensors, .npz or JSON file; {_SAVE_HINT}")
