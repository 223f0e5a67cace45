"""The strategies, listed once: every table, picker and planner of the lab reads this list.

A :class:`Strategy` names a way to put documents into rows: a one-line description,
whether its rows hold several documents (``packs``: they need a block-diagonal mask), a
``place`` function over arrays (``place.py``) and a ``from_counts`` function over a length
histogram (``count_rows.py``), or ``None`` when the result depends on document order and
a profile is planned on a labelled sample instead.

``STRATEGIES``, ``PACKING_STRATEGIES``, ``STRATEGY_INFO``, ``COUNT_STRATEGIES`` and
``ORDER_STRATEGIES`` are read-only views kept in step with the list, so a strategy registered later shows up
in ``make_plan``, the CLI, ``report --profile`` and the pages without another edit:

>>> STRATEGIES[:3]
('pad', 'pad-longest', 'bucket')
>>> set(COUNT_STRATEGIES) | set(ORDER_STRATEGIES) == set(STRATEGIES)
True
>>> get_strategy("bfd").packs, get_strategy("next-fit").from_counts is None
(True, True)
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import packing_core.packing.count_rows as C
import packing_core.packing.optimal as O
import packing_core.packing.place as P
from packing_core._registry import Registry

__all__ = ["COUNT_STRATEGIES", "DEFAULT_STRATEGIES", "ORDER_STRATEGIES", "PACKING_STRATEGIES", "STRATEGIES",
           "STRATEGY_INFO", "Strategy", "get_strategy", "register_strategy", "strategies", "unregister_strategy"]


@dataclass(frozen=True)
class Strategy:
    """One strategy: ``place(pieces, context, options, rng) -> Placement`` and, when only the
    multiset of lengths matters, ``from_counts(piece_lengths, pieces, context, options) -> CountRows``.

    ``counts_exact`` is False when ``from_counts`` gives an upper bound on the slots rather than
    the array planner's figure (bucket: the shuffled batches are often narrower); ``cuts`` is True
    when the strategy cuts documents at row edges whatever their length (concat-cut), so it is no
    choice for data whose documents must stay whole; ``on_request`` leaves it out of ``report``'s
    default table (``DEFAULT_STRATEGIES``): it runs when named, as ``optimal``'s LP solve does.
    """

    name: str
    info: str
    packs: bool
    place: Callable
    from_counts: Callable | None
    counts_exact: bool = True
    cuts: bool = False
    on_request: bool = False    # left out of ``report``'s default table: run when named (optimal: an LP solve)

    def to_dict(self) -> dict:
        return {"name": self.name, "info": self.info, "packs": self.packs, "from_counts": self.from_counts is not None,
                "counts_exact": self.counts_exact, "cuts": self.cuts, "on_request": self.on_request}


_REGISTRY: Registry[Strategy] = Registry("strategy")


def register_strategy(strategy: Strategy) -> Strategy:
    """Add ``strategy`` to the list (after the others); a name may be registered once."""
    if not isinstance(strategy, Strategy):
        raise TypeError(f"register_strategy() takes a Strategy, got {type(strategy).__name__}")
    return _REGISTRY.register(strategy.name, strategy)


def unregister_strategy(name: str) -> Strategy:
    """Remove a strategy (tests register throwaway ones); returns it."""
    return _REGISTRY.unregister(name)


def get_strategy(name) -> Strategy:
    """The registered strategy called ``name``, or one line naming the choices."""
    return _REGISTRY.get(name)


def strategies() -> tuple[Strategy, ...]:
    """Every registered strategy, in the lab's order (padding first, then packing)."""
    return _REGISTRY.entries()


STRATEGIES = _REGISTRY.names_view(doc="Every registered strategy's name, in order.")
PACKING_STRATEGIES = _REGISTRY.names_view(lambda s: s.packs, "Strategies whose rows hold several documents.")
COUNT_STRATEGIES = _REGISTRY.names_view(lambda s: s.from_counts is not None, "Strategies planned from length counts alone.")
ORDER_STRATEGIES = _REGISTRY.names_view(lambda s: s.from_counts is None,
                                        "Strategies that depend on order: planned on a sample.")
DEFAULT_STRATEGIES = _REGISTRY.names_view(lambda s: not s.on_request,
                                          "What report plans by default: every strategy but those run on request.")
STRATEGY_INFO = _REGISTRY.mapping_view(lambda s: s.info, "name -> one-line description.")

for _s in (
    Strategy("pad", "Pad every sample to the context: one sample per row.", False, P.place_pad, C.rows_pad),
    Strategy("pad-longest", "Pad each batch to its longest sample (dynamic padding).", False,
             P.place_pad_longest, None),
    Strategy("bucket", "Group samples of similar length, shuffle inside each bucket, pad each batch to its longest.",
             False, P.place_bucket, C.rows_bucket, counts_exact=False),
    Strategy("concat-cut", "Concatenate everything and cut into full rows; documents split at row edges.", True,
             P.place_concat_cut, C.rows_concat_cut, cuts=True),
    Strategy("next-fit", "Keep the order; start a new row when the next document does not fit.", True,
             P.place_next_fit, None),
    Strategy("ffd", "First-fit decreasing: longest first, into the first row with room.", True, P.place_ffd, C.rows_ffd),
    Strategy("bfd", "Best-fit decreasing: longest first, into the fullest row it still fits.", True,
             P.place_bfd, C.rows_bfd),
    Strategy("optimal", "Column generation on the length histogram, rounding and a diving search, within a "
             "budget of work set by the time limit: a plan proven optimal, or the best plan found with its gap "
             "to the proven lower bound.", True, O.place_optimal, O.rows_optimal,
             on_request=True),
):
    register_strategy(_s)
del _s
