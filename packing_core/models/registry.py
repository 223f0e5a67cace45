"""The models the lab runs, listed once: the CLI, the Leakage lab, the Bug zoo and ``verify_model`` read it.

A :class:`ModelSpec` says what a picker shows (``label``), how to load the model
(``load(dtype=..., device=...) -> (model, tokenizer or None)``), whether it has a tokenizer
(so it runs real texts rather than random token ids), which of its own attention
implementations the lab offers beside ours (``backends``), its default texts, and whether it
is installed here (``available() -> (bool, why)``). Importing this module costs nothing:
torch and transformers load with the first model.

>>> [s.name for s in model_specs()]
['tiny-rope', 'tiny-abs', 'smollm2', 'tiny-hybrid']
>>> model_spec(PRETRAINED).tokenizer, model_spec("tiny-abs").backends
(True, ())
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from packing_core._settings import PRETRAINED
from packing_core._validate import InputError

__all__ = ["DEFAULT_MODEL", "DEFAULT_TEXTS", "PRETRAINED", "ModelSpec", "find_model", "model_names", "model_spec",
           "model_specs", "register_model", "unregister_model"]

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
    """One model the lab can run: name, picker label, loader, tokenizer or not, own backends, default texts."""

    name: str
    label: str
    load: Callable          # (dtype=torch.float32, device=None) -> (model, tokenizer or None)
    tokenizer: bool         # True: runs texts through its own tokenizer; False: random token ids
    backends: tuple[str, ...] = ()          # the model's own attention the lab offers (transformers' sdpa)
    default_texts: tuple[str, ...] = ()
    available: Callable[[], tuple[bool, str]] = _always

    def to_dict(self) -> dict:
        return {"name": self.name, "label": self.label, "tokenizer": self.tokenizer, "backends": list(self.backends),
                "default_texts": list(self.default_texts)}


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


_REGISTRY: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec) -> ModelSpec:
    """Add a model to the list (after the others); a name may be registered once."""
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"register_model() takes a ModelSpec, got {type(spec).__name__}")
    if spec.name in _REGISTRY:
        raise InputError(f"a model named {spec.name!r} is already registered; pick another name")
    _REGISTRY[spec.name] = spec
    return spec


def unregister_model(name: str) -> ModelSpec:
    """Remove a model (tests register throwaway ones); returns it."""
    return _REGISTRY.pop(name)


def model_specs() -> tuple[ModelSpec, ...]:
    return tuple(_REGISTRY.values())


def model_names(*, tokenizer: bool | None = None) -> tuple[str, ...]:
    """Registered names, in order; ``tokenizer=True`` only those that run texts, ``False`` only the others."""
    return tuple(s.name for s in _REGISTRY.values() if tokenizer is None or s.tokenizer == tokenizer)


def find_model(name) -> ModelSpec | None:
    """The spec called ``name``, or None (a path to a local model folder, say)."""
    return _REGISTRY.get(name) if isinstance(name, str) else None


def model_spec(name) -> ModelSpec:
    """The spec called ``name``, or one line naming the choices."""
    spec = find_model(name)
    if spec is None:
        raise InputError(f"unknown model {name!r}: choose one of {', '.join(_REGISTRY)}, "
                         "or the path of a local Hugging Face model folder")
    return spec


for _spec in (
    ModelSpec("tiny-rope", "tiny model, RoPE positions", partial(_tiny, "tiny-rope"), False),
    ModelSpec("tiny-abs", "tiny model, learned absolute positions", partial(_tiny, "tiny-abs"), False),
    ModelSpec(PRETRAINED, "SmolLM2-135M-Instruct (pretrained, Q4_1 weights dequantised)", _smollm2, True, backends=("sdpa",),
              default_texts=DEFAULT_TEXTS, available=_smollm2_status),
    ModelSpec("tiny-hybrid", "tiny hybrid teaching model: attention, a short convolution, a recurrence", _hybrid, False),
):
    register_model(_spec)
del _spec
