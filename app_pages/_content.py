"""The numbers the lab shows, computed from plans and batches: stats, tables, advice, examples.

Pages call these and draw the result; nothing here draws or imports Streamlit::

    length_stats([120, 90, 300], 256)  -> count 3, mean 170, max 300, 1 over the context
    strategy_table(lengths, 512)       -> one StrategyRow per strategy, pad as the baseline
    recommend(stats, table, "instruction")
        -> "Pack with bfd: it fills 99.9% of the slots against 75.2% for bucketing ..."
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packing_core import byte_tokenizer

# TEACHING 1: eight samples at context 512.
WORKED_LENGTHS = (120, 90, 300, 40, 55, 30, 210, 65)
WORKED_CONTEXT = 512
EXAMPLE_TEXTS = (
    "The cat sat on the mat.",
    "Rain is expected tomorrow in Oslo.",
    "Packing puts many documents in one row.",
    "Bees can see ultraviolet light.",
    "My printer says it is out of paper again.",
    "Water boils at 100 C at sea level.",
    "Reset the router, then try once more.",
    "Chess was played in India 1500 years ago.",
)


EXAMPLE_QA = (
    ("Q: 2+2? ", "A: 4."),
    ("Q: Capital of France? ", "A: Paris."),
    ("Q: Opposite of hot? ", "A: Cold."),
    ("Q: Sky colour? ", "A: Blue."),
    ("Q: Legs on a spider? ", "A: Eight."),
    ("Q: Largest planet? ", "A: Jupiter."),
)


@dataclass(frozen=True)
class RowDocuments:
    """Short byte-tokenised documents that fill one row (token id = UTF-8 byte, so readable)."""

    texts: tuple[str, ...]
    documents: tuple[tuple[int, ...], ...]
    prompt_lengths: tuple[int, ...]   # 0 for plain text


def row_documents(width: int, instruction: bool = False) -> RowDocuments:
    """Enough example documents to fill a row of ``width`` tokens (examples repeat when needed).

    >>> d = row_documents(32)
    >>> d.texts[:2], sum(map(len, d.documents)) >= 32
    (('The cat sat on the mat.', 'Rain is expected tomorrow in Oslo.'), True)
    """
    if width < 1:
        raise ValueError(f"width must be at least 1 token, got {width}")
    pool = EXAMPLE_QA if instruction else [(t, "") for t in EXAMPLE_TEXTS]
    per_cycle = sum(len((p + a).encode()) for p, a in pool)
    n = len(pool) * (-(-width // per_cycle))  # whole cycles until the row is full
    picked = [pool[i % len(pool)] for i in range(n)]
    # keep only what the row needs, plus one document that spills into the next row
    lens = np.cumsum([len((p + a).encode()) for p, a in picked])
    picked = picked[: int(np.searchsorted(lens, width, side="left")) + 1]
    texts = tuple(p + a for p, a in picked)
    docs = tuple(tuple(d) for d in byte_tokenizer(list(texts)))
    prompts = tuple(len(p.encode()) if a else 0 for p, a in picked)
    return RowDocuments(texts, docs, prompts)

