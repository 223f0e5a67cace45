"""Build and switch a transformers model through the API of the installed release.

The model runs (``check --model``, ``verify``, the guard's causality run) must work where the
trainer works, and the API moved between releases (read from each release's code,
:mod:`packing_core.attention.releases`):

- the dtype keyword of ``from_pretrained`` / ``_from_config``: ``torch_dtype`` before 4.56,
  ``dtype`` from 4.56 on (``PreTrainedModel._from_config``: ``kwargs.pop("dtype", ...)``);
- the attention switch: ``model.set_attn_implementation(name)`` where it exists (4.54 on);
  before it, ``config._attn_implementation`` is read at every call from 4.48
  (``ALL_ATTENTION_FUNCTIONS[config._attn_implementation]``), and fixed when the model is built
  before 4.48 (``LLAMA_ATTENTION_CLASSES[config._attn_implementation]`` in ``__init__``): there the
  model is loaded with the implementation it will run.

>>> import torch
>>> dtype_kwargs(torch.float32, release_rules("4.46.3")), dtype_kwargs(torch.float32, release_rules("5.24.0"))
({'torch_dtype': torch.float32}, {'dtype': torch.float32})
"""
from __future__ import annotations

from packing_core._validate import InputError
from packing_core.attention.releases import ReaderRules, release_rules

__all__ = ["attention_of", "dtype_kwargs", "switch_attention"]


def dtype_kwargs(dtype, rules: ReaderRules | None = None) -> dict:
    """``{"dtype": dtype}`` or ``{"torch_dtype": dtype}``: what ``from_pretrained`` reads in that release."""
    return {(rules or release_rules()).dtype_keyword: dtype}


def attention_of(model) -> str:
    """The attention implementation the model's config names (``sdpa``, ``eager``, ...)."""
    return getattr(getattr(model, "config", None), "_attn_implementation", None) or ""


def switch_attention(model, name: str, rules: ReaderRules | None = None) -> None:
    """Run ``model`` with attention ``name`` from its next call on, through the installed release's API.

    Where the release fixes the attention when the model is built, a model built with another one
    is refused in one line: load it with ``attn_implementation=name``.
    """
    if attention_of(model) == name:
        return
    rules = rules or release_rules()
    if rules.attention_switch == "method" and hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(name)
    elif rules.attention_switch in ("config", "method"):
        model.config._attn_implementation = name
    else:
        raise InputError(f"{rules.label} fixes the attention implementation when the model is built "
                         f"({type(model).__name__} was built with {attention_of(model) or 'its default'}): load it "
                         f"with attn_implementation={name!r}")
