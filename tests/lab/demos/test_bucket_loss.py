"""Bucketing's visible symptom, on the tiny model: the same documents, the same steps, a swinging loss."""
import numpy as np
import pytest

from packing_core import InputError
from packing_lab.demos import bucket_loss_demo


@pytest.fixture(scope="module")
def demo():
    return bucket_loss_demo(steps=60, seed=0)


def test_bucketed_batches_swing_with_their_documents_length(demo):
    b, s = demo.bucketed, demo.shuffled
    assert len(b.losses) == len(s.losses) == 60
    assert b.swing > 2 * s.swing                         # the symptom: step-to-step swings
    assert demo.length_correlation < -0.5                # short documents, higher loss
    # random batches all look alike; bucketed ones come from a few length ranges
    assert np.std(s.mean_length) < 0.5 * np.std(b.mean_length)
    assert f"{b.swing:.2f} nats" in demo.sentence and f"{demo.length_correlation:.2f}" in demo.sentence


def test_a_token_mean_per_batch_gives_short_document_batches_more_weight_per_token(demo):
    """The review's M4: nothing measures "what is learned"; the weighting is measured instead."""
    assert "no change in what is learned" not in demo.sentence
    for run in (demo.bucketed, demo.shuffled):   # each document's last token predicts nothing: len - 1 targets each
        assert np.allclose(run.trained, 32 * (np.asarray(run.mean_length) - 1))
    length, trained = np.asarray(demo.bucketed.mean_length), np.asarray(demo.bucketed.trained, dtype=float)
    short = trained[length <= np.quantile(length, 0.25)]
    assert demo.short_token_weight == pytest.approx(np.mean(demo.shuffled.trained) / short.mean())
    assert demo.short_token_weight > 1.2                  # short batches' tokens weigh more per token
    assert f"weighs {demo.short_token_weight:.1f}x what it weighs in a random batch" in demo.sentence


def test_both_runs_learn_the_same_data(demo):
    first, last = (slice(0, 10), slice(-20, None))
    for run in (demo.bucketed, demo.shuffled):
        assert np.mean(run.losses[last]) < np.mean(run.losses[first]) - 0.5    # the loss falls in both
    assert sorted(demo.bucketed.mean_length) != sorted(demo.shuffled.mean_length)


def test_the_same_seed_gives_the_same_losses():
    a, b = bucket_loss_demo(steps=8, seed=3), bucket_loss_demo(steps=8, seed=3)
    assert a.bucketed.losses == b.bucketed.losses and a.shuffled.losses == b.shuffled.losses


def test_too_few_steps_are_refused():
    with pytest.raises(InputError, match="steps"):
        bucket_loss_demo(steps=2)
