"""What the zoo's reproductions share: the model, the texts, transformers' collator, the check."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from packing_core.check.batch import check_hf_batch
from packing_core.verify.batch_run import run_hf_batch
from packing_core.verify.zoo._types import ZooResult


@lru_cache(maxsize=1)
def smollm2():
    from packing_core.models.registry import PRETRAINED, model_spec

    return model_spec(PRETRAINED).load()


def texts_documents(tokenizer) -> list[list[int]]:
    from packing_core.verify.registry import DEFAULT_TEXTS, tokenise_texts

    return tokenise_texts(tokenizer, DEFAULT_TEXTS)


def flatten(documents, **kw) -> dict:
    """transformers' own ``DataCollatorWithFlattening``: the padding-free batch as trainers build it."""
    from transformers import DataCollatorWithFlattening

    batch = DataCollatorWithFlattening(return_tensors="np", **kw)([{"input_ids": d} for d in documents])
    return {k: np.asarray(v, dtype=np.int64) if not k.startswith("max_length") else int(v) for k, v in batch.items()}


def caught(check, caught_by) -> bool:
    return any(n in check.names for n in caught_by)


def says(check) -> str:
    return ", ".join(f"{f.name} ({f.severity})" for f in check.errors + check.warnings) or "nothing"


def compare_batches(model, broken: dict, fixed: dict, caught_by, *, use_cache_broken=False) -> ZooResult:
    """Both batches run as given vs each intended document alone, and checked for sdpa."""
    cb = check_hf_batch(broken, "sdpa", use_cache=use_cache_broken)
    cf = check_hf_batch(fixed, "sdpa")
    vb = run_hf_batch(model, cb, use_cache=use_cache_broken)
    vf = run_hf_batch(model, cf)
    return ZooResult(
        name="", symptom=f"max |dlogit| {vb.max_abs_diff:.2f} vs each document alone; {vb.changed_top1} top-1 "
                         "predictions changed", fixed=f"max |dlogit| {vf.max_abs_diff:.1e}",
        broken_max_abs_diff=vb.max_abs_diff, fixed_max_abs_diff=vf.max_abs_diff,
        changed_predictions=vb.changed_top1, caught=caught(cb, caught_by), silent_on_fix=not caught(cf, caught_by),
        check_says=says(cb))
