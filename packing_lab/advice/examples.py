"""Worked examples the lab prints, computed by the library (never typed): the three lower bounds on ten
documents of 300 tokens, static shapes on a batch of three, the greedy packers' guarantees beside their
measured rows, and what an understated max_seqlen leaves uncomputed.

>>> print(bounds_example())  # doctest: +NORMALIZE_WHITESPACE
Ten documents of 300 tokens at context 512 hold 3,000 tokens: cut at row edges, they fill
⌈3,000 / 512⌉ = 6 rows (L1). Kept whole, no two fit in one row (600 > 512), so every plan needs
10 rows (L2), not 6. A strategy that keeps documents whole is measured against L2, or against
the LP bound once optimal has computed it; only one that cuts documents (concat-cut) against L1.
"""
from __future__ import annotations

from packing_core.attention.varlen_grid import varlen_grid
from packing_core.packing.bounds import bound_for, bounds_from_counts
from packing_core.packing.guarantees import GUARANTEES
from packing_core.packing.plan import cu_seqlens_from_lengths, static_cu_seqlens
from packing_core.packing.registry import get_strategy
from packing_core.packing.strategies import make_plan

WORKED_LENGTHS = (120, 90, 300, 40, 55, 30, 210, 65)   # the first page's eight samples (app_pages._content)


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


def guarantee_sentence(rows) -> str:
    """The greedy packers' worst-case guarantees beside what they measure on a strategy table's documents.

    OPT is unknown, but no whole-document plan beats the proven bound (the LP's when ``optimal`` ran, else L2),
    and each guarantee is stated at OPT = that bound. The ten 300-token documents at 512 need 10 rows whatever
    the packer:

    >>> from packing_core.analysis.tables import strategy_table
    >>> print(guarantee_sentence(strategy_table([300] * 10, 512, ("next-fit", "ffd", "bfd"))))
    ... # doctest: +NORMALIZE_WHITESPACE
    In the worst case over every input, next-fit never uses more than 2·OPT rows, ffd at most 11/9·OPT + 6/9
    (Dósa 2007, tight) and bfd the same 11/9 ratio (Johnson 1973). Here, against the proven bound of whole
    documents (L2 10): next-fit 10 rows (+0, its guarantee allows 20), ffd 10 (+0, allows 12), bfd 10 (+0,
    allows 12). Over bfd, optimal can win back at most 0 rows (0.00% of its rows) here.
    """
    by = {r.strategy: r for r in rows}
    greedy = [n for n in GUARANTEES if n in by]
    if not greedy:
        return ""
    certificate = getattr(by.get("optimal"), "certificate", None)
    bound = certificate.bound if certificate is not None else bound_for(get_strategy(greedy[0]), by[greedy[0]].bounds)

    def used(name: str) -> int:
        return int(getattr(by[name], "rows", None) or by[name].metrics.rows)

    measured = [f"{name} {used(name):,}{' rows' if i == 0 else ''} (+{used(name) - bound.rows:,}, "
                f"{'its guarantee ' if i == 0 else ''}allows {GUARANTEES[name].allows(bound.rows):,})"
                for i, name in enumerate(greedy)]
    best = used("bfd") if "bfd" in by else min(used(n) for n in greedy)    # the lab packs with bfd
    gap = best - bound.rows
    won = f"{gap:,} row{'' if gap == 1 else 's'}"
    return ("In the worst case over every input, next-fit never uses more than 2·OPT rows, ffd at most "
            "11/9·OPT + 6/9 (Dósa 2007, tight) and bfd the same 11/9 ratio (Johnson 1973). Here, against the "
            f"proven bound of whole documents ({bound.name} {bound.rows:,}): " + ", ".join(measured) + ". "
            f"Over bfd, optimal can win back at most {won} ({gap / max(best, 1):.2%} of its rows) here"
            + (": worth running where that many rows matter (few documents, expensive rows), not to meet a "
               "guarantee the greedy packers already beat by far." if gap > 0 else "."))


def max_seqlen_lesson(cu_seqlens, max_seqlen: int) -> str:
    """What flash-attn's varlen launch covers for a batch's ``max_seqlen``, beside the first page's samples with
    the second longest taken as max_seqlen (as if from another batch); ``attention.varlen_grid`` cites the code.

    >>> print(max_seqlen_lesson([0, 7, 15], 4))  # doctest: +NORMALIZE_WHITESPACE
    A varlen kernel reads cu_seqlens for where each document starts and max_seqlen for how many query blocks
    to launch per document; nothing checks one against the other. Here max_seqlen 4 launches ⌈4 / 128⌉ = 1
    query block(s) of 128 per document, covering 128 queries; the longest document holds 8: every query is
    computed, though max_seqlen is understated: a longer document would lose its last queries. On the first
    page's 8 samples laid end to end, with the second longest taken as max_seqlen (as if from another batch):
    max_seqlen 210 launches ⌈210 / 128⌉ = 2 query block(s) of 128 per document, covering 256 queries; the
    longest document holds 300: 44 token(s) of 1 document(s) get no output, and the buffer's old contents stand
    in for them, silently.
    """
    worked = varlen_grid(cu_seqlens_from_lengths(WORKED_LENGTHS), sorted(WORKED_LENGTHS)[-2])
    return ("A varlen kernel reads cu_seqlens for where each document starts and max_seqlen for how many query blocks "
            "to launch per document; nothing checks one against the other. Here "
            f"{varlen_grid(cu_seqlens, max_seqlen).sentence}. On the first page's {len(WORKED_LENGTHS)} samples laid "
            f"end to end, with the second longest taken as max_seqlen (as if from another batch): {worked.sentence}.")
