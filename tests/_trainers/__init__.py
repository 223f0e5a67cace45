"""A corpus of batches built by trainers' own code, with the truth about each from a tiny model.

Support for ``tests/check/trainers/`` (shared builders live here: no test module imports
another). One module per trainer lists its batch kinds in ``CASES`` (kind -> builder) and the
readers it is judged for in ``IMPLS`` (transformers' five by default).

One convention, the checker's too (:mod:`.truth` says it in full): a transformers implementation
name (``sdpa``, ``eager``, ``flex_attention``, ``flash_attention_2/3``) means a transformers model
given the batch; a trainer reader (``megatron``, ``olmo_core``: the checker's ``TRAINER_READERS``)
means that trainer's own model, emulated on the tiny model from the trainer's cited code. So
Megatron's and OLMo-core's batches are judged for their own model *and* for what a transformers
model would do with them; torchtune's own model reads its boolean mask with
``F.scaled_dot_product_attention`` (``torchtune/modules/attention_utils.py``
``_sdpa_or_flex_attention``: a tensor mask goes to sdpa in both branches), which is the ``sdpa``
reading, so torchtune needs no reader of its own:

    trl_batches            TRL 1.16 (installed)            hf_collators        transformers 5.24 (installed)
    torchtune_batches      torchtune 0.6.1 (.vendor/)      axolotl_batches     axolotl 0.19.0 (.vendor/)
    llamafactory_batches   llamafactory 0.9.5 (.vendor/)   megatron_batches    megatron-core 0.16.1 (.vendor/)
    olmo_batches           ai2-olmo-core 3.0.0 (.vendor/)  verl_batches        verl 0.9.1 (.vendor/)

:mod:`.truth` runs the model; :mod:`.table` prints kinds x implementations -> (truth, verdict):
``PYTHONPATH=$PWD python -m tests._trainers.table``.
"""
from __future__ import annotations

import dataclasses
import importlib

from tests._trainers.truth import IMPLEMENTATIONS, Case

MODULES = ("trl_batches", "hf_collators", "torchtune_batches", "axolotl_batches", "llamafactory_batches",
           "megatron_batches", "olmo_batches", "verl_batches")
_BUILT: dict[tuple[str, str], Case] = {}


def corpus(name: str):
    return importlib.import_module(f"tests._trainers.{name}")


def implementations(module) -> tuple[str, ...]:
    return getattr(module, "IMPLS", IMPLEMENTATIONS)


def case(module, kind: str) -> Case:
    """The batch ``kind`` of a trainer's module, built once per process (kept in memory only)."""
    key = (module.__name__, kind)
    if key not in _BUILT:
        _BUILT[key] = dataclasses.replace(module.CASES[kind](), kind=kind)
    return _BUILT[key]


def params(module) -> list[tuple[str, str]]:
    """``(kind, implementation)`` pairs for pytest's parametrize, in the module's order."""
    return [(k, i) for k in module.CASES for i in implementations(module)]


def param_id(module, kind: str, impl: str) -> str:
    return f"{module.TRAINER}-{kind}-{impl}"


def assert_agrees(module, kind: str, impl: str, *, all_implementations: bool = False) -> None:
    """The checker's verdict on one batch and implementation is the model's (see ``truth.agrees``)."""
    from tests._trainers.truth import agrees, truth, verdict

    c = case(module, kind)
    t, v = truth(c, impl), verdict(c, impl, all_implementations=all_implementations, readers=implementations(module))
    entry = "check_all_implementations" if all_implementations else "check_hf_batch"
    assert agrees(t, v), (f"{c.id} under {impl}: the model says {t.label}{' (' + t.derived + ')' if t.derived else ''}"
                          f"{'; refused: ' + t.refused if t.refused else ''}; {entry} says {v.label}")
