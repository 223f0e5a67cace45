"""Batch composition: how a packing policy orders its rows (TEACHING 18).

>>> from packing_core import make_plan
>>> order = row_order(make_plan([500, 20, 480, 30, 400, 100], 512, "ffd"))
>>> order.longest.tolist()     # one row per long document, the short one left over
[500, 480, 400, 20]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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



def batch_cu_seqlens(plan) -> list[int]:
    """The one ``cu_seqlens`` a varlen kernel takes for the whole batch, flattened row after row.

    ``torch.nn.attention.varlen.varlen_attn`` and ``flash_attn_varlen_func`` read one
    cumulative array over every token of the batch. It is the running sum of the lengths
    with a cut added at each row edge (here at 512), where a split document starts again:

    >>> from packing_core import make_plan
    >>> batch_cu_seqlens(make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut"))
    [0, 120, 210, 510, 512, 550, 605, 635, 845, 910]
    """
    order = np.lexsort((plan.piece_offset, plan.piece_row))   # row-major: the order the kernel counts tokens in
    return np.r_[0, np.cumsum(plan.piece_len[order])].astype(int).tolist()


def row_cu_seqlens(plan) -> list[list[int]]:
    """The same boundaries read inside each row, as lists: :meth:`Plan.row_piece_offsets`.

    A kernel still takes them as one array over the batch (:func:`batch_cu_seqlens`).

    >>> from packing_core import make_plan
    >>> row_cu_seqlens(make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut"))
    [[0, 120, 210, 510, 512], [0, 38, 93, 123, 333, 398]]
    """
    return [offsets.tolist() for offsets in plan.row_piece_offsets()]


@dataclass(frozen=True, eq=False)
class SourceMixture:
    """Each batch's share of tokens per source, for a plan of a multi-source corpus, against the corpus's shares.

    Offline bfd sorts the pieces by length before it packs, so a source whose documents are long fills the
    first rows and one whose documents are short fills the last: read in that order, batches carry a mixture
    unlike the corpus. Shuffling the rows (not the documents inside them) restores it batch by batch::

        the built-in mixture, bfd rows in order:  the first batches mostly long-tailed, the last almost all fortunes
        the same rows shuffled:                   every batch near the corpus's mixture
    """

    names: tuple[str, ...]
    corpus: np.ndarray      # float [sources]: each source's share of the tokens
    batches: np.ndarray     # float [batches, sources]: each batch's share, rows in the plan's order
    rows_per_batch: int

    @property
    def drift(self) -> np.ndarray:
        """Per source, the largest gap between a batch's share and the corpus's, in share points (0.3 = 30 points)."""
        return np.abs(self.batches - self.corpus).max(axis=0) if len(self.batches) else np.zeros(len(self.names))

    @property
    def mean_drift(self) -> float:
        """The gap between a batch's mixture and the corpus's, averaged over batches and sources (share points)."""
        return float(np.abs(self.batches - self.corpus).mean()) if len(self.batches) else 0.0

    def to_dict(self) -> dict:
        return {"names": list(self.names), "corpus": self.corpus.tolist(), "batches": self.batches.tolist(),
                "rows_per_batch": self.rows_per_batch, "drift": self.drift.tolist(), "mean_drift": self.mean_drift}


def source_mixture(plan, source, names, rows_per_batch: int = 32, row_order=None) -> SourceMixture:
    """Token shares per source in each batch of ``rows_per_batch`` rows, the rows read in the plan's order (or
    ``row_order[i]``, the position at which row ``i`` is read, as a shuffle stage after packing reads them).

    ``source`` gives each document's source (an index into ``names``), in the order ``make_plan`` took them.

    >>> from packing_core import make_plan
    >>> plan = make_plan([500, 20, 480, 30, 400, 10], 512, "bfd")      # long ones from source 0
    >>> m = source_mixture(plan, [0, 1, 0, 1, 0, 1], ("long", "short"), rows_per_batch=1)
    >>> m.batches[:, 0].round(2).tolist(), m.corpus.round(2).tolist()
    ([0.98, 0.94, 0.95], [0.96, 0.04])
    """
    source = np.asarray(source, dtype=np.int64)
    k = len(names)
    tokens = np.bincount(source[plan.placed.doc], weights=plan.placed.length, minlength=k)
    row = plan.placed.row if row_order is None else np.asarray(row_order, dtype=np.int64)[plan.placed.row]
    batch = row // rows_per_batch
    n_batches = -(-plan.n_rows // rows_per_batch)
    per = np.bincount(batch * k + source[plan.placed.doc], weights=plan.placed.length,
                      minlength=n_batches * k).reshape(n_batches, k)
    share = per / np.maximum(per.sum(axis=1, keepdims=True), 1)
    return SourceMixture(tuple(names), tokens / max(tokens.sum(), 1), share, rows_per_batch)


def mixture_sentence(in_order: SourceMixture, shuffled: SourceMixture) -> str:
    """The drift of bfd's rows read in order against the same rows shuffled, in words (share points)."""
    def pct(x: float) -> str:
        return f"{100 * x:.0f} %"

    first, last = in_order.batches[0], in_order.batches[-1]
    top, bottom = int(first.argmax()), int(last.argmax())
    return (f"Offline bfd reads its rows longest first, and long documents come from some sources more than others: "
            f"the first batch of {in_order.rows_per_batch} rows is {pct(first[top])} {in_order.names[top]} (the "
            f"corpus: {pct(in_order.corpus[top])}), the last {pct(last[bottom])} {in_order.names[bottom]} (the corpus: "
            f"{pct(in_order.corpus[bottom])}). A batch's share of a source is {100 * in_order.mean_drift:.0f} points "
            f"off the corpus's on average, {100 * in_order.drift.max():.0f} at most. Shuffling the rows brings that to "
            f"{100 * shuffled.mean_drift:.0f} points on average ({100 * shuffled.drift.max():.0f} at most) without "
            "changing a single row: shuffle packed rows before batching them, as for lengths.")


def mixture_orders(context: int, seed: int = 0) -> tuple[SourceMixture, SourceMixture]:
    """The built-in mixture (``data.builtin.load_mixture``, SmolLM2's token counts when it is installed) packed by
    bfd at ``context``, per batch by source: its rows in the plan's order, and shuffled."""
    from packing_core.data.builtin import load_mixture
    from packing_core.models.tokenizers import load_tokenizer
    from packing_core.packing.strategies import make_plan

    mix = load_mixture(tokenizer=load_tokenizer("auto"), seed=seed)
    plan = make_plan(mix.lengths, context, "bfd", overlong="split")
    shuffled = np.random.default_rng(seed).permutation(plan.n_rows)     # the rows, read in a random order
    return (source_mixture(plan, mix.source, mix.names),
            source_mixture(plan, mix.source, mix.names, row_order=shuffled))
