"""Family verdicts held to the real tiny model: the static verdict and the batch run alone vs packed agree."""
from __future__ import annotations

import numpy as np
import pytest

from packing_core.attention.families import family
from packing_core.check import check_hf_batch
from packing_core.verify.batch_run import run_hf_batch
from packing_core.verify.families_build import build_tiny

LENGTHS = (7, 9, 5)
IDS = [list(range(5, 26))]
POSITIONS = [[p for n in LENGTHS for p in range(n)]]


def block_mask_4d() -> np.ndarray:
    doc = np.repeat(np.arange(len(LENGTHS)), LENGTHS)
    ok = (doc[:, None] == doc[None, :]) & np.tril(np.ones((21, 21), bool))
    return np.where(ok, 0.0, np.finfo(np.float32).min)[None, None].astype(np.float32)


COLLATOR = {"input_ids": IDS, "position_ids": POSITIONS}
MASK_4D = {**COLLATOR, "attention_mask": block_mask_4d()}


def judged_and_run(model_type: str, batch: dict, attn: str = "sdpa"):
    check = check_hf_batch(batch, attn, model_type=model_type)
    model = build_tiny(model_type, attn_implementation=attn)
    return check, run_hf_batch(model, check)


def test_recurrent_gemma_judges_a_collator_batch_without_cu_seq_lens_and_the_run_agrees():
    check, run = judged_and_run("recurrent_gemma", COLLATOR)
    assert not check.sound and "convolution_reads_previous_document" in check.names
    assert run.leaks


def test_bart_with_a_4d_block_mask_leaks_through_its_positions_and_the_run_agrees():
    check, run = judged_and_run("bart", MASK_4D)
    assert "logits_differ_beyond_mixers" in check.names and not check.sound
    assert run.leaks and run.max_abs_diff > 0.1


def test_roberta_with_positions_from_0_differs_from_its_own_numbering_and_the_run_agrees():
    check, run = judged_and_run("roberta", MASK_4D)
    assert "logits_differ_beyond_mixers" in check.names and "padding_idx + 1" in check.errors[-1].detail
    assert run.leaks      # each document alone numbers its positions from padding_idx + 1


def test_bloom_refuses_a_4d_mask_and_the_verdict_says_refused_not_sound():
    check = check_hf_batch(MASK_4D, "eager", model_type="bloom")
    assert ("attention", "REFUSED here") in check.layer_statuses and "attention SOUND" not in check.verdict
    model = build_tiny("bloom", attn_implementation="eager")
    with pytest.raises(ValueError, match="too many values to unpack"):     # BloomModel's own 2D-mask unpacking
        run_hf_batch(model, check)


def test_an_eager_only_family_judged_for_sdpa_says_it_never_runs_sdpa():
    check = check_hf_batch(COLLATOR, "sdpa", model_type="bloom")
    assert "implementation_not_offered" in check.names
    assert family("bloom").attn_implementation == "eager"


@pytest.mark.parametrize("model_type", ["dbrx", "xlm", "roc_bert"])
def test_families_once_listed_as_not_buildable_are_measured(model_type):
    fam = family(model_type)
    assert not fam.not_built and fam.outcome("position_ids", "logits") is not None


def test_reformer_builds_tiny_and_is_named_as_not_measurable_per_layer():
    assert "builds tiny" in family("reformer").not_built
