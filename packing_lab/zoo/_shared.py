"""What the zoo's reproductions share: the model, the texts, transformers' collator, the check."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from packing_core.check.batch import check_hf_batch
from packing_core.verify.batch_run import run_hf_batch
from packing_lab.zoo._types import ZooResult


@lru_cache(maxsize=1)
def smollm2():
    from packing_core.models.registry import PRETRAINED, model_spec

    return model_spec(PRETRAINED).load()


def texts_documents(tokenizer) -> list[list[int]]:
    from packing_core.models.registry import DEFAULT_TEXTS
    from packing_core.verify.texts import tokenise_texts

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


def token_texts(tokenizer, ids) -> tuple[str, ...]:
    """Each token id as the text it decodes to (a row of a few dozen tokens, for a figure's cells)."""
    return tuple(tokenizer.decode([int(i)]) for i in ids)


def compare_batches(model, broken: dict, fixed: dict, caught_by, *, use_cache_broken=False,
                    tokenizer=None) -> ZooResult:
    """Both batches run as given vs each intended document alone, and checked for sdpa.

    Its figure's arrays come from the same runs and checks: the per-token logit differences of
    row 0, and the keys each query reads there under sdpa, broken and fixed.
    """
    cb = check_hf_batch(broken, "sdpa", use_cache=use_cache_broken)
    cf = check_hf_batch(fixed, "sdpa")
    vb = run_hf_batch(model, cb, use_cache=use_cache_broken)
    vf = run_hf_batch(model, cf)
    ids = broken["input_ids"][0]
    return ZooResult(
        name="", symptom=f"max |dlogit| {vb.max_abs_diff:.2f} vs each document alone; {vb.changed_top1} top-1 "
                         "predictions changed", fixed=f"max |dlogit| {vf.max_abs_diff:.1e}",
        broken_max_abs_diff=vb.max_abs_diff, fixed_max_abs_diff=vf.max_abs_diff,
        changed_predictions=vb.changed_top1, caught=caught(cb, caught_by), silent_on_fix=not caught(cf, caught_by),
        check_says=says(cb), document_ids=cb.row_document_ids[0],
        input_ids=ids, tokens=token_texts(tokenizer, ids) if tokenizer is not None else tuple(map(str, ids)),
        tolerance=vb.tolerance, broken_token_diffs=vb.token_diffs[0], fixed_token_diffs=vf.token_diffs[0],
        broken_mask=cb.effective.allowed(0), fixed_mask=cf.effective.allowed(0))


def report_arrays(broken, fixed, *, ids=None, tokens=(), masks: bool = True) -> dict:
    """A figure's arrays from two alone-vs-packed reports (``VerifyReport``) of the same documents.

    The row's documents come from ``fixed.cu_seqlens``. With ``masks``, the broken run's packed
    row had no document mask (``mask="off"``: one causal triangle over the row) and the fixed
    run the block-diagonal one, as ``verify_runner`` builds them.
    """
    from packing_core.attention.masks import block_causal_mask

    cu = np.asarray(fixed.cu_seqlens, dtype=np.int64)
    T = int(cu[-1])
    out = dict(document_ids=np.repeat(np.arange(len(cu) - 1), np.diff(cu)), tokens=tuple(tokens),
               input_ids=None if ids is None else np.asarray(ids, dtype=np.int64),
               tolerance=fixed.tolerance, broken_token_diffs=np.asarray(broken.token_diffs, dtype=np.float64),
               fixed_token_diffs=np.asarray(fixed.token_diffs, dtype=np.float64))
    if masks:
        out.update(broken_mask=block_causal_mask(np.array([0, T])).numpy(),
                   fixed_mask=block_causal_mask(cu).numpy())
    return out
