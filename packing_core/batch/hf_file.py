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

import json
import zipfile
from pathlib import Path

import numpy as np

PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".pickle", ".bin", ".ckpt")
BATCH_FILE_TYPES = ("safetensors", "npz", "json")
_SAVE_HINT = ("save the batch with safetensors.torch.save_file(batch, 'batch.safetensors') "
              "or numpy.savez('batch.npz', **batch)")


def _refuse_pickle(path: Path, why: str):
    raise ValueError(f"{path.name} is {why}: the lab never loads pickles (loading one runs code); {_SAVE_HINT}")


def load_batch_file(path) -> dict:
    """The batch in ``path`` as a dict of numpy arrays (JSON: lists), ready for ``check_hf_batch``."""
    path = Path(path)
    if path.suffix.lower() in PICKLE_SUFFIXES:
        _refuse_pickle(path, f"a {path.suffix} file (torch.save / pickle)")
    if not path.is_file():
        raise ValueError(f"no batch file at {path}: give a .safetensors, .npz or .json file")
    with open(path, "rb") as f:
        head = f.read(16)
    if head[:1] == b"\x80" and len(head) > 1 and head[1] <= 5:
        _refuse_pickle(path, "a pickle (it starts with pickle's protocol byte)")
    if head[:2] == b"PK":
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
        if any(n.endswith(".pkl") for n in names):
            _refuse_pickle(path, "a torch.save archive (it holds a data.pkl)")
        try:
            with np.load(path, allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}
        except ValueError as e:
            raise ValueError(f"{path.name}: an .npz holding Python objects needs pickle, which the lab refuses "
                             f"({e}); store integer arrays") from None
    if head.lstrip()[:1] in (b"{", b"["):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path.name} is not valid UTF-8 JSON ({e})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path.name} holds a JSON {type(data).__name__}; give an object "
                             '{"input_ids": [[...]], "labels": [[...]], ...}')
        return data
    if len(head) >= 9 and head[8:9] == b"{":   # safetensors: 8-byte header size, then a JSON header
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        try:
            return load_file(str(path))
        except (SafetensorError, ValueError, TypeError) as e:
            raise ValueError(f"{path.name} is not a readable safetensors file ({e})") from None
    raise ValueError(f"{path.name} is not a safetensors, .npz or JSON file; {_SAVE_HINT}")
