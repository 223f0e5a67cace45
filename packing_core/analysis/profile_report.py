"""A length profile's report: every strategy from its counts, with what supervised training buys.

    >>> from packing_core.data.profile import LengthProfile
    >>> p = LengthProfile.from_counts({100: 3, 400: 1}, {100: 90, 400: 100}, kind="prompt-completion")
    >>> print(format_profile_report(p, profile_table(p, 512, strategies=("pad", "bfd"))))  # doctest: +NORMALIZE_WHITESPACE
    4 documents, 700 tokens (prompt-completion, tokenizer none); 27.1% of the tokens are in the loss
    <BLANKLINE>
    strategy  basis   rows  slots  util   x lower bound  trained/slot
    pad       counts     4  2,048  0.342  2.000          0.093
    bfd       counts     2  1,024  0.684  1.000          0.186
"""
from __future__ import annotations

from packing_core.data.profile import LengthProfile
from packing_core.packing.from_counts import CountPlan, compare_counts
from packing_core.packing.registry import STRATEGIES

_COLUMNS = (("strategy", "{}"), ("basis", "{}"), ("rows", "{:,}"), ("slots", "{:,}"), ("util", "{:.3f}"),
            ("x lower bound", "{:.3f}"), ("trained/slot", "{:.3f}"))


def profile_table(profile: LengthProfile, context: int, *, strategies=None, overlong: str = "split",
                  batch_size: int = 32, seed: int = 0, sample: int = 200_000) -> list[CountPlan]:
    """Every registered strategy on a profile: count-only ones exactly, order-dependent ones on a seeded sample."""
    strategies = tuple(STRATEGIES) if strategies is None else tuple(strategies)
    return compare_counts(profile, context, strategies, overlong=overlong, batch_size=batch_size, seed=seed, n=sample)


def _cells(p: CountPlan) -> list[str]:
    m = p.metrics
    basis = "counts" if p.basis == "counts" else "sampled"
    values = (m.strategy, basis, m.rows, m.slots, m.utilisation, m.rows_over_lower_bound, p.trained_per_slot)
    return [fmt.format(v) for (_, fmt), v in zip(_COLUMNS, values)]


def format_profile_report(profile: LengthProfile, plans: list[CountPlan]) -> str:
    """The profile's totals, then one line per strategy (sampled rows count the sample's documents)."""
    head = (f"{profile.documents:,} documents, {profile.tokens:,} tokens ({profile.kind}, tokenizer "
            f"{profile.tokenizer}); {profile.loss_share:.1%} of the tokens are in the loss")
    if profile.cap is not None:
        head += f"; {profile.over_cap:,} over the cap of {profile.cap:,}"
    cells = [[h for h, _ in _COLUMNS]] + [_cells(p) for p in plans]
    widths = [max(len(r[i]) for r in cells) for i in range(len(_COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    notes = sorted({f"sampled: {p.basis}; {p.note}" for p in plans if p.basis != "counts"})
    return "\n".join([head, "", *lines, *([""] + notes if notes else [])])
