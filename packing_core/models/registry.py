"""The models the lab runs, listed once: the CLI, the Leakage lab, the Bug zoo and ``verify_model`` read it.

A :class:`ModelSpec` says what a picker shows (``label``), how to load the model
(``load(dtype=..., device=...) -> (model, tokenizer or None)``), whether it has a tokenizer
(so it runs real texts rather than random token ids), which of its own attention
implementations the lab offers beside our backends (``attn_implementations``: transformers'
word, as DESIGN uses it; ``backend`` is ours), its default texts, and whether it is installed
here (``available() -> (bool, why)``). Importing this module costs nothing: torch and
transformers load with the first model.

>>> model_names()
('tiny-rope', 'tiny-abs', 'smollm2', 'tiny-hybrid')
>>> model_spec(PRETRAINED).tokenizer, model_spec("tiny-abs").attn_implementations
(True, ())
>>> model_spec("tiny-ropee")  # doctest: +ELLIPSIS
Traceback (most recent call last):
packing_core._validate.InputError: unknown model 'tiny-ropee': choose one of tiny-rope, tiny-abs, ...
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from packing_core._registry import Registry
from packing_core._settings import PRETRAINED

__all__ = ["DEFAULT_MODEL", "DEFAULT_TEXTS", "PRETRAINED", "ModelSpec", "attn_implementations_of", "find_model",
           "is_model_path", "load_model", "model_names", "model_spec", "model_specs", "register_model", "runs_texts",
           "unregister_model"]

DEFAULT_MODEL = "tiny-rope"

# Two short unrelated English texts (a GSM8K test question and a plain fact).
DEFAULT_TEXTS = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and "
    "bakes muffins for her friends every day with four. How many eggs are left?",
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was finished in 1889 "
    "and is named after the engineer Gustave Eiffel.",
)


def _always() -> tuple[bool, str]:
    return True, "built in (random init)"


@dataclass(frozen=True)
class ModelSpec:
    """One model the lab can run: name, picker label, loader, tokenizer or not, its own attention, default texts."""

    name: str
    label: str
    load: Callable          # (dtype=torch.float32, device=None) -> (model, tokenizer or None)
    tokenizer: bool         # True: runs texts through its own tokenizer; False: random token ids
    attn_implementations: tuple[str, ...] = ()   # transformers' own attention the lab offers (sdpa)
    default_texts: tuple[str, ...] = ()
    available: Callable[[], tuple[bool, str]] = _always

    def to_dict(self) -> dict:
        return {"name": self.name, "label": self.label, "tokenizer": self.tokenizer,
                "attn_implementations": list(self.attn_implementations), "default_texts": list(self.default_texts)}


def _tiny(name: str, dtype=None, device=None):
    import torch

    from packing_core.models.tiny import tiny_model

    return tiny_model(name, dtype=dtype or torch.float32, device=device or "cpu"), None


def _hybrid(dtype=None, device=None):
    import torch

    from packing_core.models.hybrid import hybrid_model

    return hybrid_model(dtype=dtype or torch.float32, device=device or "cpu"), None


def _smollm2(dtype=None, device=None):
    import torch

    from packing_core.models.pretrained import load_pretrained

    model, tokenizer = load_pretrained(dtype=dtype or torch.float32)
    return (model if device is None else model.to(device)), tokenizer


def _smollm2_status() -> tuple[bool, str]:
    from packing_core.models.pretrained import pretrained_status

    return pretrained_status()


_REGISTRY: Registry[ModelSpec] = Registry("model", fix=", or the path of a local Hugging Face model folder")


def register_model(spec: ModelSpec) -> ModelSpec:
    """Add a model to the list (after the others); a name may be registered once."""
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"register_model() takes a ModelSpec, got {type(spec).__name__}")
    return _REGISTRY.register(spec.name, spec)


def unregister_model(name: str) -> ModelSpec:
    """Remove a model (tests register throwaway ones); returns it."""
    return _REGISTRY.unregister(name)


def model_specs() -> tuple[ModelSpec, ...]:
    return _REGISTRY.entries()


def model_names(*, tokenizer: bool | None = None) -> tuple[str, ...]:
    """Registered names, in order; ``tokenizer=True`` only those that run texts, ``False`` only the others."""
    return _REGISTRY.names(None if tokenizer is None else lambda s: s.tokenizer == tokenizer)


def find_model(name) -> ModelSpec | None:
    """The spec called ``name``, or None (a path to a local model folder, say)."""
    return _REGISTRY.find(name)


def model_spec(name) -> ModelSpec:
    """The spec called ``name``, or one line naming the choices."""
    return _REGISTRY.get(name)


def is_model_path(model) -> bool:
    """Is ``model`` a local model folder rather than one of the lab's model names? The one rule, used
    by ``verify``, ``check --model`` and the CLI's vetting of a folder before torch loads.

    >>> is_model_path("tiny-rope"), is_model_path("no-such-name"), is_model_path("models/my-llama")
    (False, False, True)
    """
    return isinstance(model, os.PathLike) or (isinstance(model, str) and find_model(model) is None
                                                and (os.sep in model or Path(model).exists()))


def load_model(model, dtype=None, device=None, attn_implementation: str | None = None):
    """``(model, tokenizer or None)`` for a registered name or a local Hugging Face model folder (built with
    ``attn_implementation`` when given)."""
    spec = find_model(model)
    if spec is not None:
        return spec.load(dtype=dtype, device=device)
    if not is_model_path(model):
        model_spec(model)   # one line naming the registered models
    import torch

    from packing_core.models.pretrained import load_local_model

    net, tokenizer = load_local_model(model, dtype=dtype or torch.float32, attn_implementation=attn_implementation)
    return (net if device is None else net.to(device)), tokenizer


def runs_texts(model) -> bool:
    """Does ``model`` (a registered name or a local folder) read real texts? The tiny models read random ids.

    >>> runs_texts("tiny-rope"), runs_texts(PRETRAINED)
    (False, True)
    """
    spec = find_model(model)
    return spec.tokenizer if spec is not None else is_model_path(model)


def attn_implementations_of(model) -> tuple[str, ...]:
    """transformers' own attention implementations the lab offers for ``model`` (a local folder: sdpa).

    >>> attn_implementations_of("tiny-rope"), attn_implementations_of(PRETRAINED)
    ((), ('sdpa',))
    """
    spec = find_model(model)
    return spec.attn_implementations if spec is not None else ("sdpa",) if is_model_path(model) else ()


for _spec in (
    ModelSpec("tiny-rope", "tiny model, RoPE positions", partial(_tiny, "tiny-rope"), False),
    ModelSpec("tiny-abs", "tiny model, learned absolute positions", partial(_tiny, "tiny-abs"), False),
    ModelSpec(PRETRAINED, "SmolLM2-135M-Instruct (pretrained, Q4_1 weights dequantised)", _smollm2, True,
              attn_implementations=("sdpa",),
              default_texts=DEFAULT_TEXTS, available=_smollm2_status),
    ModelSpec("tiny-hybrid", "tiny hybrid teaching model: attention, a short convolution, a recurrence", _hybrid, False),
):
    register_model(_spec)
del _spec
