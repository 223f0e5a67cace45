"""Lengths -> Plan: the strategies and their metrics (numpy only).

The public names of ``packing_core.packing``: ``from packing_core.packing import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .balance import BalanceReport, RankSplit, balance_rows, row_loads
    from .bounds import Bounds, RowBound, bound_for, bounds_from_counts, bounds_from_lengths, l1_bound, l2_bound
    from .from_counts import (
        CapPrice,
        CountPlan,
        cap_price,
        cap_prices,
        compare_counts,
        plan_from_counts,
        sampled_plan,
    )
    from .optimal import Certificate, OptimalSolution, lp_bound, optimal_from_counts
    from .options import DEFAULT_TIME_LIMIT, PlanOptions
    from .pieces import piece_count, piece_histogram
    from .plan import Plan, PlanMetrics, cu_seqlens_from_lengths, static_cu_seqlens
    from .registry import (
        PACKING_STRATEGIES,
        STRATEGIES,
        STRATEGY_INFO,
        Strategy,
        register_strategy,
        unregister_strategy,
    )
    from .strategies import OVERLONG_POLICIES, compare, make_plan
    from .stream import TRL_WINDOW, BufferCurve, StreamPacker, StreamState, buffer_curve, windowed_plan
    from .trace import MAX_TRACE_PIECES, TRACE_STRATEGIES, PlanTrace, TraceStep, plan_trace

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
