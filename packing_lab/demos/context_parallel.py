"""The Context parallel page's numbers: one packed row cut over the ranks, its ring, and the balance per scheme.

Pages never compute; they call these (cached there) and draw :mod:`packing_lab.viz.context_parallel`'s figures.

>>> lesson = cp_lesson((13, 7, 5, 9), 2, "zigzag-document")
>>> lesson.split.pads.tolist(), [s.section for s in lesson.steps][:2]
([3, 1, 3, 3], ['diagonal', 'upper-triangle'])
>>> one_document_work(32, 4)["contiguous"]
(36.0, 100.0, 164.0, 228.0)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core.batch.packed import PackedBatch
from packing_core.packing.strategies import make_plan
from packing_core.parallel.balance import CPBalance, cp_balance
from packing_core.parallel.layout import SCHEMES
from packing_core.parallel.ring import RingStep, ring_steps
from packing_core.parallel.split import CPSplit, split_batch

CP_SCHEMES = SCHEMES


@dataclass(frozen=True)
class CPLesson:
    """One packed row at one CP size and scheme: the cut, every ring step, and each scheme's balance of the row."""

    split: CPSplit
    steps: tuple[RingStep, ...]
    balances: tuple[CPBalance, ...]


def _row(lengths) -> PackedBatch:
    docs = [(97 + (i + np.arange(n)) % 26).tolist() for i, n in enumerate(lengths)]   # letters, each document its own
    return PackedBatch.from_documents(docs, int(sum(lengths)), "next-fit")


def cp_lesson(lengths, cp: int, scheme: str) -> CPLesson:
    """Documents of ``lengths`` in one row, cut over ``cp`` ranks by ``scheme``."""
    batch = _row(lengths)
    split = split_batch(batch, cp, scheme)
    return CPLesson(split, ring_steps(split), cp_balance(batch.plan, cp))


def one_document_work(length: int, cp: int) -> dict[str, tuple[float, ...]]:
    """Each rank's causal work for one document of ``length`` cut over ``cp`` ranks, per scheme."""
    return {b.scheme: tuple(b.work.tolist()) for b in cp_balance(make_plan([length], length, "bfd"), cp)}


def cp_dataset_rows(lengths, context: int, sizes=(2, 4, 8)) -> list[dict]:
    """The balance table of a dataset's bfd rows: one dict per scheme and CP size, for a dataframe."""
    plan = make_plan(np.asarray(lengths), context, "bfd")
    out = []
    for n in sizes:
        for b in cp_balance(plan, n):
            out.append({"scheme": b.scheme, "CP": n, "slowest / mean": round(b.slowest, 3),
                        "rank 0": f"{b.shares[0]:.1%}", "last rank": f"{b.shares[-1]:.1%}",
                        "pads added": f"{b.pads_added:,} ({b.pad_share:.1%})"})
    return out
