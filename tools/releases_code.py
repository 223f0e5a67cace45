"""Read what each transformers release does with a packed batch, from that release's own code (its wheel).

Every rule the check applies to a transformers reader is read here from the wheel's source text
(never imported), and each reading names the code it rests on. A rule's **variant** is
recognised by a line of code that only that variant has; a release whose code matches no known
variant stops the tool with the file to read (a new variant is a new entry in the table, never a
guess):

- ``packed_detection`` (``masking_utils``): sdpa, eager and flex split a row at every position step
  that is not +1 (``find_packed_sequence_indices``, transformers PR #39194), only with no 2D mask and
  no cache (``_preprocess_mask_arguments``), and only where the model passes ``position_ids`` to
  ``create_causal_mask`` (LLaMA from the same PR);
- ``flash_positions`` (``modeling_flash_attention_utils._flash_attention_forward``): when flash
  attention infers sequences from ``position_ids``: for which batch sizes, on which trigger, and where
  a sequence starts (``prepare_fa2_from_position_ids`` / ``_prepare_from_posids`` /
  ``prepare_fa_kwargs_from_position_ids``);
- ``flash_varlen``: whether ``cu_seq_lens_q/_k`` with ``max_length_q/_k`` reach the varlen kernel, and what
  else they need;
- ``collator``: the keyword arguments of ``data.data_collator.DataCollatorWithFlattening``;
- ``flex``: whether LLaMA offers flex_attention (``_supports_flex_attn``);
- per family: whether its mask call passes ``position_ids`` (:func:`family_mask`) and whether its
  modeling code hands ``seq_idx`` / ``cu_seq_lens`` to its mixers (padding-free support).

    python -m tools.releases_code WHEEL...        # one line of facts per release, as JSON
"""
from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from functools import cache
from pathlib import Path

from tools.families_code import mask_calls

MASKING = "transformers/masking_utils.py"
FLASH = "transformers/modeling_flash_attention_utils.py"
COLLATOR = "transformers/data/data_collator.py"
LLAMA = "transformers/models/llama/modeling_llama.py"


class UnknownVariant(Exception):
    """A release's code matches no known variant of a rule: read it and add the variant."""


def release_of(wheel: Path) -> str:
    """``transformers-4.46.3-py3-none-any.whl`` -> ``4.46.3``."""
    return wheel.name.split("-")[1]


class Source:
    """The Python files of one transformers release, read on demand: a wheel, or the installed package folder."""

    def __init__(self, wheel: Path | None = None, *, folder: Path | None = None, release: str = ""):
        if wheel is not None:
            self.release = release_of(Path(wheel))
            self._zip = zipfile.ZipFile(wheel)
            self._names = set(self._zip.namelist())
            self._read = lambda name: self._zip.read(name).decode("utf-8")
        else:                      # folder: the directory that holds the transformers package
            if folder is None:
                raise ValueError("give a wheel or the folder that holds the transformers package")
            root = Path(folder)
            self.release = release
            self._names = {p.relative_to(root).as_posix() for p in (root / "transformers").rglob("*.py")}
            self._read = lambda name: (root / name).read_text(encoding="utf-8")

    @classmethod
    def installed(cls) -> Source:
        import importlib.util
        from importlib import metadata

        spec = importlib.util.find_spec("transformers")
        if spec is None or spec.origin is None:
            raise ImportError("transformers is not installed here: read a wheel instead (Source(wheel))")
        return cls(folder=Path(spec.origin).parents[1], release=metadata.version("transformers"))

    def has(self, path: str) -> bool:
        return path in self._names

    def text(self, path: str) -> str:
        return self._read(path) if path in self._names else ""

    def modeling(self, module: str) -> str:
        """The source of ``modeling_x`` (a family's modeling module), "" when this release has none."""
        if not hasattr(self, "_by_module"):
            self._by_module = {n.rsplit("/", 1)[1][:-3]: n for n in sorted(self._names)
                               if n.startswith("transformers/models/") and "/modeling_" in n}
        path = self._by_module.get(module)
        return self.text(path) if path else ""


def _function(source: str, name: str) -> str:
    """The source text of the first function (or method) called ``name`` in ``source``, "" if none."""
    if not source:
        return ""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return ast.get_source_segment(source, node) or ""
    return ""


def packed_detection(src: Source) -> tuple[dict, str]:
    """``({"on": bool, "gate": str}, cite)``: does create_causal_mask split rows at position resets, and when."""
    masking = src.text(MASKING)
    pre = _function(masking, "_preprocess_mask_arguments")
    llama_passes = any(sees for _, sees in mask_calls(src.text(LLAMA)))
    if "find_packed_sequence_indices(" not in pre:
        where = f"{MASKING}: no find_packed_sequence_indices" if masking else \
            "no masking_utils: each model builds its mask in _update_causal_mask (no packed detection)"
        return {"on": False, "gate": ""}, where
    tests = [ast.unparse(n.test) for n in ast.walk(ast.parse(pre)) if isinstance(n, ast.If)
             and "find_packed_sequence_indices" in ast.unparse(n)]
    gate = next((t.replace("(", "").replace(")", "") for t in tests if t.startswith("position_ids is not None")), "")
    known = ("position_ids is not None and attention_mask is None and past_key_values is None",
             "position_ids is not None and attention_mask is None and cache is None")
    if gate not in known:
        raise UnknownVariant(f"{src.release}: {MASKING} _preprocess_mask_arguments gates packed detection on {gate!r}")
    if not llama_passes:
        return {"on": False, "gate": gate}, f"{LLAMA}: create_causal_mask is called without position_ids"
    return {"on": True, "gate": gate}, f"{MASKING} _preprocess_mask_arguments: if {gate}: find_packed_sequence_indices"


# flash_positions variants: the names of packing_core.attention.releases.FLASH_POSITIONS, each recognised by a
# line only it has


def flash_positions(src: Source) -> tuple[str, str]:
    """The variant of flash attention's position-ids path, and the code it is read from."""
    code = src.text(FLASH)
    starts = "min" if re.search(r"position_ids == position_ids\.min\(\)", code) else \
        "zero" if re.search(r"position_ids == 0", code) else ""
    if "def _is_packed_sequence" in code:
        body = _function(code, "_is_packed_sequence")
        if "batch_size" in body and "arange" in body:
            variant = f"one_row_not_arange_{starts}"
            return variant, f"{FLASH} _is_packed_sequence (batch size 1, not one arange) + starts at position {starts}"
    fwd = _function(code, "_flash_attention_forward")
    if "use_mask = position_ids is not None or all(" in fwd:
        return f"any_rows_always_{starts}", f"{FLASH} _flash_attention_forward: use_mask = position_ids is not None " \
                                            "or all(varlen kwargs): every batch with position_ids goes varlen"
    if "(position_ids[:, -1] == position_ids.size(1) - 1).all()" in fwd:
        return f"any_rows_last_not_end_{starts}", (f"{FLASH} _flash_attention_forward: position_ids path when some "
                                                   "row's last position is not its width - 1 (rows flattened)")
    if "torch.diff(position_ids, dim=-1) >= 0" in fwd:
        rows = "one" if "query_states.shape[0] == 1" in fwd else "any"
        return f"{rows}_row{'s' if rows == 'any' else ''}_not_monotone_{starts}", \
            f"{FLASH} _flash_attention_forward: position_ids path when not (torch.diff(position_ids) >= 0).all()" \
            + (" and batch size 1" if rows == "one" else " (any batch size, rows flattened)")
    raise UnknownVariant(f"{src.release}: read {FLASH} _flash_attention_forward: no known position-ids path")


def flash_varlen(src: Source) -> tuple[str, str]:
    """``none`` | ``needs_position_ids`` | ``all_four``: when cu_seq_lens_q/_k reach the varlen kernel."""
    code = src.text(FLASH)
    fwd = _function(code, "_flash_attention_forward")
    if "cu_seq_lens_q" not in fwd:
        return "none", f"{FLASH} _flash_attention_forward takes no cu_seq_lens_q"
    if re.search(r"all\(\s*(kwarg|k|x) is not None for (kwarg|k|x) in [\(\[]\s*cu_seq_lens_q", fwd):
        return "all_four", f"{FLASH} _flash_attention_forward: varlen when cu_seq_lens_q/_k and max_length_q/_k are all given"
    if "max_length_q is not None or" in fwd:
        return "needs_position_ids", (f"{FLASH} _flash_attention_forward: varlen kwargs only inside `elif position_ids is "
                                      "not None and (max_length_q is not None or ...)`")
    raise UnknownVariant(f"{src.release}: read {FLASH} _flash_attention_forward: cu_seq_lens_q used in an unknown way")


def collator_kwargs(src: Source) -> tuple[list[str], str]:
    """The keyword arguments of ``DataCollatorWithFlattening.__init__`` (beyond ``*args, **kwargs``)."""
    code = src.text(COLLATOR)
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ClassDef) and node.name == "DataCollatorWithFlattening":
            init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            if init is None:
                return [], f"{COLLATOR} DataCollatorWithFlattening (a dataclass: no __init__ read)"
            names = [a.arg for a in init.args.args[1:] + init.args.kwonlyargs]
            return names, f"{COLLATOR} DataCollatorWithFlattening.__init__"
    return [], f"{COLLATOR}: no DataCollatorWithFlattening"


def flex(src: Source) -> tuple[bool, str]:
    on = "_supports_flex_attn = True" in src.text(LLAMA)
    return on, (f"{LLAMA} _supports_flex_attn" if on else f"{LLAMA}: no flex_attention support")


def model_api(src: Source) -> tuple[dict, str]:
    """How a model is built and switched: the dtype keyword ``_from_config`` reads, and the attention switch."""
    utils = src.text("transformers/modeling_utils.py")
    from_config = _function(utils, "_from_config")
    dtype = "dtype" if 'kwargs.pop("dtype"' in from_config else "torch_dtype"
    switch = ("method" if "def set_attn_implementation" in utils else
              "config" if "ALL_ATTENTION_FUNCTIONS" in src.text(LLAMA) else "reload")
    return {"dtype_keyword": dtype, "attention_switch": switch}, (
        "transformers/modeling_utils.py PreTrainedModel._from_config (kwargs.pop of the dtype keyword); "
        + {"method": "PreTrainedModel.set_attn_implementation",
           "config": f"{LLAMA}: ALL_ATTENTION_FUNCTIONS[config._attn_implementation] at each call",
           "reload": f"{LLAMA}: the attention class is chosen in __init__ (LLAMA_ATTENTION_CLASSES)"}[switch])


@cache
def _mask_calls(code: str) -> tuple:
    return mask_calls(code)      # the same file recurs across releases: parsed once


def family_mask(src: Source, modeling: str) -> str:
    """``absent`` | ``own`` (no create_causal_mask) | ``blind`` (called without position_ids) | ``sees``."""
    code = src.modeling(modeling)
    if not code:
        return "absent"
    if "create_causal_mask" not in code and "create_sliding_window_causal_mask" not in code \
            and "create_chunked_causal_mask" not in code:
        return "own"
    calls = [c for c in _mask_calls(code) if "generate" not in c[0]]
    if not calls:
        return "own"
    return "sees" if all(s for _, s in calls) else "blind"


def family_padding_free(src: Source, modeling: str) -> str:
    """Which boundary kwargs a family's modeling code hands its mixers: ``seq_idx``, ``cu_seq_lens``, both, or ``none``."""
    code = src.modeling(modeling)
    if not code:
        return "absent"
    got = [name for name, marks in (("seq_idx", ("seq_idx",)), ("cu_seq_lens", ("cu_seqlens=", "cu_seq_lens_q")))
           if any(m in code for m in marks)]
    return "+".join(got) or "none"


def family_positions(src: Source, modeling: str) -> str:
    """``padding_idx`` where the family numbers its own positions from ``padding_idx + 1`` (RoBERTa's
    ``create_position_ids_from_input_ids``), else ""."""
    code = src.modeling(modeling)
    return "padding_idx" if "def create_position_ids_from_input_ids" in code and "padding_idx + 1" in code else ""


def read_release(src: Source, families: dict[str, tuple[str, bool]]) -> dict:
    """Every fact of one release. ``families``: model type -> (modeling module, has a mixer beyond attention)."""
    detection, d_cite = packed_detection(src)
    fpos, fp_cite = flash_positions(src)
    fvar, fv_cite = flash_varlen(src)
    ckw, c_cite = collator_kwargs(src)
    fx, fx_cite = flex(src)
    api, a_cite = model_api(src)
    fam = {mt: [family_mask(src, mod), family_padding_free(src, mod) if hybrid else "", family_positions(src, mod)]
           for mt, (mod, hybrid) in families.items()}
    return {"release": src.release,
            "rules": {"packed_detection": detection["on"], "detection_gate": detection["gate"],
                      "flash_positions": fpos, "flash_varlen": fvar, "collator_kwargs": ckw, "flex": fx, **api},
            "cites": {"packed_detection": d_cite, "flash_positions": fp_cite, "flash_varlen": fv_cite,
                      "collator_kwargs": c_cite, "flex": fx_cite, "api": a_cite},
            "families": fam}


def main(argv=None) -> int:
    from packing_core.attention.families import known_families

    families = {f.model_type: (f.modeling, bool(set(f.kinds) - {"attention"})) for f in known_families() if f.modeling}
    for w in argv if argv is not None else sys.argv[1:]:
        facts = read_release(Source(Path(w)), families)
        print(json.dumps({k: v for k, v in facts.items() if k != "families"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
