"""What shapes a plan besides the lengths: the options every ``place`` and ``from_counts`` receives.

A cap on documents per row (``max_docs_per_row``) is a parameter of *placement*, not a strategy:
next-fit, ffd, bfd and ``optimal`` honour it exactly (a compiled or graph-captured kernel wants
a fixed number of documents per row); strategies that pad hold one document per row anyway.
``time_limit`` is the budget of ``optimal``: seconds' worth of work (``master.Budget``).

>>> as_max_docs_per_row(8, 512), as_max_docs_per_row(None, 512)
(8, None)
>>> try:
...     as_time_limit(float("nan"))
... except InputError as e:
...     print(str(e)[:77])
time_limit must be a number of seconds above 0 and at most 60, got nan; try 5
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from packing_core._validate import MAX_PLAN_SECONDS, InputError, limit_hint

__all__ = ["DEFAULT_TIME_LIMIT", "MAX_TIME_LIMIT", "TIME_LIMIT_HELP", "PlanOptions", "as_max_docs_per_row", "as_time_limit"]

DEFAULT_TIME_LIMIT = 5.0      # the budget of `optimal`: seconds' worth of work, the clock a safety net
MAX_TIME_LIMIT = MAX_PLAN_SECONDS   # the one time budget of a plan (``_validate``)
TIME_LIMIT_HELP = (f"the budget of optimal, in seconds (default {DEFAULT_TIME_LIMIT:g}): it ends with a plan proven "
                   "optimal, or with its best plan and the gap in rows to the proven lower bound; the budget is "
                   "counted in work, so the plan does not depend on the machine's load, and the clock stops it "
                   "sooner only on a machine slower than the work assumes (the certificate then says so)")


@dataclass(frozen=True)
class PlanOptions:
    """What shapes some strategies: ``batch_size`` and ``sort`` (pad-longest, bucket), ``buckets``
    or ``bucket_edges`` (bucket), ``max_docs_per_row`` (every packing strategy), ``time_limit`` (optimal)."""

    batch_size: int = 32
    sort: bool = False
    buckets: int = 8
    bucket_edges: tuple[int, ...] | None = None
    max_docs_per_row: int | None = None
    time_limit: float = DEFAULT_TIME_LIMIT


def cap_of(opts) -> int | None:
    """The cap on pieces per row of ``opts`` (None: no cap; ``opts`` may be None)."""
    return getattr(opts, "max_docs_per_row", None)


def refuse_cap(strategy: str, opts) -> None:
    """One line for a strategy that cannot honour a cap on documents per row."""
    if cap_of(opts) is not None:
        raise InputError(f"{strategy} cuts the stream of tokens at row edges, so max_docs_per_row="
                         f"{cap_of(opts)} cannot hold there (a row may end inside any document); use next-fit, "
                         "ffd, bfd or optimal, which keep documents whole and honour the cap exactly")


def as_max_docs_per_row(value, context: int, name: str = "max_docs_per_row") -> int | None:
    """A cap on documents (pieces) per row: None (no cap) or a whole number from 1 to the context.

    A row of ``context`` slots never holds more than ``context`` documents of one token or more, so
    a larger cap is no cap: it is refused rather than silently meaning nothing.
    """
    if value is None:
        return None
    hint = f"a row of {context:,} slots holds at most {context:,} documents; leave it unset for no cap"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{name} must be a whole number of documents, got {value!r}; {hint}")
    value = int(value)
    if value < 1:
        raise InputError(f"{name} must be at least 1 (every row holds a document), got {value:,}; {hint}")
    if value > context:
        raise InputError(f"{name} must be at most the context ({context:,}), got {value:,}; {hint}")
    return value


def as_time_limit(value, name: str = "time_limit") -> float:
    """Seconds of an anytime budget: a finite number above 0 and at most ``MAX_TIME_LIMIT``.

    The limit is written as given (``0.5``, not ``0``), and the value suggested is one it allows.
    """
    bad = isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating))
    if bad or not math.isfinite(float(value)) or not 0 < float(value) <= MAX_TIME_LIMIT:
        raise InputError(f"{name} must be a number of seconds above 0 and at most {MAX_TIME_LIMIT:,.15g}, "
                         f"got {value!r}; try {min(DEFAULT_TIME_LIMIT, MAX_TIME_LIMIT):.15g} "
                         f"({limit_hint('MAX_PLAN_SECONDS')})")
    return float(value)
