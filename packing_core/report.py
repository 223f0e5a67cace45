"""The numbers the lab shows, computed from plans and batches: stats, tables, advice, examples.

Pages call these and draw the result; nothing here draws or imports Streamlit::

    length_stats([120, 90, 300], 256)  -> count 3, mean 170, max 300, 1 over the context
    strategy_table(lengths, 512)       -> one StrategyRow per strategy, pad as the baseline
    recommend(stats, table, "instruction")
        -> "Pack with bfd: it fills 99.9% of the slots against 75.2% for bucketing ..."
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .batch import IGNORE_INDEX, PackedBatch
from .lengths import as_lengths, byte_tokenizer
from .plan import PlanMetrics
from .strategies import PACKING_STRATEGIES, STRATEGIES, STRATEGY_INFO, compare

# TEACHING 1: eight samples at context 512.
WORKED_LENGTHS = (120, 90, 300, 40, 55, 30, 210, 65)
WORKED_CONTEXT = 512

# Bucketing within this many points of the best packing is good enough: no mask changes.
BUCKET_IS_ENOUGH = 0.05
# More than this share of documents over the context: the context, not the policy, is the problem.
TOO_SHORT = 0.25


# ---------------------------------------------------------------- lengths
@dataclass(frozen=True)
class LengthStats:
    """Summary of a length distribution against a context."""

    count: int
    tokens: int
    mean: float
    p50: float
    p95: float
    max: int
    context: int
    over_context: int      # documents longer than the context
    share_over: float      # over_context / count
    tokens_over: int       # tokens beyond the context in those documents (lost if truncated)


def length_stats(lengths, context: int) -> LengthStats:
    """``length_stats([120, 90, 300], 256)`` -> count 3, mean 170.0, p50 120, max 300, over 1."""
    x = as_lengths(lengths)
    if context < 1:
        raise ValueError(f"context must be at least 1 token, got {context}; try 512")
    over = x > context
    p50, p95 = np.percentile(x, [50, 95])
    return LengthStats(
        count=int(len(x)), tokens=int(x.sum()), mean=float(x.mean()), p50=float(p50),
        p95=float(p95), max=int(x.max()), context=int(context), over_context=int(over.sum()),
        share_over=float(over.mean()), tokens_over=int((x[over] - context).sum()),
    )


@dataclass(frozen=True)
class Histogram:
    """Counts of lengths in equal-width bins; the last bin also holds everything beyond it."""

    edges: np.ndarray   # float64 [bins + 1]
    counts: np.ndarray  # int64 [bins]
    context: int
    clipped: int        # documents counted in the last bin although longer than its edge


def length_histogram(lengths, context: int, bins: int = 60) -> Histogram:
    """About ``bins`` bins up to ``max(1.25 x context, p99)`` (a long tail would squash the picture).

    One edge sits at ``context + 0.5``, so a bin holds either documents that fit or documents
    longer than the context, never both. Built from ``np.histogram``: 200,000 lengths become
    a few dozen numbers, not 200,000 points.
    """
    x = as_lengths(lengths)
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    if context < 1:
        raise ValueError(f"context must be at least 1 token, got {context}; try 512")
    longest = int(x.max())
    if longest <= context:      # everything fits: bins of at least one token up to the longest
        top = longest
        width = max(1.0, top / bins)
    else:
        top = min(longest, max(1.25 * context, float(np.percentile(x, 99))))
        below = min(context, max(1, round(bins * context / top)))   # bins up to the context
        width = context / below
    edges = 0.5 + width * np.arange(int(np.ceil(top / width)) + 1)
    counts, edges = np.histogram(np.clip(x, edges[0], edges[-1]), bins=edges)
    return Histogram(edges=edges, counts=counts.astype(np.int64), context=int(context),
                     clipped=int((x > edges[-1]).sum()))


# ---------------------------------------------------------------- strategies
@dataclass(frozen=True)
class StrategyRow:
    """One strategy on one dataset, with its costs relative to padding every sample to the context."""

    strategy: str
    description: str
    rows: int
    slots: int
    utilisation: float
    pad_tokens: int
    tokens_lost: int
    docs_split: int
    docs_dropped: int
    attention_cost: int          # padded rows: sum(row_width**2); packed rows: sum(len**2)
    attention_speedup: float     # attention cost of "pad" / this one
    slots_speedup: float         # slots of "pad" / this one (the linear layers' saving)
    rows_over_lower_bound: float


def attention_cost(m: PlanMetrics) -> int:
    """FLOP-proportional attention cost of a plan, as a kernel would pay it.

    A padded row pays its full causal square (row_width**2) because the kernel runs
    over the pads too. A packed row with a block-diagonal mask or a varlen kernel pays
    one square per document: ``[300, 100] in a row of 512 -> 300**2 + 100**2``.
    """
    return m.attention_cost_packed if m.strategy in PACKING_STRATEGIES else m.attention_cost_padded


def strategy_table(lengths, context: int, strategies=STRATEGIES, **plan_kwargs) -> list[StrategyRow]:
    """Every strategy on the same lengths; speed-ups are against ``pad`` (always computed)."""
    names = list(strategies)
    metrics = compare(lengths, context, names if "pad" in names else ["pad", *names], **plan_kwargs)
    by_name = {m.strategy: m for m in metrics}
    base = by_name["pad"]
    base_attn = attention_cost(base)
    out = []
    for s in names:
        m = by_name[s]
        cost = attention_cost(m)
        out.append(StrategyRow(
            strategy=s, description=STRATEGY_INFO[s], rows=m.rows, slots=m.slots,
            utilisation=m.utilisation, pad_tokens=m.pad_tokens, tokens_lost=m.tokens_lost,
            docs_split=m.docs_split, docs_dropped=m.docs_dropped, attention_cost=cost,
            attention_speedup=base_attn / cost if cost else float("inf"),
            slots_speedup=base.slots / m.slots if m.slots else float("inf"),
            rows_over_lower_bound=m.rows_over_lower_bound,
        ))
    return out


def recommend(stats: LengthStats, table: list[StrategyRow], kind: str = "pretraining") -> str:
    """One sentence (two at most) on what fits this data: bucketing or packing, split or drop.

    ``kind`` is ``"instruction"`` (prompt + answer examples: never split them) or
    ``"pretraining"`` (plain text: a split at a row edge is acceptable).
    """
    if kind not in ("instruction", "pretraining"):
        raise ValueError(f"kind must be 'instruction' or 'pretraining', got {kind!r}")
    by = {r.strategy: r for r in table}
    packers = [by[s] for s in ("bfd", "ffd", "next-fit") if s in by]
    if not packers or "bucket" not in by:
        raise ValueError("recommend needs the 'bucket' row and at least one of bfd, ffd, next-fit "
                         "in the table; pass strategy_table(lengths, context) with every strategy")
    best = max(packers, key=lambda r: r.utilisation)
    bucket = by["bucket"]
    if bucket.utilisation >= best.utilisation:
        first = (f"Bucket: it fills {bucket.utilisation:.1%} of the slots, more than the best packing "
                 f"({best.strategy}, {best.utilisation:.1%}), with no mask to get wrong.")
    elif best.utilisation - bucket.utilisation <= BUCKET_IS_ENOUGH:
        first = (f"Bucket: it already fills {bucket.utilisation:.1%} of the slots, within "
                 f"{(best.utilisation - bucket.utilisation) * 100:.1f} points of {best.strategy} "
                 f"packing ({best.utilisation:.1%}), with no mask to get wrong.")
    else:
        first = (f"Pack with {best.strategy}: it fills {best.utilisation:.1%} of the slots against "
                 f"{bucket.utilisation:.1%} for bucketing, which computes {bucket.slots / best.slots:.1f}x "
                 "as many slots; use cu_seqlens (a block-diagonal mask) and reset positions per document.")
    if stats.over_context == 0:
        return first + f" No document is longer than the context ({stats.context})."
    if stats.share_over > TOO_SHORT:
        return first + (f" But {stats.share_over:.0%} of the documents are longer than the context "
                        f"({stats.context}): raise the context before choosing a policy for them.")
    share = "<0.1%" if stats.share_over < 0.001 else f"{stats.share_over:.1%}"
    n = f"{stats.over_context:,} document{'s' if stats.over_context != 1 else ''} ({share})"
    if kind == "instruction":
        return first + (f" Drop the {n} longer than {stats.context}: a split example is "
                        "incoherent, so filter instruction data by length.")
    return first + (f" Split the {n} longer than {stats.context} across rows: standard for "
                    "pretraining, the lost context at the cut is accepted.")


def sample_lengths(lengths, n: int, seed: int = 0) -> np.ndarray:
    """``n`` lengths drawn at random (with replacement) from a dataset: a small batch to look at."""
    x = as_lengths(lengths)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a whole number >= 1, got {n!r}; try 32")
    return np.random.default_rng(seed).choice(x, size=int(n), replace=True)


# ---------------------------------------------------------------- examples
def outlier_lengths(batch_size: int = 32, outlier: int = 500, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """TEACHING 3: one batch of short samples (~60 tokens), without and with one long outlier.

    ``pad-longest`` pads every row to the batch's longest, so the outlier stretches all rows.
    """
    if batch_size < 2:
        raise ValueError(f"batch_size must be at least 2 to show an outlier, got {batch_size}")
    rng = np.random.default_rng(seed)
    short = np.clip(np.rint(rng.lognormal(np.log(60), 0.3, batch_size)), 8, outlier // 2).astype(np.int64)
    with_outlier = short.copy()
    with_outlier[int(rng.integers(batch_size))] = outlier
    return short, with_outlier


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


# ---------------------------------------------------------------- labels
@dataclass(frozen=True)
class NaiveTargets:
    """Targets made by shifting a whole row left by one: what a packing bug trains on."""

    naive: np.ndarray     # int64 [width]: next token in the row, -100 after the last real token
    crosses: np.ndarray   # bool [width]: the naive target belongs to another document


def naive_targets(batch: PackedBatch, row: int) -> NaiveTargets:
    """``a b c | d e`` -> naive ``b c d e -``: c -> d crosses (the batch's own targets are ``b c - e -``)."""
    if not 0 <= row < batch.input_ids.shape[0]:
        raise ValueError(f"row {row} does not exist: the batch has rows 0..{batch.input_ids.shape[0] - 1}")
    ids = batch.input_ids[row].numpy()
    seg = batch.segment_ids[row].numpy()
    valid = seg >= 0
    nxt_valid = np.r_[valid[1:], False]
    naive = np.where(valid & nxt_valid, np.r_[ids[1:], 0], IGNORE_INDEX)
    crosses = valid & nxt_valid & (np.r_[seg[1:], -1] != seg)
    return NaiveTargets(naive.astype(np.int64), crosses)


def loss_vs_answers(batch: PackedBatch) -> tuple[int, int]:
    """``(loss positions, answer targets)``: equal in a sound batch (TEACHING 11's one assertion).

    An answer target is a position whose next token is an answer token of the same piece.
    """
    seg = batch.segment_ids.numpy()
    answer = batch.answer_mask.numpy()
    same_next = (seg >= 0) & (np.roll(seg, -1, axis=1) == seg)
    same_next[:, -1] = False
    expected = int((same_next & np.roll(answer, -1, axis=1)).sum())
    return int(batch.loss_mask.numpy().sum()), expected


# ---------------------------------------------------------------- broken batches
BREAKS = {
    "none": "the batch as PackedBatch builds it",
    "row-shifted targets": "targets shifted across the whole row: the last token of a document predicts the next document",
    "continuous positions": "position ids count across the row instead of restarting at each document",
    "pads in the loss": "pad positions get a target and a loss-mask bit",
    "prompts in the loss": "prompt tokens are trained on, not only the answers",
    "prompts cut from attention": "prompt tokens are masked out of attention like pads, so answers cannot read the question",
    "row cu_seqlens": "cu_seqlens marks whole rows, not documents: the mask that lets documents see each other",
}


def broken_batch(batch: PackedBatch, how: str) -> PackedBatch:
    """``batch`` with one classic packing bug planted, for ``check_batch`` to catch."""
    import torch

    if how not in BREAKS:
        raise ValueError(f"unknown break {how!r}; choose one of {', '.join(BREAKS)}")
    if how == "none":
        return batch
    valid, seg, ids = batch.valid, batch.segment_ids, batch.input_ids
    shift = lambda t, fill: torch.cat([t[:, 1:], torch.full_like(t[:, :1], fill)], 1)  # noqa: E731
    nxt_ids, nxt_valid = shift(ids, 0), shift(valid, False)
    replace = dataclasses.replace
    if how == "row-shifted targets":
        keep = valid & nxt_valid & (batch.loss_mask | (shift(seg, -1) != seg))
        targets = torch.where(keep, nxt_ids, IGNORE_INDEX)
        return replace(batch, targets=targets, loss_mask=targets != IGNORE_INDEX)
    if how == "continuous positions":
        width = ids.shape[1]
        return replace(batch, position_ids=torch.arange(width).expand_as(ids).clone(), positions="continuous")
    if how == "pads in the loss":
        return replace(batch, targets=torch.where(valid, batch.targets, batch.pad_id),
                       loss_mask=batch.loss_mask | ~valid)
    if how == "prompts in the loss":
        inner = valid & nxt_valid & (shift(seg, -1) == seg)
        return replace(batch, targets=torch.where(inner, nxt_ids, IGNORE_INDEX), loss_mask=inner)
    if how == "prompts cut from attention":
        prompt = valid & ~batch.answer_mask
        return replace(batch, segment_ids=torch.where(prompt, -1, seg))
    total = int(valid.sum())
    return replace(batch, cu_seqlens=torch.tensor([0, total], dtype=torch.int32))


# ---------------------------------------------------------------- batch composition
@dataclass(frozen=True)
class RowOrder:
    """How a plan orders its rows (TEACHING 18)::

        bfd, 2,000 tickets   longest per row  511 509 508 ... 140 96 61
        neighbour_correlation ~ 1.0: consecutive rows, hence batches, hold similar lengths
        with shuffle=True     ~ 0.0: a random order again
    """

    longest: np.ndarray          # longest piece in each row, in row order
    neighbour_correlation: float  # Pearson correlation of consecutive rows' longest piece
    first_batch_mean: float       # mean document piece length in the first batch of rows
    last_batch_mean: float        # ... and in the last batch


def row_order(plan, batch_size: int = 32) -> RowOrder:
    """Longest piece per row and how strongly neighbouring rows resemble each other."""
    longest = np.zeros(plan.n_rows, dtype=np.int64)
    np.maximum.at(longest, plan.piece_row, plan.piece_len)
    if plan.n_rows > 2 and longest[1:].std() > 0 and longest[:-1].std() > 0:
        corr = float(np.corrcoef(longest[:-1], longest[1:])[0, 1])
    else:
        corr = 0.0
    rows = min(batch_size, plan.n_rows)
    first = plan.piece_row < rows
    last = plan.piece_row >= plan.n_rows - rows
    return RowOrder(longest, corr, float(plan.piece_len[first].mean()), float(plan.piece_len[last].mean()))
