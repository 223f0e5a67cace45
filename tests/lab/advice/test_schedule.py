"""Packing changes the schedule: steps per epoch, tokens per step and a warmup in steps, from the plans."""
import math

import numpy as np
import pytest

from packing_core import InputError, make_plan
from packing_core.data import load_lengths
from packing_lab.advice import compare_schedules, epoch_schedule, lr_by_tokens


@pytest.fixture(scope="module")
def tickets():
    lengths = load_lengths("support-tickets")
    return make_plan(lengths, 512, "pad").metrics(), make_plan(lengths, 512, "bfd").metrics()


def test_packing_the_tickets_multiplies_the_tokens_per_step_by_the_row_ratio(tickets):
    pad, bfd = tickets
    c = compare_schedules(pad, bfd, rows_per_step=64, warmup_steps=500)
    assert (pad.rows, bfd.rows) == (201_320, 44_589)                         # TEACHING 2's rows
    assert c.padded.steps_per_epoch == math.ceil(201_320 / 64) == 3_146
    assert c.packed.steps_per_epoch == math.ceil(44_589 / 64) == 697
    assert c.padded.tokens_per_step == pytest.approx(pad.real_tokens / 3_146)
    assert c.packed.tokens_per_step / c.padded.tokens_per_step == pytest.approx(3_146 / 697)
    assert f"{c.row_ratio:.1f}" == "4.5" and c.row_ratio == pytest.approx(pad.rows / bfd.rows)   # TEACHING 30
    assert c.packed.warmup_share == pytest.approx(500 / 697) and c.padded.warmup_share == pytest.approx(500 / 3_146)
    assert c.hold_rows_per_step == round(64 / c.row_ratio) == 14
    assert c.hold_warmup_steps * c.packed.tokens_per_step >= 500 * c.padded.tokens_per_step
    assert "4.5x the tokens per step" in c.sentence and "14 packed rows per step" in c.sentence


def test_a_warmup_in_steps_covers_the_tokens_of_those_steps(tickets):
    pad, _ = tickets
    s = epoch_schedule(pad, 32, warmup_steps=100)
    assert s.warmup_tokens == pytest.approx(100 * pad.real_tokens / math.ceil(pad.rows / 32))
    tokens, lr = lr_by_tokens(s, points=11)
    assert tokens[-1] == pytest.approx(pad.real_tokens, rel=1e-9) and lr[0] == 0 and lr[-1] == pytest.approx(0)
    assert np.all(lr <= 1 + 1e-12)


def test_a_schedule_refuses_nonsense():
    m = make_plan([10, 20], 64, "bfd").metrics()
    with pytest.raises(InputError, match="rows_per_step"):
        epoch_schedule(m, 0)
    with pytest.raises(InputError, match="warmup_steps"):
        epoch_schedule(m, 4, warmup_steps=-1)
