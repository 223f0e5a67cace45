"""The lab's live demos: the training pair (mask on and off) and its cache, the bucketing demo,
the loss-weight lesson, the time estimates (a cold server's waits among them), a packed row over
context-parallel ranks, and ``warm``
(everything a class needs, done before it).

The public names of ``packing_lab.demos``; they load on first use (see ``packing_core._lazy``).
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .bucket_loss import BucketDemo, BucketRun, bucket_loss_demo
    from .cold import WAITS, convert_smollm2, record_cold, tokenizer_extracted
    from .context_parallel import CP_SCHEMES, CPLesson, cp_dataset_rows, cp_lesson, one_document_work
    from .estimate import (
        BREAKDOWN_LIMIT_S,
        AttentionRate,
        Estimate,
        attention_rate,
        benchmark_estimate,
        breakdown_estimate,
        cold_estimate,
        docs_within,
        load_warning,
        train_estimate,
    )
    from .lesson_weights import LossLesson, loss_lesson
    from .train import SAME_TOPIC, TOKENS_PER_TOPIC, TOPICS, TrainPair, TrainResult, train_demo
    from .warm import (
        WarmStatus,
        cached_pair,
        smollm2_converted,
        train_pair,
        trained_seconds,
        use_lab_threads,
        warm_server,
        warm_status,
    )

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
