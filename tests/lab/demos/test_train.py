"""The mask-off training demo: the bug trains, looks better in the log, and is worse alone."""
import math

import numpy as np
import pytest

from packing_lab.demos import TOPICS, TrainResult, train_demo
from packing_lab.demos.train import BOS_ID, FINAL_WINDOW, sample_documents, successor_table, topic_of
from packing_lab.viz import FIXED_COLOUR, LEAK_COLOUR, loss_curves_figure
from packing_lab.viz.training import trailing_mean


@pytest.fixture(scope="module")
def runs() -> tuple[TrainResult, TrainResult]:
    return train_demo("on", seed=0), train_demo("off", seed=0)


@pytest.fixture(scope="module")
def independent() -> tuple[TrainResult, TrainResult]:
    """The control: a neighbour shares the topic only by chance (1 in TOPICS)."""
    return train_demo("on", seed=0, same_topic=1 / TOPICS), train_demo("off", seed=0, same_topic=1 / TOPICS)


# ---------------------------------------------------------------- the data
def test_topic_of_maps_ids_to_topics_and_special_tokens_to_minus_one():
    assert topic_of([0, 1, 2, 7, 8, 49]).tolist() == [-1, -1, 0, 0, 1, 7]


def test_every_document_starts_with_bos_and_stays_on_one_topic():
    docs = sample_documents(500, successor_table(0), np.random.default_rng(0))
    starts = np.concatenate([[0], np.cumsum(docs.lengths)[:-1]])
    assert (docs.tokens[starts] == BOS_ID).all() and (docs.tokens == BOS_ID).sum() == 500
    topic = topic_of(docs.tokens)
    owner = np.repeat(docs.topics, docs.lengths)
    body = docs.tokens != BOS_ID
    assert (topic[body] == owner[body]).all()


def test_neighbours_share_a_topic_as_often_as_asked():
    for share in (0.9, 0.2):
        docs = sample_documents(20_000, successor_table(0), np.random.default_rng(1), same_topic=share)
        assert abs(np.mean(docs.topics[1:] == docs.topics[:-1]) - share) < 0.02


# ---------------------------------------------------------------- the training runs
def test_the_loss_falls_in_both_runs_and_never_turns_nan(runs):
    for r in runs:
        assert len(r.losses) == r.steps == 150
        assert all(math.isfinite(x) for x in r.losses)
        assert r.train_loss < 0.6 * r.start_loss, (r.mask, r.start_loss, r.train_loss)


def test_the_mask_off_run_ends_with_the_lower_training_loss(runs):
    on, off = runs
    assert off.train_loss < on.train_loss - 0.1, (on.train_loss, off.train_loss)


def test_run_alone_the_mask_off_model_is_worse(runs):
    on, off = runs
    assert off.alone_loss > on.alone_loss + 0.02, (on.alone_loss, off.alone_loss)


def test_packed_validation_flatters_the_bug_and_matches_alone_with_the_mask_on(runs):
    on, off = runs
    assert abs(on.packed_loss - on.alone_loss) < 0.02     # only documents cut at row edges differ
    assert off.packed_loss < off.alone_loss - 0.1
    assert off.packed_loss < on.packed_loss


def test_with_the_previous_document_visible_both_models_drift_so_drift_alone_does_not_convict(runs):
    on, off = runs
    assert on.drift_cases == off.drift_cases > 100        # same held-out data, same condition for both runs
    assert off.drift_share > 0.6
    assert on.drift_share > 3 / TOPICS                    # far above a blind guess (1 in 8): it drifts too
    assert off.visible_loss < on.visible_loss             # reading neighbours is what the bug learned to use


def test_with_independent_neighbours_the_leak_buys_no_training_loss(independent):
    on, off = independent
    assert abs(off.train_loss - on.train_loss) < 0.03, (on.train_loss, off.train_loss)
    assert off.alone_loss >= on.alone_loss - 0.01


def test_the_same_seed_gives_the_same_losses_and_another_seed_does_not():
    a, b = train_demo("off", steps=2 * FINAL_WINDOW, seed=3), train_demo("off", steps=2 * FINAL_WINDOW, seed=3)
    assert a.losses == b.losses and a.alone_loss == b.alone_loss and a.drift_share == b.drift_share
    assert train_demo("off", steps=2 * FINAL_WINDOW, seed=4).losses != a.losses


@pytest.mark.parametrize("kwargs,fragment", [
    (dict(mask="maybe"), "'on' or 'off'"),
    (dict(steps=5), "steps must be at least"),
    (dict(same_topic=1.5), "[0, 1]"),
])
def test_bad_arguments_say_what_is_wrong_and_how_to_fix_it(kwargs, fragment):
    with pytest.raises(ValueError) as e:
        train_demo(**kwargs)
    assert fragment in str(e.value)


# ---------------------------------------------------------------- the figure
def test_trailing_mean_averages_the_last_steps():
    assert trailing_mean([4, 2, 3, 1], 2).tolist() == [4, 3, 2.5, 2]


def test_loss_curves_draw_each_run_in_its_colour_with_its_alone_line(runs):
    fig = loss_curves_figure(runs, smooth=10)
    assert len(fig.data) == 6
    for r, colour in zip(runs, (FIXED_COLOUR, LEAK_COLOUR)):
        traces = [t for t in fig.data if t.legendgroup == r.mask]
        assert {t.line.color for t in traces} == {colour}
        raw, smooth, alone = traces
        assert list(raw.y) == list(r.losses)
        assert smooth.y[-1] == pytest.approx(np.mean(r.losses[-10:]))
        assert alone.line.dash == "dash" and list(alone.y) == [r.alone_loss] * 2
        assert list(alone.x) == [1, r.steps]
    low, high = fig.layout.yaxis.range          # zoomed, but never past the numbers compared
    shown = [x for r in runs for x in (r.alone_loss, np.mean(r.losses[-10:]))]
    assert low < min(shown) and max(shown) < high < max(runs[0].losses)


def test_loss_curves_refuse_an_empty_list_and_an_unknown_mask():
    with pytest.raises(ValueError, match="train_demo"):
        loss_curves_figure([])
    bogus = TrainResult(mask="sideways", seed=0, steps=1, same_topic=0.9, losses=(1.0,), train_loss=1.0,
                        packed_loss=1.0, alone_loss=1.0, visible_loss=1.0, drift_share=0.0, drift_cases=0,
                        seconds=0.0)
    with pytest.raises(ValueError, match="sideways"):
        loss_curves_figure([bogus])
