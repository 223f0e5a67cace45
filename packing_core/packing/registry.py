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
from packing_core._validate import InputError

__all__ = ["COUNT_STRATEGIES", "ORDER_STRATEGIES", "PACKING_STRATEGIES", "STRATEGIES", "STRATEGY_INFO", "Strategy",
           "get_strategy", "register_strategy", "strategies", "unregister_strategy"]


@dataclass(frozen=True)
class Strategy:
    """One strategy: ``place(pieces, context, options, rng) -> Placement`` and, when only the
    multiset of lengths matters, ``from_counts(piece_lengths, pieces, context, options) -> CountRows``.

    ``counts_exact`` is False when ``from_counts`` gives an upper bound on the slots rather than
    the array planner's figure (bucket: the shuffled batches are often narrower); ``cuts`` is True
    when the strategy cuts documents at row edges whatever their length (concat-cut), so it is no
    choice for data whose documents must stay whole.
    """

    name: str
    info: str
    packs: bool
    place: Callable
    from_counts: Callable | None
    counts_exact: bool = True
    cuts: bool = False

    def to_dict(self) -> dict:
        return {"name": self.name, "info": self.info, "packs": self.packs, "from_counts": self.from_counts is not None,
                "counts_exact": self.counts_exact, "cuts": self.cuts}


_REGISTRY: dict[str, Strategy] = {}


def register_strategy(strategy: Strategy) -> Strategy:
    """Add ``strategy`` to the list (after the others); a name may be registered once."""
    if not isinstance(strategy, Strategy):
        raise TypeError(f"register_strategy() takes a Strategy, got {type(strategy).__name__}")
    if strategy.name in _REGISTRY:
        raise InputError(f"a strategy named {strategy.name!r} is already registered; pick another name")
    _REGISTRY[strategy.name] = strategy
    _sync()
    return strategy


def unregister_strategy(name: str) -> Strategy:
    """Remove a strategy (tests register throwaway ones); returns it."""
    s = _REGISTRY.pop(name)
    _sync()
    return s


def _sync() -> None:
    for view in globals().get("_VIEWS", ()):
        view._sync()


def get_strategy(name) -> Strategy:
    """The registered strategy called ``name``, or one line naming the choices."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise InputError(f"strategy must be one of {', '.join(map(repr, _REGISTRY))}, got {name!r}")
    return _REGISTRY[name]


def strategies() -> tuple[Strategy, ...]:
    """Every registered strategy, in the lab's order (padding first, then packing)."""
    return tuple(_REGISTRY.values())


def _refuse(self, *args, **kwargs):
    raise TypeError("the strategy lists follow the registry: change them with register_strategy()")


class _Names(list):
    """A read-only list of names, kept in step with the registry (so every importer sees a new one).

    A list, so Streamlit, pandas and json take it as they are; ``+`` and ``==`` behave as on the
    tuples it replaces, and a copy or a pickle is a plain tuple.
    """

    def __init__(self, keep: Callable[[Strategy], bool], doc: str):
        super().__init__()
        self._keep, self.__doc__ = keep, doc

    def _sync(self) -> None:
        list.clear(self)
        list.extend(self, (s.name for s in _REGISTRY.values() if self._keep(s)))

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __getitem__(self, i):
        item = list.__getitem__(self, i)
        return tuple(item) if isinstance(i, slice) else item

    def __add__(self, other) -> tuple:
        return tuple(self) + tuple(other)

    def __radd__(self, other) -> tuple:
        return tuple(other) + tuple(self)

    def __eq__(self, other) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, (tuple, list)) else NotImplemented

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __reduce__(self):
        return tuple, (tuple(self),)

    def __repr__(self) -> str:
        return repr(tuple(self))


class _Info(dict):
    """name -> one-line description, kept in step with the registry; read-only."""

    def _sync(self) -> None:
        dict.clear(self)
        dict.update(self, {s.name: s.info for s in _REGISTRY.values()})

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __reduce__(self):
        return dict, (dict(self),)


STRATEGIES = _Names(lambda s: True, "Every registered strategy's name, in order.")
PACKING_STRATEGIES = _Names(lambda s: s.packs, "Strategies whose rows hold several documents.")
COUNT_STRATEGIES = _Names(lambda s: s.from_counts is not None, "Strategies planned from length counts alone.")
ORDER_STRATEGIES = _Names(lambda s: s.from_counts is None, "Strategies that depend on order: planned on a sample.")
STRATEGY_INFO = _Info()
_VIEWS = (STRATEGIES, PACKING_STRATEGIES, COUNT_STRATEGIES, ORDER_STRATEGIES, STRATEGY_INFO)

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
    Strategy("optimal", "Column generation on the length histogram, rounded: the fewest rows found within a "
             "time limit, with its gap to the proven lower bound.", True, O.place_optimal, O.rows_optimal),
):
    register_strategy(_s)
del _s
_sync()
