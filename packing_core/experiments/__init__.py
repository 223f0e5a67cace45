"""The training demo and the attention benchmark.

The public names of ``packing_core.experiments``: ``from packing_core.experiments import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .bench import (
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
    from .bucket_loss import BucketDemo, BucketRun, bucket_loss_demo
    from .estimate import (
        BREAKDOWN_LIMIT_S,
        AttentionRate,
        Estimate,
        attention_rate,
        benchmark_estimate,
        breakdown_estimate,
        docs_within,
        load_warning,
        train_estimate,
    )
    from .machine import Machine, busy_warning, load_average, machine_info
    from .train import SAME_TOPIC, TOKENS_PER_TOPIC, TOPICS, TrainPair, TrainResult, train_demo
    from .warm import (
        WarmStatus,
        cached_pair,
        smollm2_converted,
        train_pair,
        trained_seconds,
        use_lab_threads,
        warm_status,
    )

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
