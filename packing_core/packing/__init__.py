"""Lengths -> Plan: the strategies and their metrics (numpy only).

The public names of ``packing_core.packing``: ``from packing_core.packing import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .bounds import bounds_from_counts
    from .from_counts import cap_prices, plan_from_counts
    from .optimal import optimal_from_counts
    from .options import PlanOptions
    from .pieces import piece_count, piece_histogram
    from .plan import cu_seqlens_from_lengths
    from .registry import STRATEGIES, STRATEGY_INFO
    from .strategies import OVERLONG_POLICIES, compare, make_plan
    from .stream import TRL_WINDOW
    from .trace import TRACE_STRATEGIES, plan_trace

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
