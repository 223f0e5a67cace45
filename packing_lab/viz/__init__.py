"""Plotly figure builders: pure functions from plans, batches and reports to figures.

The public names of ``packing_lab.viz``: ``from packing_lab.viz import ...``. They load on first
use; the imports below are what editors and type checkers read (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .balance import balance_figure
    from .batch_check import hf_batch_figure
    from .context_parallel import cp_balance_figure, cp_cut_figure, ring_steps_figure
    from .mixers import hybrid_leak_figure, layer_diff_figure
    from .plans import (
        benchmark_figure,
        bills_figure,
        length_histogram_figure,
        mixture_figure,
        plan_grid,
        plan_strip,
        row_order_figure,
        slot_use_figure,
        strategy_figure,
    )
    from .rows import layout_figure, logit_diff_figure, mask_figure, targets_figure
    from .schedule import bucket_loss_figure, max_seqlen_figure, positions_figure, schedule_figure
    from .stream import buffer_curve_figure
    from .style import (
        ALERT_COLOUR,
        DELTA_COLOURS,
        FIXED_COLOUR,
        LEAK_COLOUR,
        PACKED_COLOUR,
        PAD_COLOUR,
        PADDED_COLOUR,
        PALETTE,
        REFERENCE_COLOUR,
        ROLES,
        doc_colour,
    )
    from .tiles import tile_figure
    from .trace import trace_figure
    from .training import loss_curves_figure
    from .zoo import zoo_figures

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
