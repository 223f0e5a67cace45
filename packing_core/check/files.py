"""Read a trainer's batch from a file: safetensors, ``.npz`` or JSON. Pickle is refused.

A pickle (``torch.save``'s ``.pt``/``.bin``, ``.pkl``) runs code when loaded, so the lab
never opens one: save the batch with :func:`save_batch_file`, or the one line of ``SAVE_HINT``,
which works on TRL's and torchtune's batches as they come (``max_length_q`` is an int there,
``cu_seq_lens_q`` and ``_k`` are one shared tensor, which ``safetensors`` refuses, and
torchtune's flex ``BlockMask`` is no tensor).

    >>> import json, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "batch.json")
    >>> _ = open(path, "w").write(json.dumps({"input_ids": [[1, 2, 3]], "position_ids": [[0, 1, 2]]}))
    >>> sorted(load_batch_file(path))
    ['input_ids', 'position_ids']
"""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from packing_core._validate import (
    MAX_BATCH_FILE_BYTES,
    MAX_BATCH_TOKENS,
    MAX_JSON_BYTES,
    MAX_MASK_VALUES,
    InputError,
    limit_hint,
)

MAX_BATCH_ARRAYS = 64   # arrays in one .npz batch (a trainer's batch holds a handful)
_KINDS = {"V": "raw void records", "S": "bytes", "M": "dates", "m": "time spans", "c": "complex numbers"}

PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".pickle", ".bin", ".ckpt")
BATCH_FILE_TYPES = ("safetensors", "npz", "json")
SAVE_SNIPPET = ("safetensors.torch.save_file({k: torch.as_tensor(v).clone().contiguous() "
                "for k, v in batch.items() if isinstance(v, (torch.Tensor, int))}, 'batch.safetensors')")
SAVE_HINT = f"save the batch with: {SAVE_SNIPPET}"
_SAVE_HINT = SAVE_HINT
# safetensors' dtype names -> numpy (BF16 is widened to float32: numpy has no bfloat16)
_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
                       "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}


def save_snippet() -> str:
    """The one line that saves a trainer's batch as it comes (TRL's, torchtune's), for a page to show.

    >>> save_snippet().startswith("safetensors.torch.save_file(")
    True
    """
    return SAVE_SNIPPET


def save_error_hint(error: BaseException) -> str:
    """What to do when ``safetensors.torch.save_file(batch, path)`` fails on a trainer's batch, in one line.

    TRL's padding-free batch holds ``cu_seq_lens_q`` and ``_k`` as one shared tensor (safetensors
    refuses shared memory) and ``max_length_q/_k`` as Python ints (it takes tensors only).

    >>> save_error_hint(ValueError("Key `max_length_q` is invalid, expected torch.Tensor but received <class 'int'>"))[:40]
    'max_length_q is a Python int, not a tens'
    """
    text = str(error)
    if "share memory" in text:
        cause = "some entries are one shared tensor (TRL's cu_seq_lens_q and cu_seq_lens_k), which safetensors refuses"
    elif "expected torch.Tensor" in text or "is invalid" in text:
        key = text.split("`")[1] if text.count("`") >= 2 else "an entry"
        cause = f"{key} is a Python int, not a tensor (TRL's max_length_q/_k)"
    elif "contiguous" in text:
        cause = "some tensors are views that are not contiguous"
    else:
        cause = f"safetensors refused the batch ({text.strip().splitlines()[0][:120] if text.strip() else type(error).__name__})"
    return f"{cause}: {SAVE_HINT}"


def _refuse_pickle(name: str, why: str):
    raise InputError(f"{name} is {why}: the lab never loads pickles (unpickling an untrusted file can run "
                     f"arbitrary code); {_SAVE_HINT}")


def save_batch_file(batch, path) -> list[str]:
    """Write ``batch`` (a trainer's dict) to a safetensors file; returns the entries left out.

    Whole numbers become 0-d tensors, numpy arrays tensors, shared tensors are copied apart,
    tensors on an accelerator come to the CPU; entries that are neither tensors nor ints (a flex ``BlockMask``, flags) are
    left out and named. Exactly the one line of ``SAVE_HINT``, plus the report.
    """
    import torch
    from safetensors.torch import save_file

    keep = {k: torch.as_tensor(v).detach().cpu().clone().contiguous() for k, v in batch.items()
            if isinstance(v, (torch.Tensor, np.ndarray, int)) and not isinstance(v, bool)}
    save_file(keep, str(path))
    return [str(k) for k in batch if k not in keep]


def load_batch_file(path) -> dict:
    """The batch in ``path`` as a dict of numpy arrays (JSON: lists), ready for ``check_hf_batch``.

    Read through ``data.sources.open_source`` as a file read whole: regular files only (a FIFO
    or ``/dev/zero`` is refused before it is opened), the name escaped, at most
    ``MAX_BATCH_FILE_BYTES`` read.
    """
    from packing_core.data.sources import WHOLE, display, open_source

    path = Path(path)
    if path.suffix.lower() in PICKLE_SUFFIXES:
        _refuse_pickle(display(path.name), f"a {display(path.suffix)} file (torch.save / pickle)")
    if not path.exists() and not path.is_symlink():
        raise InputError(f"no batch file at {display(str(path))}: give a .safetensors, .npz or .json file")
    data = open_source(path, WHOLE).read_all(MAX_BATCH_FILE_BYTES, "the batch file")
    return load_batch_bytes(data, path.name)


def load_batch_bytes(data: bytes, name: str = "batch") -> dict:
    """The same as :func:`load_batch_file`, from the file's bytes (an upload); ``name`` is for messages.

    Every array is bounded before it is built: an ``.npz`` by the sizes its members declare,
    JSON by its bytes and values, and each array by ``MAX_BATCH_TOKENS`` elements. Unsigned
    64-bit values past the int64 range are refused (a uint64 label of 2**64 - 100 would
    otherwise wrap to -100, the ignore index, and hide a boundary).
    """
    from packing_core.data.sources import display

    name = display(name)
    if len(data) > MAX_BATCH_FILE_BYTES:
        raise InputError(f"{name} is {len(data):,} bytes, more than a batch file may be ({MAX_BATCH_FILE_BYTES:,}); "
                         f"save one batch, not a dataset ({limit_hint('MAX_BATCH_FILE_BYTES')})")
    return {k: _bounded(name, k, v) for k, v in _load(data, name).items()}


def _load(data: bytes, name: str) -> dict:
    from packing_core.data.sources import load_json

    if Path(name).suffix.lower() in PICKLE_SUFFIXES:
        _refuse_pickle(name, f"a {Path(name).suffix} file (torch.save / pickle)")
    head = data[:16]
    # safetensors first: its 8-byte header length can begin with 0x80 (a 128-byte header), like a pickle
    safetensors = len(head) >= 9 and head[8:9] == b"{" and 2 <= int.from_bytes(head[:8], "little") <= len(data) - 8
    if not safetensors and head[:1] == b"\x80" and len(head) > 1 and head[1] <= 5:
        _refuse_pickle(name, "a pickle (it starts with pickle's protocol byte)")
    if head[:2] == b"PK":
        return _load_npz(data, name)
    if head.lstrip()[:1] in (b"{", b"[") or name.lower().endswith(".json"):
        if len(data) > MAX_JSON_BYTES:
            raise InputError(f"{name} is {len(data):,} bytes of JSON, more than the lab parses ({MAX_JSON_BYTES:,}); "
                             f"save the batch as .safetensors or .npz ({limit_hint('MAX_JSON_BYTES')})")
        batch = load_json(data, name, max_items=4 * MAX_BATCH_TOKENS, max_int=2**63 - 1)
        if not isinstance(batch, dict):
            raise InputError(f"{name} holds a JSON {type(batch).__name__}; give an object "
                             '{"input_ids": [[...]], "labels": [[...]], ...}')
        return batch
    if safetensors or (len(head) >= 9 and head[8:9] == b"{"):   # 8-byte header size, then a JSON header
        return _load_safetensors(data, name)
    raise InputError(f"{name} is not a safetensors, .npz or JSON file; {_SAVE_HINT}")


def _load_safetensors(data: bytes, name: str) -> dict:
    """A safetensors file read from its header: every dtype a trainer saves, bfloat16 widened to float32.

    The header (8 bytes of length, then JSON: dtype, shape and byte range per tensor) is checked
    before any array is built: each range must lie in the file and match its shape and dtype.
    """
    import json

    size = int.from_bytes(data[:8], "little")
    try:
        header = json.loads(data[8:8 + size])
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{name} is not a readable safetensors file ({str(e)[:200]})") from None
    if not isinstance(header, dict):
        raise InputError(f"{name} is not a readable safetensors file (its header is not a JSON object)")
    body, out = memoryview(data)[8 + size:], {}
    for key, spec in header.items():
        if key == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = spec["dtype"], [int(n) for n in spec["shape"]], spec["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{name}: the safetensors header entry {key!r} is malformed") from None
        if dtype not in _SAFETENSORS_DTYPES:
            raise InputError(f"{name}: {key} is stored as {dtype}, which a batch does not use; save token ids, "
                             "labels and positions as int64 and masks as bool or float")
        np_dtype = np.dtype(_SAFETENSORS_DTYPES[dtype])
        count = int(np.prod(shape, dtype=object)) if shape else 1
        if not (0 <= begin <= end <= len(body)) or end - begin != count * np_dtype.itemsize:
            raise InputError(f"{name}: {key} declares shape {tuple(shape)} ({dtype}) that does not match its "
                             f"{end - begin:,} bytes")
        arr = np.frombuffer(body[begin:end], dtype=np_dtype).reshape(shape)
        if dtype == "BF16":          # the upper 16 bits of a float32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[key] = arr
    return out


def _load_npz(data: bytes, name: str) -> dict:
    """An ``.npz`` after its members' declared sizes are checked: a 1 MB file may declare gigabytes."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = z.infolist()
            if any(i.filename.endswith(".pkl") for i in infos):
                _refuse_pickle(name, "a torch.save archive (it holds a data.pkl)")
            unpacked = sum(i.file_size for i in infos)
            if unpacked > MAX_BATCH_FILE_BYTES or len(infos) > MAX_BATCH_ARRAYS:
                raise InputError(f"{name} unpacks to {unpacked:,} bytes in {len(infos):,} arrays, more than a batch "
                                 f"may hold ({MAX_BATCH_FILE_BYTES:,} bytes, {MAX_BATCH_ARRAYS} arrays); save one batch "
                                 f"of integer arrays ({limit_hint('MAX_BATCH_FILE_BYTES')})")
            for info in infos:
                with z.open(info) as member:
                    _check_npy_header(member, info.filename, name)
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError) as e:
        raise InputError(f"{name} looks like a zip (.npz) but is not readable ({str(e)[:200]})") from None
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except (ValueError, EOFError, OSError, zipfile.BadZipFile) as e:
        raise InputError(f"{name}: an .npz member is unreadable or holds Python objects, which need pickle "
                         f"(refused) ({str(e)[:200]}); store integer arrays") from None


def _check_npy_header(member, member_name: str, name: str) -> None:
    from numpy.lib import format as npy

    try:
        version = npy.read_magic(member)
        read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
        shape, _, dtype = read(member, max_header_size=10_000)
    except (ValueError, EOFError, SyntaxError) as e:
        raise InputError(f"{name}: member {member_name!r} is not a .npy array ({str(e)[:200]})") from None
    if dtype.hasobject:
        _refuse_pickle(name, f"an .npz whose {member_name!r} holds Python objects")
    elements = int(np.prod([int(n) for n in shape], dtype=object)) if shape else 1
    if elements > _most_values(len(shape)):
        raise InputError(f"{name}: {member_name!r} declares shape {tuple(shape)} ({elements:,} values), more than a "
                         f"batch may hold ({_too_many(len(shape))}")
    if dtype.kind not in "biufU":   # void records, bytes, dates: no batch tensor; a void one may ask for gigabytes
        raise InputError(f"{name}: {member_name!r} holds {dtype.str} values ({_KINDS.get(dtype.kind, 'not numbers')}), "
                         "which no batch tensor is: store token ids, labels and positions as int64 and masks as "
                         "bool or float")
    if elements * dtype.itemsize > MAX_BATCH_FILE_BYTES:   # checked before numpy sets the bytes aside
        raise InputError(f"{name}: {member_name!r} declares {elements * dtype.itemsize:,} bytes ({tuple(shape)} of "
                         f"{dtype.str}), more than a batch file may unpack to ({MAX_BATCH_FILE_BYTES:,}); save one "
                         f"batch ({limit_hint('MAX_BATCH_FILE_BYTES')})")


def _most_values(ndim: int) -> int:
    """How many values one array of a batch may hold: a 3D/4D mask is queries x keys, the rest one per token."""
    return MAX_MASK_VALUES if ndim >= 3 else MAX_BATCH_TOKENS + 1


def _too_many(ndim: int) -> str:
    """The end of the message for an array past :func:`_most_values`: the limit, the fix, how to raise it."""
    if ndim >= 3:   # queries x keys: an 8,192-token row alone is 2**26 values
        return (f"{MAX_MASK_VALUES:,} values of a 3D/4D mask); give the boundaries as position_ids or cu_seq_lens_q/_k "
                f"instead of a 4D mask, or check shorter rows ({limit_hint('MAX_MASK_VALUES')})")
    return f"{MAX_BATCH_TOKENS:,} tokens); check one batch at a time ({limit_hint('MAX_BATCH_TOKENS')})"


def _bounded(name: str, key: str, value):
    """One array of the batch, within ``MAX_BATCH_TOKENS`` values and the int64 range."""
    if isinstance(value, np.ndarray):
        if value.size > _most_values(value.ndim):   # cu_seq_lens hold one more than the tokens
            raise InputError(f"{name}: {key} holds {value.size:,} values, more than a batch may hold "
                             f"({_too_many(value.ndim)}")
        if value.dtype.kind == "u" and value.dtype.itemsize == 8 and value.size:
            top = int(value.max())
            if top > np.iinfo(np.int64).max:
                raise InputError(f"{name}: {key} holds {top:,} ({value.dtype}), past the int64 range a trainer uses; "
                                 f"as int64 it would wrap to {top - 2**64:,}: save the batch as int64")
    return value
