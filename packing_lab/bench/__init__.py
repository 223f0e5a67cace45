"""The attention benchmark: plans, timings against each kernel's own bound, where the time goes,
and the machine it ran on.

The public names of ``packing_lab.bench``; they load on first use (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .attention import (
        PACKED_BACKENDS,
        BackendTiming,
        BenchmarkConfig,
        BenchmarkPlans,
        BenchmarkResult,
        PlanCost,
        Timing,
        format_benchmark,
        run_benchmark,
    )
    from .breakdown import Breakdown, Stage, describe_breakdown, format_breakdown, segments_breakdown
    from .machine import Machine, busy_warning, load_average, machine_info

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
