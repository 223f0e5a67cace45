"""Packing Lab's library: understand, measure and check sequence packing.

The public API is this module's ``__all__``; pages, benchmarks and scripts use only it.
Names load on first use, so ``from packing_core import make_plan`` costs numpy alone,
and torch or transformers load only with the names that need them::

    >>> from packing_core import make_plan
    >>> make_plan([120, 90, 300, 40, 55, 30, 210, 65], 512, "concat-cut").metrics().utilisation
    0.888671875

The layers, each importing only from those before it (a test checks the graph):
data -> packing -> batch -> attention -> check -> models -> verify -> integrations / analysis /
experiments -> viz -> cli.
"""
from __future__ import annotations

import importlib

# name -> the module that defines it
_EXPORTS: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _EXPORTS[name] = f"packing_core.{module}"


_export("_validate", "DEFAULT_CONTEXT", "LIMITS", "Mask", "Positions")
_export("_settings", "cache_dir", "models_dir", "model_dirs", "ReadBudget", "read_budget")
_export("data.lengths", "SYNTHETIC", "Tokenizer", "as_lengths", "byte_tokenizer", "describe_columns",
        "lengths_from_file", "parse_lengths", "synthetic_lengths", "texts_from_file")
_export("data.sources", "Document", "SourceInfo", "list_sources", "load_documents", "load_lengths")
_export("data.profile", "LengthProfile")
_export("data.formats", "RECORD_KINDS", "detect_kind")
_export("data.shards", "find_shards")
_export("data.scan", "ENGINES", "ScanProgress", "scan")
_export("packing.from_counts", "CountPlan", "compare_counts", "plan_from_counts", "sampled_plan")
_export("packing.balance", "BalanceReport", "RankSplit", "balance_rows", "row_loads")
_export("analysis.balance_report", "balance_verdict", "format_balance", "slowest_rank_cut")
_export("viz.balance", "balance_figure")
_export("models.tokenizers", "BUILTIN_TOKENIZERS", "ByteLevelCounter", "HFTokenizer", "TOKENIZER_CHOICES", "check_tokenizer",
        "default_tokenizer", "load_tokenizer", "real_tokenizer", "tokenizer_choices")
_export("models.registry", "DEFAULT_MODEL", "DEFAULT_TEXTS", "PRETRAINED", "ModelSpec", "find_model", "model_names",
        "model_spec", "model_specs", "register_model", "unregister_model")
_export("analysis.profile_report", "REPORT_VERSION", "Headline", "format_profile_report", "headline", "loss_masked",
        "order_effects", "profile_headline", "profile_histogram", "profile_rows", "profile_stats", "profile_table",
        "report_dict")
_export("data.intake", "UPLOAD_TYPES", "looks_like_profile", "profile_from_inputs", "profile_from_upload")
_export("packing.plan", "Plan", "PlanMetrics", "cu_seqlens_from_lengths")
_export("packing.strategies", "OVERLONG_POLICIES", "compare", "make_plan")
_export("packing.registry", "PACKING_STRATEGIES", "STRATEGIES", "STRATEGY_INFO", "Strategy", "register_strategy",
        "unregister_strategy")
_export("batch.packed", "IGNORE_INDEX", "FlatBatch", "PackedBatch", "SegmentLayout", "segment_layout")
_export("batch.loss", "LOSS_RULES", "document_weights", "reduce_loss", "token_weights")
_export("attention.masks", "and_masks", "block_causal_mask", "causal", "materialise", "same_document")
_export("attention.backends", "BACKENDS", "attend", "available_backends", "varlen_function")
_export("attention.semantics", "IMPLEMENTATIONS", "READERS", "BatchTensors", "EffectiveAttention",
        "effective_attention")
_export("attention.documents", "IntendedDocuments", "intended_documents")
_export("check.rules", "RULES", "SEVERITIES", "Finding", "Rule")
_export("check.batch", "BatchCheck", "batch_tensors", "check_all_implementations", "check_batch", "check_hf_batch",
        "kernel_mask")
_export("check.files", "SAVE_HINT", "load_batch_bytes", "load_batch_file", "save_batch_file")
_export("attention.tiles", "BOUND_LABELS", "DEFAULT_TILE", "TileSpans", "tile_spans")
_export("attention.flex", "block_mask_from_cu", "compile_records", "flex_unavailable")
_export("models.tiny", "MODELS", "TinyConfig", "TinyTransformer", "tiny_model")
_export("models.hf_attention", "ATTN_IMPLEMENTATIONS", "HF_IMPLEMENTATIONS", "hf_runner", "register_attention")
_export("models.pretrained", "load_pretrained", "pretrained_status", "load_local_model")
_export("verify.equivalence", "DEFAULT_LENGTHS", "DocumentResult", "TokenChange", "VerifyReport", "default_documents",
        "default_tolerance", "model_runner", "verify_runner")
_export("verify.registry", "PRETRAINED_MODELS", "verify_hf", "verify_model", "verify_pretrained",
        "MAX_TEXTS", "MAX_TEXT_TOKENS", "MIN_TEXTS", "is_model_path", "load_causal_lm", "read_texts_file",
        "tokenise_texts", "drift_pretrained", "drift_path")
_export("verify.batch_run", "BatchVerdict", "run_hf_batch")
_export("integrations.guard", "Guard", "PackingCheckError", "guard")
_export("integrations.trainer", "PackingCheckCallback")
_export("verify.drift", "Continuations", "continuations")
_export("verify.loss_lesson", "LossLesson", "loss_lesson")
_export("verify.zoo", "BREAKS", "PLANTED", "REPRODUCED", "ZOO", "ZOO_NAMES", "Bug", "NaiveTargets", "PromptBlindBatch",
        "ZooResult", "broken_batch", "example_checks", "loss_vs_answers", "naive_targets", "reproduce_bug",
        "zoo_entry")
_export("analysis.stats", "Histogram", "LengthStats", "length_histogram", "length_stats", "outlier_lengths",
        "sample_lengths")
_export("analysis.tables", "StrategyRow", "attention_cost", "bimodality", "recommend", "strategy_table")
_export("analysis.costs", "COST_FORMULA", "EndToEnd", "MODEL_SHAPES", "ModelShape", "attention_cells",
        "benchmark_bounds", "end_to_end", "training_flops")
_export("analysis.costs", "BOUND_LABELS", "KernelFootprint", "kernel_footprints", "plan_tiles", "tiled_cells")
_export("analysis.composition", "RowOrder", "batch_cu_seqlens", "row_cu_seqlens", "row_order")
_export("analysis.isolation", "AttentionCheck", "alone_vs_packed_attention")
_export("experiments.train", "SAME_TOPIC", "TOKENS_PER_TOPIC", "TOPICS", "TrainResult", "train_demo")
_export("experiments.warm", "WarmStatus", "smollm2_converted", "train_pair", "use_lab_threads", "warm", "warm_status")
_export("experiments.bench", "BackendTiming", "BenchmarkResult", "Timing", "format_benchmark", "format_breakdown",
        "run_benchmark", "segments_breakdown")
_export("experiments.bench", "PACKED_BACKENDS", "busy_warning", "describe_breakdown")
_export("viz.style", "ALERT_COLOUR", "DELTA_COLOURS", "FIXED_COLOUR", "LEAK_COLOUR", "PACKED_COLOUR", "PADDED_COLOUR",
        "PALETTE", "PAD_COLOUR", "REFERENCE_COLOUR", "ROLES", "doc_colour")
_export("viz.plans", "benchmark_figure", "length_histogram_figure", "plan_grid", "plan_strip", "row_order_figure",
        "slot_use_figure", "strategy_figure")
_export("viz.rows", "layout_figure", "logit_diff_figure", "mask_figure", "targets_figure")
_export("viz.batch_check", "hf_batch_figure")
_export("viz.tiles", "tile_figure")
_export("viz.training", "loss_curves_figure")

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'packing_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value   # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
