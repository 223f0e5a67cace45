"""A length profile's report: every strategy from its counts, with what supervised training buys.

    >>> from packing_core.data.profile import LengthProfile
    >>> p = LengthProfile.from_counts({100: 3, 400: 1}, {100: 90, 400: 100}, kind="prompt-completion")
    >>> plans = profile_table(p, 512, strategies=("pad", "bfd"))
    >>> print(format_profile_report(p, plans).split(chr(10) * 2)[0])
    4 documents, 700 tokens (prompt-completion, tokenizer none); 27.1% of the tokens are in the loss
    trained tokens per slot: bfd 0.186 vs padding 0.093, 2.0x more training per step

The table under those two lines is :func:`~packing_core.analysis.columns.format_strategy_table`,
the one writer of the strategy table (plain ``report`` and the explorer's table read it too).

The JSON form (``report_dict``) is the one shape ``report FILE`` and ``report --profile``
print, version ``REPORT_VERSION``::

    {"report_version": 1, "context": 512,
     "profile": {kind, tokenizer, documents, tokens, cap, over_cap, sources, ...},   (no counts)
     "loss_share": 0.271,                          (tokens in the loss / all tokens)
     "headline": {"measure": ..., "best": "bfd", "best_value": ..., "padding_value": ..., "ratio": ..., "sentence": ...},
     "strategies": [{strategy, rows, slots, utilisation, ..., lower_bound_rows, rows_over_lower_bound,
                     basis, trained_tokens, trained_per_slot, note,
                     "costs": {convention, kernel, slots, slot_ratio, attention_cells, attention_ratio,
                               dense_mask_cells, dense_mask_ratio, ..._halves}}, ...]}

``costs`` holds the table's cost columns (``StrategyRow.cost_dict``), counted as
:mod:`packing_core.analysis.costs` counts them: plain ``report`` writes the same entry.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from packing_core._validate import InputError
from packing_core.analysis.columns import format_strategy_table
from packing_core.analysis.stats import LengthStats, length_histogram, length_stats
from packing_core.analysis.tables import StrategyRow, rows_from_metrics
from packing_core.data.profile import LengthProfile
from packing_core.packing.from_counts import SAMPLE_DOCUMENTS, CountPlan, compare_counts
from packing_core.packing.registry import STRATEGIES

REPORT_VERSION = 1
WHOLE_PACKERS = ("bfd", "ffd", "next-fit")    # packers that keep every document whole: the headline's candidates
# Record kinds whose tokens are not all in the loss: instruction data (a prompt, then what is trained).
# Until ``data.kinds`` names this list, this is its one home.
INSTRUCTION_KINDS = ("messages", "prompt-completion")
PURPOSES = ("pretraining", "instruction")     # what data is for: it decides whether a document may be split


@dataclass(frozen=True)
class Headline:
    """The answer in one line: the best whole-document packer against padding to the context.

    ``measure`` is ``"trained tokens per slot"`` for loss-masked data (what a step of
    compute trains) and ``"utilisation"`` for pretraining data (every token is trained).
    """

    measure: str
    best: str
    best_value: float
    padding_value: float
    ratio: float                # best_value / padding_value
    sentence: str

    def to_dict(self) -> dict:
        return asdict(self)


def headline(rows, trained_per_slot: dict | None = None) -> Headline:
    """The headline of a strategy table (``StrategyRow``, ``PlanMetrics`` or ``CountPlan`` rows).

    ``trained_per_slot`` ({strategy: value}) makes it the loss-masked headline.

    >>> from packing_core.analysis.tables import strategy_table
    >>> headline(strategy_table([120, 90, 300, 40, 55, 30, 210, 65], 512)).sentence
    'utilisation: bfd 88.9% vs padding 22.2%, 4.0x fewer slots for the same tokens'
    >>> headline(strategy_table([300, 200], 512, ("pad", "bfd")), {"pad": 0.25, "bfd": 0.5}).sentence
    'trained tokens per slot: bfd 0.500 vs padding 0.250, 2.0x more training per step'
    """
    rows = [getattr(r, "metrics", r) for r in rows]
    by = {r.strategy: r for r in rows}
    if "pad" not in by or not any(s in by for s in WHOLE_PACKERS):
        raise InputError("a headline needs the 'pad' row and one of bfd, ffd, next-fit; pass every strategy")
    candidates = [by[s] for s in WHOLE_PACKERS if s in by]
    pad = by["pad"]
    if trained_per_slot is not None:
        best = max(candidates, key=lambda r: trained_per_slot[r.strategy])
        value, base = trained_per_slot[best.strategy], trained_per_slot["pad"]
        ratio = value / base if base else float("inf")
        return Headline("trained tokens per slot", best.strategy, value, base, ratio,
                        f"trained tokens per slot: {best.strategy} {value:.3f} vs padding {base:.3f}, "
                        f"{ratio:.1f}x more training per step")
    best = max(candidates, key=lambda r: r.utilisation)
    ratio = best.utilisation / pad.utilisation if pad.utilisation else float("inf")
    return Headline("utilisation", best.strategy, best.utilisation, pad.utilisation, ratio,
                    f"utilisation: {best.strategy} {best.utilisation:.1%} vs padding {pad.utilisation:.1%}, "
                    f"{ratio:.1f}x fewer slots for the same tokens")


def loss_masked(profile: LengthProfile) -> bool:
    """True when some tokens are outside the loss (chat, prompt/completion): slots then buy less training."""
    return profile.loss_tokens is not None and profile.trained_tokens < profile.tokens


def profile_headline(profile: LengthProfile, plans: list[CountPlan]) -> Headline:
    """The headline of a profile's table: trained tokens per slot when loss-masked, else utilisation.

    Only plans of the whole corpus (basis "counts") compete; a sampled plan's slots count a sample.
    """
    whole = [p for p in plans if p.basis == "counts"]
    return headline(whole, {p.strategy: p.trained_per_slot for p in whole} if loss_masked(profile) else None)


def purpose_of(kind: str) -> str:
    """``"instruction"`` for chat and prompt/completion records, else ``"pretraining"`` (a purpose, not a kind).

    >>> purpose_of("messages"), purpose_of("text")
    ('instruction', 'pretraining')
    """
    return "instruction" if kind in INSTRUCTION_KINDS else "pretraining"


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
                  batch_size: int = 32, seed: int = 0, sample: int = SAMPLE_DOCUMENTS) -> list[CountPlan]:
    """Every registered strategy on a profile: count-only ones exactly, order-dependent ones on a seeded sample."""
    strategies = tuple(STRATEGIES) if strategies is None else tuple(strategies)
    return compare_counts(profile, context, strategies, overlong=overlong, batch_size=batch_size, seed=seed, n=sample)


def profile_rows(plans: list[CountPlan], base: CountPlan | None = None) -> list[StrategyRow]:
    """The profile's plans as the explorer's strategy rows (ratios against ``base``, padding to the context,
    by default the ``pad`` plan among ``plans``)."""
    by = {p.strategy: p.metrics for p in plans}
    if base is None and "pad" not in by:
        raise InputError("profile_rows needs the 'pad' plan (the base of every ratio); plan every strategy")
    return rows_from_metrics([p.metrics for p in plans], base.metrics if base is not None else by["pad"])


def profile_stats(profile: LengthProfile, context: int) -> LengthStats:
    """The length statistics of a profile, from its counts (the same as from the expanded lengths)."""
    return length_stats(profile.lengths, context, counts=profile.counts)


def profile_histogram(profile: LengthProfile, context: int, bins: int = 60):
    return length_histogram(profile.lengths, context, bins, counts=profile.counts)


def report_dict(profile: LengthProfile, plans: list[CountPlan], context: int, base: CountPlan | None = None) -> dict:
    """The one JSON shape of ``report`` (see the module docstring), ``report_version`` 1; each strategy's
    ``costs`` are the table's cost columns (ratios against ``base``, by default the ``pad`` plan)."""
    meta = {k: v for k, v in profile.to_dict().items() if k not in ("counts", "loss_tokens")}
    try:
        head = profile_headline(profile, plans).to_dict()
    except ValueError:      # one strategy asked for: nothing to compare
        head = None
    return {"report_version": REPORT_VERSION, "context": int(context), "profile": meta,
            "loss_share": profile.loss_share, "headline": head,
            "strategies": [{**p.to_dict(), "costs": r.cost_dict()} for p, r in zip(plans, profile_rows(plans, base))]}


def format_profile_report(profile: LengthProfile, plans: list[CountPlan], base: CountPlan | None = None) -> str:
    """The profile's totals and headline, then the strategy table (sampled rows count the sample's documents;
    ratios against ``base``, by default the ``pad`` plan)."""
    lines = [describe_profile(profile)]
    try:
        lines.append(profile_headline(profile, plans).sentence)
    except ValueError:
        pass
    return "\n".join([*lines, "", format_strategy_table(profile_rows(plans, base), plans)])
