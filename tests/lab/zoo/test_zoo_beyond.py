"""The zoo's family beyond attention: each layer's own output shows where the previous document gets in."""
import numpy as np
import pytest

from packing_lab.viz import zoo_figures
from packing_lab.zoo import reproduce_bug, zoo_entry
from packing_lab.zoo.beyond import _DOCS, _model

STARTS = np.cumsum([0, *map(len, _DOCS)])     # 0, 7, 16, 21: where each document starts in the packed row


def first_tokens(n: int) -> set[int]:
    """The first ``n`` positions of every document after the first."""
    return {int(s) + i for s in STARTS[1:-1] for i in range(n)}


def differs(row, above=1e-3) -> set[int]:
    return set(np.flatnonzero(np.asarray(row) > above).tolist())


def test_qwen3_next_its_convolution_reads_3_tokens_back_and_its_recurrence_further():
    r = reproduce_bug("recurrent-state-crosses")
    conv, rec = r.broken_layer_diffs
    kernel = _model("qwen3_next").config.linear_conv_kernel_dim            # 4: it reads 3 tokens back
    assert r.layer_kinds == ("convolution", "recurrence") and differs(conv) == first_tokens(kernel - 1)
    assert differs(rec, 1e-4) > first_tokens(kernel - 1)                 # the state carries past the conv's reach
    assert np.abs(r.broken_layer_diffs[:, :STARTS[1]]).max() < 1e-6      # the first document reads nothing earlier
    assert r.fixed_layer_diffs.max() < 1e-6 and r.caught and r.silent_on_fix


def test_lfm2_its_convolution_reads_its_kernel_width_minus_one():
    r = reproduce_bug("short-conv-bleeds")
    kernel = _model("lfm2").config.conv_L_cache                         # 3 in LFM2's config: 2 tokens back
    assert r.layer_kinds == ("convolution",) and differs(r.broken_layer_diffs[0]) == first_tokens(kernel - 1)
    assert r.broken_max_abs_diff > 0.1 and "convolution_reads_previous_document" in r.check_says


def test_offsets_from_an_all_ones_mask_leak_only_through_the_layer_that_reads_them():
    r = reproduce_bug("boundaries-from-attention-mask")
    attention, conv, rec = r.broken_layer_diffs
    assert attention.max() == 0.0 and conv.max() == 0.0                  # given the right boundaries: exact
    assert differs(rec) == set(range(STARTS[1], STARTS[-1]))              # the state runs into every later token
    assert r.fixed_layer_diffs.max() == 0.0 and "[0, 21]" in r.symptom


def test_a_missing_causal_flag_is_equivalent_alone_vs_packed_and_caught_by_causality():
    r = reproduce_bug("varlen-without-causal")
    assert r.symptom.startswith("alone vs packed: EQUIVALENT (max |dlogit| 0.0e+00)")
    assert r.caught and r.silent_on_fix and zoo_entry("varlen-without-causal").caught_by == ("future_visible",)


@pytest.mark.parametrize("name", ["short-conv-bleeds", "boundaries-from-attention-mask"])
def test_the_figure_draws_one_panel_per_layer_kind(name):
    r = reproduce_bug(name)
    figures = zoo_figures(r)
    assert list(figures) == ["logits", "layers"]
    texts = [a.text.replace("<br>", " ") for a in figures["layers"].layout.annotations]    # titles wrap for projectors
    panels = [t for t in texts if "position(s) differ" in t]
    assert [p.split(":")[0] for p in panels] == list(r.layer_kinds)
