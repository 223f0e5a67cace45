"""Length statistics, strategy tables, recommendations and batch composition.

The public names of ``packing_core.analysis``: ``from packing_core.analysis import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .balance_report import (
        ATTENTION_HEAVY,
        StepBalance,
        balance_verdict,
        format_balance,
        slowest_rank_cut,
        step_balance,
        step_verdict,
    )
    from .columns import (
        COLUMNS,
        KEY_TITLES,
        Column,
        basis_note,
        column_help,
        format_strategy_table,
        strategy_frame,
        table_notes,
    )
    from .costs import (
        ATTENTION_KERNELS,
        BOUND_LABELS,
        CONVENTION,
        CONVENTION_NOTE,
        COST_FORMULA,
        FULL,
        HALVES,
        AttentionKernel,
        EndToEnd,
        KernelCost,
        attention_cells,
        attention_share,
        benchmark_bounds,
        end_to_end,
        halved_bound,
        kernel_costs,
        own_kernel,
        plan_tiles,
        tiled_cells,
        training_flops,
    )
    from .profile_report import (
        REPORT_VERSION,
        Headline,
        describe_profile,
        format_profile_report,
        headline,
        loss_masked,
        order_basis,
        order_effects,
        profile_headline,
        profile_histogram,
        profile_rows,
        profile_sample,
        profile_stats,
        profile_table,
        report_dict,
        strategy_entry,
    )
    from .quality import (
        CAP_LADDER,
        STREAM_SAMPLE,
        OptimalGap,
        StreamPrice,
        bound_sentence,
        bounds_example,
        cap_sentence,
        describe_bounds,
        optimal_gap,
        plan_bound,
        static_example,
        stream_price,
        table_gap,
    )
    from .shapes import MODEL_SHAPES, ModelShape, llama_shape, model_shape
    from .stats import Histogram, LengthStats, length_histogram, length_stats, outlier_lengths, sample_lengths
    from .tables import (
        StrategyRow,
        attention_cost,
        bimodality,
        describe_padding,
        first_run,
        recommend,
        recommended_settings,
        strategy_table,
    )
    from .trainer_advice import FRAMEWORKS, TrainerSettings, settings_markdown, trainer_settings

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
