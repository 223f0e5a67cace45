"""Model folders vetted before any library reads them: no torch, no transformers imported here.

Every file is checked through ``data.sources`` (regular files only, names escaped, bounded
reads). The CLI calls :func:`vet_model_folder` before it imports torch, so a hostile folder (a
pickle behind an index, a config of 100,000 layers, a FIFO for weights) is refused in
well under a second; ``pretrained.load_local_model`` calls it again before loading.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from packing_core._validate import MAX_CONFIG_BYTES, InputError

WEIGHT_SUFFIX = ".safetensors"
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_WIDTH_KEYS = ("hidden_size", "n_embd", "d_model", "intermediate_size", "n_inner", "ffn_dim", "num_attention_heads",
               "n_head", "num_key_value_heads", "head_dim", "num_experts", "num_local_experts")
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "n_ctx")
_MODEL_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")   # "llama", "qwen3_5_text", "bert-generation"


def _config_number(config: dict, keys, folder: str, limit: str, what: str) -> int | None:
    from packing_core._validate import LIMITS, limit_hint

    maximum = LIMITS[limit]
    for key in keys:
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{folder}/config.json: {key} is {str(value)[:40]!r}, not a whole number >= 1; "
                             "fix the config or save the model again")
        if value > maximum:
            raise InputError(f"{folder}/config.json: {key} = {value:,}, more {what} than the lab builds "
                             f"({maximum:,}); the lab checks small causal LMs: pick a smaller model ({limit_hint(limit)})")
        return value
    return None


def vet_model_folder(folder: Path) -> dict:
    """Refuse a model folder the lab must not load, before transformers reads a byte of it; its config.

    - ``config.json``: a regular file of at most ``MAX_CONFIG_BYTES``, plain JSON (no NaN, no
      deep nesting), with layers, widths, vocabulary and parameters within the lab's limits
      (``MAX_LAYERS``, ``MAX_MODEL_WIDTH``, ``MAX_VOCAB``, ``MAX_MODEL_PARAMETERS``): a config of
      100,000 layers is refused here instead of being built.
    - weights: ``*.safetensors`` only, each a regular file; every index file
      (``*.index.json``) may name only ``.safetensors`` files inside the folder. transformers
      follows ``model.safetensors.index.json``'s ``weight_map`` to whatever file it names, a
      ``pytorch_model.bin`` included: ``transformers/modeling_utils.py``'s ``load_state_dict``
      reads a shard with safetensors only when its name ends in ``.safetensors`` and falls
      back to ``torch.load`` (a pickle) otherwise. Such an index is refused here.
    """
    from packing_core._validate import MAX_MODEL_PARAMETERS, limit_hint
    from packing_core.data.sources import WHOLE, check_regular, display, load_json, open_source

    shown = display(str(folder))
    if not folder.is_dir():
        raise InputError(f"no model folder at {shown}: give a folder with config.json and *.safetensors")
    if not (folder / "config.json").exists():
        raise InputError(f"{shown} has no config.json: it is not a Hugging Face model folder "
                         "(save one with model.save_pretrained(folder))")
    config = load_json(open_source(folder / "config.json", WHOLE).read_all(MAX_CONFIG_BYTES, "the model config"),
                       f"{folder}/config.json")
    if not isinstance(config, dict):
        raise InputError(f"{shown}/config.json holds a JSON {type(config).__name__}, not an object; "
                         "save the model again with save_pretrained()")
    layers = _config_number(config, _LAYER_KEYS, shown, "MAX_LAYERS", "layers")
    for key in _WIDTH_KEYS:
        _config_number(config, (key,), shown, "MAX_MODEL_WIDTH", f"units in {key}")
    vocab = _config_number(config, ("vocab_size",), shown, "MAX_VOCAB", "tokens") or 0
    _config_number(config, _POSITION_KEYS, shown, "MAX_CONTEXT", "positions")
    width = next((config[k] for k in ("hidden_size", "n_embd", "d_model") if isinstance(config.get(k), int)), 0)
    inner = next((config[k] for k in ("intermediate_size", "n_inner", "ffn_dim") if isinstance(config.get(k), int)),
                 4 * width)
    experts = max(1, *(config[k] for k in ("num_experts", "num_local_experts") if isinstance(config.get(k), int)), 1)
    parameters = 2 * vocab * width + (layers or 0) * (4 * width * width + 3 * width * inner * experts)
    if parameters > MAX_MODEL_PARAMETERS:
        raise InputError(f"{shown}/config.json describes about {parameters:,} parameters, more than the lab builds "
                         f"({MAX_MODEL_PARAMETERS:,}); the lab checks small causal LMs: pick a smaller model "
                         f"({limit_hint('MAX_MODEL_PARAMETERS')})")
    weights = sorted(folder.glob("*" + WEIGHT_SUFFIX))
    if not weights:
        pickles = sorted(p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".pkl", ".ckpt"))
        raise InputError(f"{shown} has no *.safetensors weights{f' (only pickles: {pickles[:3]})' if pickles else ''}: "
                         "the lab loads safetensors only; convert with "
                         "model.save_pretrained(folder, safe_serialization=True)")
    for w in weights:
        _check_safetensors_header(w)
    for index in sorted(folder.glob("*.index.json")):
        mapping = load_json(open_source(index, WHOLE).read_all(MAX_CONFIG_BYTES, "the weight index"), str(index))
        files = mapping.get("weight_map") if isinstance(mapping, dict) else None
        if not isinstance(files, dict):
            raise InputError(f"{display(str(index))} has no weight_map object; save the model again with "
                             "save_pretrained(folder, safe_serialization=True)")
        for target in sorted({str(v) for v in files.values()}):
            if not target.endswith(WEIGHT_SUFFIX) or "/" in target or "\\" in target or target.startswith("."):
                raise InputError(f"{display(str(index))} points at {display(target)!r}, which is not a .safetensors "
                                 "file in the folder: the lab never loads pickled weights (loading one runs code); "
                                 "save the model with save_pretrained(folder, safe_serialization=True)")
            if not (folder / target).exists():
                raise InputError(f"{display(str(index))} lists {display(target)!r}, which the folder lacks; copy the "
                                 "whole folder that save_pretrained wrote")
            check_regular(folder / target)
    return config


def config_model_type(folder) -> str:
    """The transformers ``model_type`` of a model folder, read from its ``config.json`` alone (bounded, no torch).

    A multimodal config names its language model in ``text_config``; that one is returned, since
    it is the family whose layers read the batch (``qwen3_5`` -> ``qwen3_5_text``). The families
    table (``packing_core.attention.families.family``) takes the result.
    """
    from packing_core._validate import InputError
    from packing_core.data.sources import WHOLE, display, load_json, open_source

    folder = Path(folder)
    shown = display(str(folder))
    if not os.path.lexists(folder / "config.json"):   # a FIFO or a device there is named by open_source
        raise InputError(f"{shown} has no config.json: give a Hugging Face model folder, or --model-type NAME")
    config = load_json(open_source(folder / "config.json", WHOLE).read_all(MAX_CONFIG_BYTES, "the model config"),
                       f"{folder}/config.json")
    text = config.get("text_config") if isinstance(config, dict) else None
    for source in (text, config):
        if isinstance(source, dict) and isinstance(source.get("model_type"), str) and source["model_type"]:
            name = source["model_type"]
            if not _MODEL_TYPE.match(name):   # transformers' types are short identifiers: never echo 100 kB back
                raise InputError(f"{shown}/config.json names the model_type {display(name[:40])!r}"
                                 f"{'...' if len(name) > 40 else ''} ({len(name):,} characters), which is no "
                                 "transformers model type; fix the config, or give --model-type NAME")
            return name
    raise InputError(f"{shown}/config.json names no model_type; save the model again with save_pretrained(), "
                     "or give --model-type NAME")


def _check_safetensors_header(path: Path) -> None:
    """A regular file that starts like safetensors: an 8-byte header length, then a JSON object that fits.

    A pickle renamed ``model.safetensors`` is refused here, in one line, before the library
    reads it (its header length would be absurd).
    """
    from packing_core.data.sources import check_regular, display, load_json

    check_regular(path)   # the file itself is opened by safetensors' own reader: checked here first
    size = path.stat().st_size
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if not 2 <= n <= min(size - 8, MAX_CONFIG_BYTES * 25):
            raise InputError(f"{display(str(path))} is not a safetensors file (its header length {n:,} does not fit "
                             f"its {size:,} bytes); save the model with save_pretrained(folder, safe_serialization=True)")
        header = load_json(f.read(n), str(path))
    if not isinstance(header, dict):
        raise InputError(f"{display(str(path))} is not a safetensors file (its header is not a JSON object)")
    ends = [t.get("data_offsets", [0, 0])[1] for k, t in header.items() if k != "__metadata__" and isinstance(t, dict)]
    if not all(isinstance(e, int) for e in ends) or 8 + n + max(ends, default=0) != size:
        raise InputError(f"{display(str(path))} is truncated or damaged: its header does not cover its {size:,} "
                         "bytes; copy the file again or save the model again")
