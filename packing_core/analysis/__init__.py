"""Length statistics, strategy tables, recommendations and batch composition.

The public names of ``packing_core.analysis``: ``from packing_core.analysis import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .balance_report import step_balance, step_verdict
    from .columns import KEY_TITLES, basis_note, column_help, strategy_frame, table_notes
    from .costs import BOUND_LABELS, CONVENTION_NOTE, HALVES, attention_cells, benchmark_bounds, end_to_end, halved_bound
    from .profile_report import (
        describe_profile,
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
    )
    from .quality import CAP_LADDER, STREAM_SAMPLE, cap_sentence, plan_bound, stream_price
    from .shapes import MODEL_SHAPES
    from .stats import length_histogram, length_stats, outlier_lengths, sample_lengths
    from .tables import describe_padding, recommended_settings
    from .trainer_advice import FRAMEWORKS

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
