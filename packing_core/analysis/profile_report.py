"""A length profile's report: every strategy from its counts, with what supervised training buys.

    >>> from packing_core.data.profile import LengthProfile
    >>> p = LengthProfile.from_counts({100: 3, 400: 1}, {100: 90, 400: 100}, kind="prompt-completion")
    >>> plans = profile_table(p, 512, strategies=("pad", "pad-longest", "bfd"))
    >>> print(format_profile_report(p, plans).split(chr(10) * 2)[0])  # doctest: +NORMALIZE_WHITESPACE
    4 documents, 700 tokens (prompt-completion, tokenizer none); 27.1% of the tokens are in the loss
    trained tokens per slot: bfd 0.186 vs 0.119 padded to each batch's longest, 1.6x more training per step
    (2.0x against padding to the context, 0.093)

The table under those two lines is :func:`~packing_core.analysis.columns.format_strategy_table`,
the one writer of the strategy table (plain ``report`` and the explorer's table read it too).

The JSON form (``report_dict``) is the one shape ``report FILE`` and ``report --profile``
print (plain ``report --lengths --format json`` too, with a smaller ``profile``), version
``REPORT_VERSION``::

    {"report_version": 2, "context": 512, "max_docs_per_row": null,
     "profile": {kind, tokenizer, documents, tokens, cap, over_cap, sources, ...},   (no counts)
     "loss_share": 0.271,                          (tokens in the loss / all tokens)
     "headline": {"measure": ..., "best": "bfd", "best_value": ..., "padding_value": ..., "ratio": ..., "sentence": ...,
                  "pad_longest_value": ..., "pad_longest_ratio": ...},   (against padding each batch to its longest)
     "bounds": {"l1": {name, rows, value, whole_documents, what, proven}, "l2": {...}, "lp": {...} or null,
                "whole_documents": "L2" or "LP", "sentence": ...},      (of every document, after --overlong)
     "optimal_gap": {strategy: "bfd", rows, bound, optimal_rows, seconds, gap_rows, gap_share, left_rows,
                     sentence} or null,           (when optimal and bfd were both planned)
     "cap_price": {strategy: "bfd", max_docs_per_row, rows, rows_uncapped, extra_rows, extra_share,
                   sentence} or null,             (with --max-docs-per-row)
     "strategies": [{strategy, rows, slots, utilisation, ..., bound, bound_rows, rows_over_bound,
                     bounds: {l1, l2, lp}, basis, trained_tokens, trained_per_slot, note, certificate,
                     "costs": {convention, kernel, slots, slot_ratio, attention_cells, attention_ratio,
                               dense_mask_cells, dense_mask_ratio, ..._halves}}, ...]}

Version 2 names the bounds: ``bound`` is the one a strategy is measured against (``L1`` if it
cuts documents, else ``L2`` or ``LP``), ``rows_over_bound`` its rows against it, and
``bounds`` gives all three in rows (a sampled plan: its sample's). Version 1's
``lower_bound_rows`` and ``rows_over_lower_bound`` measured every strategy against L1, a
number that only a plan cutting documents can reach; they are gone. ``costs`` holds the
table's cost columns (``StrategyRow.cost_dict``), counted as :mod:`packing_core.analysis.costs`
counts them: plain ``report`` writes the same entry.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from packing_core._validate import InputError
from packing_core.analysis.columns import format_strategy_table
from packing_core.analysis.quality import cap_sentence, describe_bounds, table_gap
from packing_core.analysis.stats import LengthStats, length_histogram, length_stats
from packing_core.analysis.tables import StrategyRow, rows_from_metrics
from packing_core.data.profile import LengthProfile
from packing_core.packing.from_counts import SAMPLE_DOCUMENTS, CapPrice, CountPlan, compare_counts
from packing_core.packing.options import DEFAULT_TIME_LIMIT
from packing_core.packing.registry import STRATEGIES

REPORT_VERSION = 2
WHOLE_PACKERS = ("bfd", "ffd", "next-fit")    # packers that keep every document whole: the headline's candidates
# Record kinds whose tokens are not all in the loss: instruction data (a prompt, then what is trained).
# Until ``data.kinds`` names this list, this is its one home.


@dataclass(frozen=True)
class Headline:
    """The answer in one line: the best whole-document packer against what a trainer does without packing.

    A trainer that does not pack pads each batch to its longest sample (``pad-longest``, dynamic
    padding): that is the comparison an engineer decides on (``pad_longest_*``). Padding every
    sample to the context (``padding_value``, ``ratio``) is the textbook baseline, shown beside it.
    ``measure`` is ``"trained tokens per slot"`` for loss-masked data (what a step of
    compute trains) and ``"utilisation"`` for pretraining data (every token is trained).
    """

    measure: str
    best: str
    best_value: float
    padding_value: float        # every sample padded to the context
    ratio: float                # best_value / padding_value
    sentence: str
    pad_longest_value: float | None = None     # each batch padded to its longest sample (None: not in the table)
    pad_longest_ratio: float | None = None     # best_value / pad_longest_value

    def to_dict(self) -> dict:
        return asdict(self)


def headline(rows, trained_per_slot: dict | None = None) -> Headline:
    """The headline of a strategy table (``StrategyRow``, ``PlanMetrics`` or ``CountPlan`` rows).

    ``trained_per_slot`` ({strategy: value}) makes it the loss-masked headline. With a
    ``pad-longest`` row the sentence leads with it, the full-context figure in brackets:

    >>> from packing_core.analysis.tables import strategy_table
    >>> print(headline(strategy_table([120, 90, 300, 40, 55, 30, 210, 65], 512)).sentence)
    ... # doctest: +NORMALIZE_WHITESPACE
    utilisation: bfd 88.9% vs 37.9% padded to each batch's longest, 2.3x fewer slots for the same tokens
    (4.0x against padding to the context, 22.2%)
    >>> headline(strategy_table([300, 200], 512, ("pad", "bfd")), {"pad": 0.25, "bfd": 0.5}).sentence
    'trained tokens per slot: bfd 0.500 vs padding to the context 0.250, 2.0x more training per step'
    """
    rows = [getattr(r, "metrics", r) for r in rows]
    by = {r.strategy: r for r in rows}
    if "pad" not in by or not any(s in by for s in WHOLE_PACKERS):
        raise InputError("a headline needs the 'pad' row and one of bfd, ffd, next-fit; pass every strategy")
    candidates = [by[s] for s in WHOLE_PACKERS if s in by]
    if trained_per_slot is not None:
        measure, gain, fmt = "trained tokens per slot", ("more", "less", "training per step"), "{:.3f}"
        value_of = lambda r: trained_per_slot[r.strategy]      # noqa: E731
    else:
        measure, gain, fmt = "utilisation", ("fewer", "more", "slots for the same tokens"), "{:.1%}"
        value_of = lambda r: r.utilisation                      # noqa: E731
    best = max(candidates, key=value_of)
    value, base = value_of(best), value_of(by["pad"])
    ratio = value / base if base else float("inf")
    head = f"{measure}: {best.strategy} {fmt.format(value)}"
    if "pad-longest" not in by:
        return Headline(measure, best.strategy, value, base, ratio,
                        f"{head} vs padding to the context {fmt.format(base)}, {_times(ratio, gain)}")
    longest = value_of(by["pad-longest"])
    dynamic = value / longest if longest else float("inf")
    return Headline(measure, best.strategy, value, base, ratio,
                    f"{head} vs {fmt.format(longest)} padded to each batch's longest, {_times(dynamic, gain)} "
                    f"({ratio:.1f}x against padding to the context, {fmt.format(base)})", longest, dynamic)


def _times(ratio: float, gain: tuple[str, str, str]) -> str:
    """A ratio in words: a gain as "2.3x fewer slots", a loss the other way round ("1.7x more slots"), never "0.6x fewer".

    >>> _times(2.3, ("fewer", "more", "slots")), _times(0.6, ("fewer", "more", "slots"))
    ('2.3x fewer slots', '1.7x more slots')
    """
    better, worse, what = gain
    if ratio >= 1 or ratio <= 0:
        return f"{ratio:.1f}x {better} {what}"
    return f"{1 / ratio:.1f}x {worse} {what}"


def loss_masked(profile: LengthProfile) -> bool:
    """True when some tokens are outside the loss (chat, prompt/completion): slots then buy less training."""
    return profile.loss_tokens is not None and profile.trained_tokens < profile.tokens


def profile_headline(profile: LengthProfile, plans: list[CountPlan]) -> Headline:
    """The headline of a profile's table: trained tokens per slot when loss-masked, else utilisation.

    Only plans of the whole corpus (from its counts, or on its lengths in order) compete; a sampled plan's
    slots count a sample. The baseline, pad-longest, is measured on the sample when the order matters.
    """
    whole = [p for p in plans if p.whole]
    # pad-longest depends on the order of the documents: its figure comes from the sampled plan (a ratio per
    # slot, so a sample measures it); it is the baseline, never a candidate
    rows = whole + [p for p in plans if p.strategy == "pad-longest" and not p.whole]
    return headline(rows, {p.strategy: p.trained_per_slot for p in rows} if loss_masked(profile) else None)


def describe_profile(profile: LengthProfile) -> str:
    """The profile in one sentence: its size, kind, tokenizer and what share of it is trained.

    >>> describe_profile(LengthProfile.from_counts({100: 3, 400: 1}))
    '4 documents, 700 tokens (lengths, tokenizer none); 100.0% of the tokens are in the loss'
    """
    text = (f"{profile.documents:,} documents, {profile.tokens:,} tokens ({profile.kind}, tokenizer "
            f"{profile.tokenizer}); {profile.loss_share:.1%} of the tokens are in the loss")
    if profile.cap is not None:
        text += f"; {profile.over_cap:,} over the cap of {profile.cap:,}"
    return text


def profile_sample(profile: LengthProfile, seed: int = 0) -> np.ndarray:
    """The seeded sample of a profile's lengths that every order-dependent view plans on (``SAMPLE_DOCUMENTS``)."""
    return profile.sample(SAMPLE_DOCUMENTS, seed)


def order_basis(plans: list[CountPlan] | None = None) -> str:
    """Which document order an order-dependent strategy was measured on, in words (for :func:`order_effects`).

    >>> order_basis()
    "the documents in the dataset's order"
    """
    if plans is None:
        return "the documents in the dataset's order"
    basis = next((p.basis for p in plans if p.basis != "counts"), "seeded random order")
    return basis if basis.startswith("all") else "a " + basis


def order_effects(rows, basis: str) -> str:
    """One sentence: what document order does to the order-dependent strategies, against bfd.

    ``basis`` says which order was measured ("the documents in the dataset's order").

    >>> from packing_core.analysis.tables import strategy_table
    >>> print(order_effects(strategy_table([120, 90, 300, 40, 55, 30, 210, 65], 512), "the dataset's order"))
    ... # doctest: +NORMALIZE_WHITESPACE
    next-fit and pad-longest depend on document order. Measured on the dataset's order: next-fit fills 88.9%
    and pad-longest 37.9%; bfd sorts the documents first, so it fills 88.9% in any order.
    """
    by = {getattr(r, "metrics", r).strategy: getattr(r, "metrics", r) for r in rows}
    parts = [f"{s} {'fills ' if not k else ''}{by[s].utilisation:.1%}"
             for k, s in enumerate(s for s in ("next-fit", "pad-longest") if s in by)]
    if not parts:
        return "No order-dependent strategy (next-fit, pad-longest) was measured."
    tail = f"; bfd sorts the documents first, so it fills {by['bfd'].utilisation:.1%} in any order." if "bfd" in by else "."
    return f"next-fit and pad-longest depend on document order. Measured on {basis}: {' and '.join(parts)}{tail}"


def profile_table(profile: LengthProfile, context: int, *, strategies=None, overlong: str = "split",
                  batch_size: int = 32, seed: int = 0, sample: int = SAMPLE_DOCUMENTS,
                  max_docs_per_row: int | None = None, time_limit: float = DEFAULT_TIME_LIMIT,
                  order=None) -> list[CountPlan]:
    """Every registered strategy on a profile: count-only ones exactly, order-dependent ones on a seeded sample
    (or on ``order``, the documents' lengths in their order, when the lengths were given as a list).

    ``max_docs_per_row`` caps every plan (a strategy that cuts documents refuses it); ``time_limit``
    bounds ``optimal``.
    """
    strategies = tuple(STRATEGIES) if strategies is None else tuple(strategies)
    return compare_counts(profile, context, strategies, overlong=overlong, batch_size=batch_size, seed=seed, n=sample,
                          max_docs_per_row=max_docs_per_row, time_limit=time_limit, order=order)


def profile_rows(plans: list[CountPlan], base: CountPlan | None = None) -> list[StrategyRow]:
    """The profile's plans as the explorer's strategy rows (ratios against ``base``, padding to the context,
    by default the ``pad`` plan among ``plans``)."""
    by = {p.strategy: p.metrics for p in plans}
    if base is None and "pad" not in by:
        raise InputError("profile_rows needs the 'pad' plan (the base of every ratio); plan every strategy")
    return _rows(plans, base.metrics if base is not None else by["pad"])


def _rows(plans: list[CountPlan], base) -> list[StrategyRow]:
    return rows_from_metrics([p.metrics for p in plans], base, bounds=[p.bounds for p in plans],
                             certificates=[p.certificate for p in plans])


def profile_stats(profile: LengthProfile, context: int) -> LengthStats:
    """The length statistics of a profile, from its counts (the same as from the expanded lengths)."""
    return length_stats(profile.lengths, context, counts=profile.counts)


def profile_histogram(profile: LengthProfile, context: int, bins: int = 60):
    return length_histogram(profile.lengths, context, bins, counts=profile.counts)


def strategy_entry(row: StrategyRow, plan: CountPlan | None = None) -> dict:
    """One strategy of the JSON report: its plan's numbers and its bounds, named (version 2)."""
    if row.metrics is None or row.bounds is None:
        raise InputError(f"the row of {row.strategy} has no plan numbers or bounds: build it with strategy_table")
    cert = getattr(row.certificate, "to_dict", None)
    d = plan.to_dict() if plan is not None else {**row.metrics.to_dict(), "certificate": cert() if cert else None}
    for old in ("lower_bound_rows", "rows_over_lower_bound"):
        d.pop(old, None)
    b = row.bounds
    return {**d, "bound": row.bound.name, "bound_rows": row.bound.rows, "rows_over_bound": row.rows_over_bound,
            "bounds": {"l1": b.l1.rows, "l2": b.l2.rows, "lp": None if b.lp is None else b.lp.rows},
            "costs": row.cost_dict()}


def report_dict(profile: LengthProfile | None, plans: list[CountPlan] | None, context: int, *, rows=None,
                head: dict | None = None, meta: dict | None = None, max_docs_per_row: int | None = None,
                cap: CapPrice | None = None, base: CountPlan | None = None) -> dict:
    """The one JSON shape of ``report`` (see the module docstring), ``report_version`` 2.

    A profile's ``plans``, or (plain ``report --lengths``) strategy ``rows`` with ``head`` and ``meta``.
    Each strategy's ``costs`` are ratios against ``base`` (by default the ``pad`` plan among ``plans``).
    """
    if plans is not None:
        if profile is None:
            raise InputError("report_dict: a profile's plans need the profile")
        meta = {k: v for k, v in profile.to_dict().items() if k not in ("counts", "loss_tokens")}
        try:
            head = profile_headline(profile, plans).to_dict()
        except ValueError:      # one strategy asked for: nothing to compare
            head = None
        rows = _rows(plans, base.metrics if base is not None else
                     {p.strategy: p.metrics for p in plans}.get("pad", plans[0].metrics))
    pairs = list(zip(rows, plans if plans is not None else [None] * len(rows)))
    whole = [r for r, p in pairs if p is None or p.whole]
    bounds = whole[0].bounds if whole else rows[0].bounds
    gap = table_gap(whole)
    return {"report_version": REPORT_VERSION, "context": int(context), "max_docs_per_row": max_docs_per_row,
            "profile": meta, "loss_share": profile.loss_share if profile is not None else 1.0, "headline": head,
            "bounds": {**bounds.to_dict(), "sentence": describe_bounds(bounds)},
            "optimal_gap": None if gap is None else gap.to_dict(),
            "cap_price": None if cap is None else {**cap.to_dict(), "sentence": cap_sentence(cap)},
            "strategies": [strategy_entry(r, p) for r, p in pairs]}


def format_profile_report(profile: LengthProfile, plans: list[CountPlan], base: CountPlan | None = None) -> str:
    """The profile's totals and headline, then the strategy table (sampled rows count the sample's documents;
    ratios against ``base``, by default the ``pad`` plan)."""
    lines = [describe_profile(profile)]
    try:
        lines.append(profile_headline(profile, plans).sentence)
    except ValueError:
        pass
    rows = _rows(plans, base.metrics if base is not None else
                     {p.strategy: p.metrics for p in plans}.get("pad", plans[0].metrics))
    return "\n".join([*lines, "", format_strategy_table(rows, plans)])
