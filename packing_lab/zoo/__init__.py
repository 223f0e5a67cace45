"""The bug zoo: one catalogue of packing bugs, each reproduced live or planted in a batch.

Every entry (:class:`Bug`) says what goes wrong, where it was reported (repository and number),
how it is fixed, what it needs, and which findings of ``check.rules`` catch it (``caught_by``).
The families live one per file and are registered here, in ``ZOO``:

- ``planted``: faults planted in the lab's own PackedBatch, no model (the Masks and labels page);
- ``masks``: transformers reads the mask other than it was meant (2D mask, cache, sliding window);
- ``labels``: what the loss trains on; ``positions``: position ids;
- ``beyond``: beyond attention: convolutions and recurrent states across documents, and a varlen
  kernel without its causal flag;
- ``context_parallel``: packed rows cut over context-parallel ranks (Transformer Engine, Megatron,
  NeMo Automodel), reproduced on the lab's CPU ring simulation.

    >>> [b.name for b in ZOO if not b.planted][:3]
    ['mask-hides-packing', 'cache-hides-packing', 'positions-without-mask']
    >>> zoo_entry("labels-over-row").caught_by_titles
    ('A label crosses a document edge',)
"""
from __future__ import annotations

from dataclasses import replace

import torch

from packing_core._validate import choice
from packing_core.check.batch import check_hf_batch
from packing_core.check.result import BatchCheck
from packing_lab.zoo import beyond, context_parallel, labels, masks, planted, positions
from packing_lab.zoo._types import Bug, ZooResult, reference_links
from packing_lab.zoo.planted import (
    BREAKS,
    PLANTED,
    NaiveTargets,
    broken_batch,
    loss_vs_answers,
    naive_targets,
    plant_bug,
    shown_batch,
)

ZOO: tuple[Bug, ...] = (masks.BUGS + labels.BUGS + positions.BUGS + beyond.BUGS + context_parallel.BUGS
                         + planted.BUGS)
ZOO_NAMES = tuple(b.name for b in ZOO)
REPRODUCED = tuple(b.name for b in ZOO if not b.planted)

__all__ = ["BREAKS", "PLANTED", "REPRODUCED", "ZOO", "ZOO_NAMES", "Bug", "NaiveTargets", "ZooResult", "broken_batch",
           "example_checks", "loss_vs_answers", "naive_targets", "plant_bug",
           "reference_links", "reproduce_bug", "shown_batch", "zoo_entry"]



def zoo_entry(name: str) -> Bug:
    choice("bug", name, ZOO_NAMES)
    return next(b for b in ZOO if b.name == name)


def example_checks(name: str) -> tuple[BatchCheck, BatchCheck] | None:
    """The static check of an entry's model-free example: ``(broken, fixed)``, or None without one."""
    bug = zoo_entry(name)
    if bug.example is None:
        return None
    broken, fixed, kw = bug.example()
    kw = dict(kw)
    extra = kw.pop("broken", {})
    return check_hf_batch(broken, **kw, **extra), check_hf_batch(fixed, **kw)


def reproduce_bug(name: str) -> ZooResult:
    """Run one reproduced entry: the broken setup and the fixed one, measured and checked."""
    choice("bug", name, REPRODUCED)
    with torch.inference_mode(False):
        result = zoo_entry(name).run()
    return replace(result, name=name)
