"""The bug zoo: every entry reproduces, the lab's check catches it, and stays silent on the fix."""
import io
import json
import re

import numpy as np
import pytest

from packing_core.batch import LOSS_RULES
from packing_core.models import pretrained_status
from packing_lab.cli import main
from packing_lab.demos import loss_lesson
from packing_lab.zoo import REPRODUCED, ZOO, ZOO_NAMES, reproduce_bug
from tests._support import skip_or_fail

NEEDS_SMOLLM2 = {"mask-hides-packing", "cache-hides-packing", "positions-without-mask", "labels-over-row",
                 "pads-at-position-zero", "positions-not-padded"}


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def test_the_zoo_has_at_least_eight_cited_entries_with_a_fix():
    assert len(ZOO) >= 8 and len(set(ZOO_NAMES)) == len(ZOO)
    for bug in ZOO:
        assert bug.planted or bug.reported, bug.name
        assert all("/" in r and "#" in r or ".py" in r for r in bug.reported), bug.name
        assert bug.what and bug.fix and bug.needs and bug.run


@pytest.mark.parametrize("name", REPRODUCED)
def test_each_bug_reproduces_is_caught_and_the_fix_is_clean(name):
    if name in NEEDS_SMOLLM2 and not pretrained_status()[0]:
        skip_or_fail("SmolLM2 is not installed")
    r = reproduce_bug(name)
    assert r.name == name and r.caught and r.silent_on_fix, r
    if r.broken_max_abs_diff is not None:          # a leak: whole logits apart, the fix within rounding
        assert r.broken_max_abs_diff > 0.1 and r.fixed_max_abs_diff < 1e-3
    assert_arrays_agree_with_the_sentences(r)
    json.dumps(r.to_dict())                        # the CLI's --format json carries the arrays too


def assert_arrays_agree_with_the_sentences(r):
    """The figure's arrays and the result's numbers and words come from the same run."""
    assert r.drawn, f"{r.name} carries nothing to draw"
    if r.broken_token_diffs is not None:
        assert r.broken_token_diffs.max() == pytest.approx(r.broken_max_abs_diff)
        assert r.fixed_token_diffs.max() == pytest.approx(r.fixed_max_abs_diff, abs=1e-12)
        assert f"{r.broken_max_abs_diff:.2f}" in r.symptom and f"{r.fixed_max_abs_diff:.1e}" in r.fixed
        assert r.broken_token_diffs.max() > r.tolerance >= r.fixed_token_diffs.max()   # caught, and the fix clean
        assert len(r.broken_token_diffs) == len(r.document_ids) == len(r.fixed_token_diffs)
    if r.broken_mask is not None:
        doc = r.document_ids
        across = r.broken_mask & (doc[:, None] != doc[None, :]) & (doc[:, None] >= 0) & (doc[None, :] >= 0)
        assert across.any(), "a mask bug called caught reads across documents"
        assert not (r.fixed_mask & (doc[:, None] != doc[None, :])).any()
    if r.broken_targets is not None:
        counted = int((r.broken_targets != -100).sum()), int((r.fixed_targets != -100).sum())
        assert r.symptom.startswith(f"{counted[0]} targets instead of {counted[1]}")
    if r.broken_segments is not None:
        assert f"sees {int(r.broken_segments.max()) + 1} sequences" in r.symptom
        assert r.fixed.startswith(f"{int(r.fixed_segments.max()) + 1} sequences")
    if r.broken_position_ids is not None and r.broken_segments is None and r.broken_token_diffs is None:
        assert f"{len(r.fixed_position_ids)} input_ids, {len(r.broken_position_ids)} position_ids" in r.symptom
    if r.broken_weights is not None:
        assert f"weighs {r.broken_weights[0]:.3f}" in r.symptom and r.broken_weights.sum() == pytest.approx(1)
        assert r.fixed_weights.tolist() == pytest.approx([float(w) for w in r.fixed.split("[")[1].split("]")[0].split(",")],
                                                         abs=1e-3)


@pytest.mark.parametrize("name", [b.name for b in ZOO if b.planted])
def test_a_planted_fault_draws_only_what_it_changes_and_its_verdict_follows_caught_by(name):
    from packing_lab.zoo import plant_bug, zoo_entry

    r = plant_bug(name)
    bug = zoo_entry(name)
    assert r.drawn and r.caught == bool(bug.caught_by) and r.silent_on_fix
    for part, (b, f) in {"mask": (r.broken_mask, r.fixed_mask), "targets": (r.broken_targets, r.fixed_targets),
                         "positions": (r.broken_position_ids, r.fixed_position_ids)}.items():
        assert (part in r.drawn) == (b is not None) and (b is None or not np.array_equal(b, f)), part
    if r.broken_targets is not None:
        assert f"{int((r.broken_targets != r.fixed_targets).sum())} of {len(r.fixed_targets)} targets differ" in r.symptom
    if r.broken_mask is not None:
        assert f"queries read {int(r.broken_mask.sum())} keys in all ({int(r.fixed_mask.sum())} as built)" in r.symptom


def test_labels_over_the_row_train_one_extra_target_per_boundary():
    if not pretrained_status()[0]:
        skip_or_fail("SmolLM2 is not installed")
    r = reproduce_bug("labels-over-row")
    assert r.symptom.startswith("71 targets instead of 70") and r.check_says == "label_crosses_boundary (error)"


def test_loss_per_row_overweights_the_short_document():
    r = reproduce_bug("loss-per-row")
    assert "weighs 0.500 of the gradient" in r.symptom


def test_zoo_cli_lists_every_entry_and_runs_one():
    code, out, err = run_cli("zoo")
    assert code == 0 and all(name in out for name in ZOO_NAMES) and "Documents read each other" in out
    code, out, _ = run_cli("zoo", "--run", "sliding-window-crosses", "--format", "json")
    (r,) = json.loads(out)
    assert code == 0 and r["caught"] and r["silent_on_fix"] and r["check_says"] == "documents_share_attention (error)"


def test_zoo_cli_names_the_choices_for_an_unknown_bug():
    code, _, err = run_cli("zoo", "--run", "nope")
    assert code == 2 and "loss-per-row" in err and err.count("\n") == 1


# ---------------------------------------------------------------- the page
def open_zoo():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../../../app.py", default_timeout=120)
    at.switch_page("app_pages/bug_zoo.py").run()
    assert not at.exception and not at.error
    return at


def test_zoo_page_lists_every_bug_and_reproduces_one_behind_its_button():
    at = open_zoo()
    shown = [m[1] for e in at.main.expander if (m := re.search(r"`([^`]+)`$", e.label))]    # one expander a bug
    assert shown == [b.name for b in ZOO] and not at.success       # the lesson box besides; nothing runs yet
    at.button(key="bug_zoo.run_sliding-window-crosses").click().run()
    assert not at.exception and not at.error
    assert any("catches it" in s.value and "documents_share_attention" in s.value.replace("\\", "") for s in at.success)
    assert any("Documents read each other" in c.value for c in at.caption)


def test_zoo_page_weights_documents_per_rule_and_refuses_bad_rows():
    at = open_zoo()
    table = at.dataframe[0].value
    assert list(table["per row"]) == ["0.500", "0.250", "0.250"]
    assert list(table["per token"]) == ["0.032", "0.484", "0.484"]
    at.text_input(key="w_bug_zoo.rows").set_value("4 | x").run()
    assert not at.exception and "Could not read the rows" in at.error[0].value


def test_measured_gradient_weights_match_the_formula_for_every_rule():
    lesson = loss_lesson([[3, 9], [5], [2, 2, 2]])
    for rule in LOSS_RULES:
        assert lesson.measured[rule] == pytest.approx(lesson.expected[rule], abs=1e-6)
    assert lesson.measured["document"] == pytest.approx([1 / 6] * 6)


def test_the_lesson_refuses_a_zero_length_document():
    with pytest.raises(ValueError, match="counted tokens must be at least 1"):
        loss_lesson([[3, 0]])


# ---------------------------------------------------------------- tracker links
def test_every_tracker_reference_parses_into_github_links_that_join_back_into_it():
    from packing_lab.zoo import reference_links

    for bug in ZOO:
        for ref, parts in zip(bug.reported, bug.links):
            assert "".join(text for text, _ in parts) == ref
            urls = [u for _, u in parts if u]
            assert urls and all(u.startswith("https://github.com/" + ref.split(" ")[0] + "/") for u in urls), ref
            assert all(u.split("/issues/")[-1].isdigit() or u.endswith(".py") for u in urls), ref
    assert reference_links("a/b #1 -> #2 (merged)")[2] == ("#2", "https://github.com/a/b/issues/2")


@pytest.mark.parametrize("bad", ["transformers #123", "huggingface/trl: no number", "#12 huggingface/trl"])
def test_a_malformed_tracker_reference_is_refused_naming_the_form(bad):
    from packing_lab.zoo import reference_links

    with pytest.raises(ValueError, match="owner/repo #N"):
        reference_links(bad)
