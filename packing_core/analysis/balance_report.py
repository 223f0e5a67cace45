"""A balance report as text: each rank's tokens and attention cost, before and after balancing.

    >>> from packing_core.packing.strategies import make_plan
    >>> from packing_core.packing.balance import balance_rows
    >>> plan = make_plan([512, 128, 128, 128, 128, 512, 128, 128, 128, 128], 512, "next-fit")
    >>> print(format_balance(balance_rows(plan, 2), "next-fit rows"))
    next-fit rows: 4 rows over 2 ranks x 1 micro-batches
    <BLANKLINE>
    rank  tokens before  attention before  tokens after  attention after
    0             1,024           524,288         1,024          327,680
    1             1,024           131,072         1,024          327,680
    <BLANKLINE>
    max/mean: tokens 1.00 -> 1.00, attention 1.60 -> 1.00 (balanced by attention cost, equal rows per rank)
    balancing by attention cost cuts the slowest rank's work by 38 %
"""
from __future__ import annotations

from packing_core.packing.balance import BalanceReport


def slowest_rank_cut(report: BalanceReport) -> float:
    """The share of the slowest rank's attention work that balancing removes (0.375 = 37.5 %)."""
    before, after = int(report.before.rank_attention.max()), int(report.after.rank_attention.max())
    return 1.0 - after / before if before else 0.0


def balance_verdict(report: BalanceReport) -> str:
    """The balance section's last sentence: what balancing by attention cost does to the slowest rank.

    A step waits for the slowest rank, so its work is the step's time (attention, sum of len²).
    """
    cut = slowest_rank_cut(report)
    if cut < 0.005:
        why = ("these rows are already even across the ranks" if report.after.attention_imbalance < 1.05 else
               f"{report.rows:,} rows over {report.ranks} ranks leave no row to move")
        return f"balancing by attention cost changes the slowest rank's work by less than 1 %: {why}"
    return f"balancing by attention cost cuts the slowest rank's work by {cut:.0%}".replace("%", " %")


def format_balance(report: BalanceReport, label: str) -> str:
    """One line per rank, then the max/mean imbalance of tokens and attention before -> after."""
    b, a = report.before, report.after
    head = ["rank", "tokens before", "attention before", "tokens after", "attention after"]
    cells = [head] + [[str(r), f"{b.rank_tokens[r]:,}", f"{b.rank_attention[r]:,}", f"{a.rank_tokens[r]:,}",
                       f"{a.rank_attention[r]:,}"] for r in range(report.ranks)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in cells]
    return "\n".join([f"{label}: {report.rows:,} rows over {report.ranks} ranks x {report.micro_batches} micro-batches",
                      *([report.note] if report.note else []), "", *lines, "",
                      f"max/mean: tokens {b.token_imbalance:.2f} -> {a.token_imbalance:.2f}, attention "
                      f"{b.attention_imbalance:.2f} -> {a.attention_imbalance:.2f} (balanced by attention cost, "
                      "equal rows per rank)", balance_verdict(report)])
