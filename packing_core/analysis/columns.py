"""The strategy table, written once: its columns, their formats and what each one means.

Plain ``report``, ``report FILE`` (and ``--profile``) and the Dataset explorer's table all read
:data:`COLUMNS`: a column has one meaning, one text header, one page title and one help text,
so the command line and the page cannot drift apart. A profile's plans add two columns (the
basis a plan was measured on, and trained tokens per slot).

Each strategy is measured against the proven lower bound its kind of plan can reach: L1 for one
that cuts documents, L2 (or LP, once ``optimal`` ran) for one that keeps them whole. Ten
documents of 300 tokens at context 512:

>>> from packing_core.analysis.tables import strategy_table
>>> print(format_strategy_table(strategy_table([300] * 10, 512, ("pad", "concat-cut", "bfd"))))
... # doctest: +NORMALIZE_WHITESPACE
strategy rows bound rows/bound slots pads util lost split slot ratio attn cells attn ratio dense cells dense ratio
pad 10 L2 10 1.000 5,120 2,120 0.586 0 0 1.00x 2.621e+06 1.00x 2.621e+06 1.00x
concat-cut 6 L1 6 1.000 3,072 72 0.977 0 5 1.67x 7.294e+05 3.59x 1.573e+06 1.67x
bfd 10 L2 10 1.000 5,120 2,120 0.586 0 0 1.00x 9.000e+05 2.91x 2.621e+06 1.00x
<BLANKLINE>
lower bounds on rows: L1 6 (tokens / context: a bound for every plan, reachable only by cutting documents),
L2 10 (whole documents), LP not computed
bound: the proven lower bound on rows for the strategy's kind of plan. L1 = tokens / context, rounded up,
is reachable only by cutting documents at row edges (concat-cut); a strategy that keeps documents whole
is measured against the higher of L2 (Martello-Toth) and LP (column generation, when optimal ran);
rows/bound: rows against that bound (1.000: proven optimal);
slot ratio (linear: slot ratio): slots of padding to the context / these slots;
attn cells (attention cells): the plan's own kernel, a padded causal kernel for padding (width² per
row, pads computed), an unpadding varlen kernel for packing (Σ len² of its pieces);
dense cells (dense-mask cells): a materialised block-diagonal mask, width² per row;
attn ratio, dense ratio: padding to the context under a padded causal kernel / these cells.
Cells are counted in full squares, as torch's CPU kernel computes rows up to 512 tokens; a GPU causal
kernel skips the upper half of each square, so attn ratio stays about the same and dense ratio halves.
<BLANKLINE>
  pad: Pad every sample to the context: one sample per row.
  concat-cut: Concatenate everything and cut into full rows; documents split at row edges.
  bfd: Best-fit decreasing: longest first, into the fullest row it still fits.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from packing_core.analysis.quality import describe_bounds, table_gap
from packing_core.analysis.tables import StrategyRow
from packing_core.packing.from_counts import CountPlan
from packing_core.packing.registry import COUNT_STRATEGIES, ORDER_STRATEGIES, PACKING_STRATEGIES, STRATEGY_INFO


@dataclass(frozen=True)
class Column:
    """One column: a text header and format (the CLI), a page title and format (the explorer), its meaning.

    ``value(row, plan)`` reads a :class:`StrategyRow` and, for a profile, its :class:`CountPlan`
    (else ``None``); ``text`` or ``title`` is ``None`` where that table leaves the column out.
    """

    text: str | None
    title: str | None
    value: Callable[[StrategyRow, Any], Any]     # (row, its CountPlan or None)
    fmt: str = "{}"                 # the text table's format
    page_format: str | None = None  # the page's number format (Streamlit NumberColumn), None: shown as it is
    help: str = ""
    profile_only: bool = False      # only a profile's plans carry it


COLUMNS: tuple[Column, ...] = (
    Column("strategy", "strategy", lambda r, p: r.strategy),
    Column(None, "kind", lambda r, p: "packing" if r.strategy in PACKING_STRATEGIES else "padding"),
    Column("basis", None, lambda r, p: "counts" if p.basis == "counts" else "ordered" if p.in_order else "sampled",
           profile_only=True),
    Column("rows", "rows", lambda r, p: r.rows, "{:,}", "localized"),
    Column("bound", "proven lower bound", lambda r, p: f"{r.bound.name} {r.bound.rows:,}",
           help="the proven lower bound on rows for this kind of plan: L1 (tokens / context, rounded up) for a "
                "strategy that cuts documents, reachable only by cutting; the higher of L2 (Martello-Toth) and LP "
                "(column generation, when optimal ran) for one that keeps documents whole"),
    Column("rows/bound", "rows vs proven bound", lambda r, p: r.rows_over_bound, "{:.3f}", "%.3fx",
           "rows against that bound: 1.000x is proven optimal. Padding strategies hold one document per row, so "
           "they sit far above it"),
    Column("slots", "slots", lambda r, p: r.slots, "{:,}", "localized"),
    Column("pads", "pads", lambda r, p: r.pad_tokens, "{:,}", "localized"),
    Column("util", "utilisation %", lambda r, p: r.utilisation, "{:.3f}", "%.1f %%"),
    Column("lost", "tokens lost", lambda r, p: r.tokens_lost, "{:,}", "localized"),
    Column("split", "docs split", lambda r, p: r.docs_split, "{:,}"),
    Column(None, "basis", lambda r, p: "all documents" if p.basis == "counts" else p.basis, profile_only=True),
    Column("trained/slot", "trained tokens per slot", lambda r, p: p.trained_per_slot, "{:.3f}", "%.3f",
           "tokens in the loss / slots: what one slot of compute trains", profile_only=True),
    Column("slot ratio", "linear: slot ratio", lambda r, p: r.slot_ratio, "{:.2f}x", "%.1fx",
           "slots of padding to the context / these slots: what the linear layers save"),
    Column("attn cells", "attention cells", lambda r, p: r.attention_cost, "{:.3e}", "%.3e",
           "attention cells of the plan's own kernel, in full squares. Padding: a padded causal kernel (SDPA with "
           "is_causal) computes rows x width², pads included. Packing: an unpadding varlen kernel fed cu_seqlens "
           "computes Σ len². FlexAttention computes every tile a document touches (the Benchmark counts them)"),
    Column("attn ratio", "attention FLOP ratio", lambda r, p: r.attention_ratio, "{:.2f}x", "%.1fx",
           "attention cells of padding to the context under a padded causal kernel / this plan's attention cells, "
           "in full squares. A GPU causal kernel skips the upper half of both, so this ratio hardly moves there. "
           "Against an unpadding kernel (FlashAttention given an attention_mask) padding also pays only Σ len², "
           "and packing's saving is the slot ratio. A FLOP count, not a measured speed-up"),
    Column("dense cells", "dense-mask cells", lambda r, p: r.dense_mask_cost, "{:.3e}", "%.3e",
           "attention cells of the same plan with a materialised block-diagonal mask: every cell of each row, "
           "rows x width²"),
    Column("dense ratio", "dense-mask FLOP ratio", lambda r, p: r.dense_mask_ratio, "{:.2f}x", "%.1fx",
           "padding's attention cells (padded causal kernel) / the dense-mask cells, in full squares. On a GPU, "
           "whose padded causal kernel skips the upper half and a dense mask does not, this ratio halves"),
    Column(None, "what it does", lambda r, p: r.description),
)
# The columns a class compares first (the page's narrow table; every column waits below it).
KEY_TITLES = ("strategy", "utilisation %", "rows", "tokens lost", "docs split")
LEGEND = ("bound: the proven lower bound on rows for the strategy's kind of plan. L1 = tokens / context, rounded up,\n"
          "is reachable only by cutting documents at row edges (concat-cut); a strategy that keeps documents whole\n"
          "is measured against the higher of L2 (Martello-Toth) and LP (column generation, when optimal ran);\n"
          "rows/bound: rows against that bound (1.000: proven optimal);\n"
          "slot ratio (linear: slot ratio): slots of padding to the context / these slots;\n"
          "attn cells (attention cells): the plan's own kernel, a padded causal kernel for padding (width² per\n"
          "row, pads computed), an unpadding varlen kernel for packing (Σ len² of its pieces);\n"
          "dense cells (dense-mask cells): a materialised block-diagonal mask, width² per row;\n"
          "attn ratio, dense ratio: padding to the context under a padded causal kernel / these cells.\n"
          "Cells are counted in full squares, as torch's CPU kernel computes rows up to 512 tokens; a GPU causal\n"
          "kernel skips the upper half of each square, so attn ratio stays about the same and dense ratio halves.")


def table_notes(rows: list[StrategyRow], plans: list[CountPlan] | None = None) -> list[str]:
    """The lines under the table: the bounds of the documents planned, and how far bfd is from the proven
    optimum when ``optimal`` ran beside it (a sampled plan's bounds are its sample's: the basis column)."""
    pairs = _pairs(rows, plans)
    whole = [r for r, p in pairs if p is None or p.whole]
    notes = [describe_bounds(whole[0].bounds)] if whole and whole[0].bounds is not None else []
    gap = table_gap(whole)
    return notes + ([gap.sentence] if gap is not None else [])


def _columns(plans, where: str) -> list[Column]:
    return [c for c in COLUMNS if getattr(c, where) is not None and (plans is not None or not c.profile_only)]


def _pairs(rows, plans) -> list[tuple[StrategyRow, CountPlan | None]]:
    if plans is not None and [p.strategy for p in plans] != [r.strategy for r in rows]:
        raise ValueError("rows and plans must list the same strategies in the same order")
    return list(zip(rows, plans if plans is not None else [None] * len(rows)))


def basis_note() -> str:
    """How a profile's strategies are planned, read from the registry (one sentence).

    >>> basis_note()[:60]
    'pad, bucket, concat-cut, ffd, bfd and optimal are planned fr'
    """
    def names(xs) -> str:
        xs = list(xs)
        return ", ".join(xs[:-1]) + f" and {xs[-1]}" if len(xs) > 1 else "".join(xs)
    return (f"{names(COUNT_STRATEGIES)} are planned from the counts of every document; {names(ORDER_STRATEGIES)} "
            "on a seeded random order of a sample (their basis column says which).")


def format_strategy_table(rows: list[StrategyRow], plans: list[CountPlan] | None = None) -> str:
    """The text table of the CLI: one line per strategy, the legend, a profile's sampling notes, what each does."""
    columns = _columns(plans, "text")
    pairs = _pairs(rows, plans)
    cells = [[c.text or "" for c in columns]] + [[c.fmt.format(c.value(r, p)) for c in columns] for r, p in pairs]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    table = ["  ".join(v.ljust(w) if c.text in ("strategy", "basis") else v.rjust(w)
                       for c, v, w in zip(columns, line, widths)).rstrip() for line in cells]
    notes = sorted({f"{'ordered' if p.in_order else 'sampled'}: {p.basis}; {p.note}"
                    for _, p in pairs if p is not None and p.basis != "counts"})
    described = [f"  {r.strategy}: {STRATEGY_INFO.get(r.strategy, r.description)}" for r, _ in pairs]
    return "\n".join([*table, "", *table_notes(rows, plans), LEGEND, *notes, "", *described])


def strategy_frame(rows: list[StrategyRow], plans: list[CountPlan] | None = None) -> dict[str, list]:
    """The page's table as ``{title: values}``, in :data:`COLUMNS` order (utilisation in percent)."""
    pairs = _pairs(rows, plans)
    scale = {"utilisation %": 100.0}
    return {c.title or "": [c.value(r, p) * scale.get(c.title or "", 1) if c.title in scale else c.value(r, p)
                            for r, p in pairs] for c in _columns(plans, "title")}


def column_help(plans=None) -> dict[str, tuple[str | None, str]]:
    """``{title: (page number format, help)}`` of the page's columns."""
    return {c.title or "": (c.page_format, c.help) for c in _columns(plans, "title") if c.page_format or c.help}
