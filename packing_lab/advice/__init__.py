"""What the lab teaches beside the library's numbers: the cheatsheet, loss weights, schedules,
batch composition, the longest documents, kernel footprints and a one-layer isolation check.

The public names of ``packing_lab.advice``; they load on first use (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .cheatsheet import CHEATSHEET_FINDINGS, Fact, cheatsheet_facts, cheatsheet_html, cheatsheet_markdown
    from .composition import (
        RowOrder,
        SourceMixture,
        batch_cu_seqlens,
        mixture_orders,
        mixture_sentence,
        row_cu_seqlens,
        row_order,
        source_mixture,
    )
    from .examples import bounds_example, guarantee_sentence, max_seqlen_lesson, static_example
    from .first_token import DocumentStart, document_starts, document_starts_here
    from .footprints import KernelFootprint, kernel_footprints
    from .isolation import AttentionCheck, alone_vs_packed_attention
    from .longest import LongestShare, TrainedPositions, longest_share, trained_positions
    from .loss_weights import (
        AVERAGING_RULES,
        PRESETS,
        LossPreset,
        LossWeights,
        dpo_pair_gradients,
        pair_gradient,
        parse_layout,
        step_loss_weights,
    )
    from .masks import MicroBatchMasks, PaddingFree, micro_batch_masks, padding_free_example
    from .releases import same_batch_by_release
    from .schedule import Schedule, ScheduleComparison, compare_schedules, epoch_schedule, lr_by_tokens

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
