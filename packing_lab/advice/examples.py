"""Worked examples the lab prints, computed by the library (never typed): the three lower bounds on ten
documents of 300 tokens, and static shapes on a batch of three.

>>> print(bounds_example())  # doctest: +NORMALIZE_WHITESPACE
Ten documents of 300 tokens at context 512 hold 3,000 tokens: cut at row edges, they fill
⌈3,000 / 512⌉ = 6 rows (L1). Kept whole, no two fit in one row (600 > 512), so every plan needs
10 rows (L2), not 6. A strategy that keeps documents whole is measured against L2, or against
the LP bound once optimal has computed it; only one that cuts documents (concat-cut) against L1.
"""
from __future__ import annotations

from packing_core.packing.bounds import bounds_from_counts
from packing_core.packing.plan import static_cu_seqlens
from packing_core.packing.strategies import make_plan


def bounds_example() -> str:
    """Why whole documents are not measured against L1, on the lab's example: ten documents of 300
    tokens at context 512 (the numbers computed by ``packing.bounds``, not typed)."""
    length, documents, context = 300, 10, 512
    b = bounds_from_counts({length: documents}, context)
    tokens = length * documents
    return (f"Ten documents of {length:,} tokens at context {context:,} hold {tokens:,} tokens: cut at row edges, "
            f"they fill ⌈{tokens:,} / {context:,}⌉ = {b.l1.rows:,} rows (L1). Kept whole, no two fit in one row "
            f"({2 * length:,} > {context:,}), so every plan needs {b.l2.rows:,} rows (L2), not {b.l1.rows:,}. A strategy "
            "that keeps documents whole is measured against L2, or against the LP bound once optimal has computed "
            "it; only one that cuts documents (concat-cut) against L1.")


def static_example(lengths=(5, 3, 4), context: int = 8, cap: int = 3) -> str:
    """Static shapes on a tiny batch, computed by ``packing.static_cu_seqlens``.

    >>> print(static_example())  # doctest: +NORMALIZE_WHITESPACE
    documents of 5, 3 and 4 tokens at context 8, at most 3 a row: bfd makes rows [5 3] [4]; cu_seqlens padded
    to 2 x 3 + 1 = 7 entries: [0, 5, 8, 12, 12, 12, 12] (3 zero-length documents), max_seqlen fixed to 8
    """
    plan = make_plan(list(lengths), context, "bfd", max_docs_per_row=cap)
    cu = static_cu_seqlens(plan, cap).tolist()
    rows = " ".join("[" + " ".join(str(int(x)) for x in plan.piece_len[plan.row_pieces(r)]) + "]"
                    for r in range(plan.n_rows))
    listed = ", ".join(map(str, lengths[:-1])) + f" and {lengths[-1]}"
    empty = len(cu) - 1 - len(plan.piece_len)
    return (f"documents of {listed} tokens at context {context}, at most {cap} a row: bfd makes rows {rows}; "
            f"cu_seqlens padded to {plan.n_rows} x {cap} + 1 = {len(cu)} entries: {cu} ({empty} zero-length "
            f"documents), max_seqlen fixed to {context}")
