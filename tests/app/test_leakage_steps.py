"""The Leakage lab's steps 2 and 3 and the Check your setup page's new switches (AppTest)."""
import json

import numpy as np

from tests._support import assert_clean, no_exception, open_page

FLAT = {"input_ids": [[11, 12, 13, 14, 21, 22, 23, 31, 32, 33, 34]], "position_ids": [[0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3]],
        "labels": [[-100, 12, 13, 14, -100, 22, 23, -100, 32, 33, 34]]}


def tab(at, name):
    return next(t for t in at.tabs if t.label.endswith(name))


def test_leakage_the_missing_causal_flag_shows_both_verdicts_and_the_reason_on_one_screen():
    at = open_page("leakage_lab")
    at.checkbox(key="w_leakage_lab.skip").check()
    at.selectbox(key="w_leakage_lab.scenario").set_value("no causal flag").run()
    assert_clean(at)
    step = tab(at, "Predict, then look")
    assert at.radio(key="w_leakage_lab.causal").value == "off"
    said = step.warning[0].value                                                  # one box, both verdicts
    assert said.startswith("Verdict: EQUIVALENT")                                  # alone vs packed: blind here
    assert "\n\nCausality: FUTURE VISIBLE" in said                                # the second check sees it
    assert any("Why the first check is blind here" in m.value for m in step.markdown)
    at.selectbox(key="w_leakage_lab.scenario").set_value("correct").run()
    assert_clean(at)
    step = tab(at, "Predict, then look")
    assert not step.warning and any("\n\nCausality: CAUSAL" in s.value for s in step.success)
    assert not any("Why the first check is blind here" in m.value for m in step.markdown)


def test_leakage_not_only_attention_leaks_by_layer_kind_until_each_layer_gets_its_signal():
    at = open_page("leakage_lab")
    step = tab(at, "Not only attention")
    assert "NOT EQUIVALENT" in step.warning[0].value and "first 3" in step.markdown[0].value
    charts = [c for c in at.get("plotly_chart") if c.proto.id and "leakage_lab.layers" in c.proto.id]
    assert len(charts) == 1
    at.toggle(key="w_leakage_lab.signal").set_value(True).run()
    assert_clean(at)
    step = tab(at, "Not only attention")
    assert not step.warning and "EQUIVALENT" in step.success[0].value


def upload(at, *files):
    at.file_uploader(key="check_your_setup.batch_file").set_value(
        [(name, json.dumps(batch).encode(), "application/json") for name, batch in files]).run()
    no_exception(at)


def test_setup_the_cache_switch_changes_the_verdict():
    at = open_page("check_your_setup")
    upload(at, ("flat.json", FLAT))
    assert any("sdpa: SOUND" in s.value for s in at.success)
    at.checkbox(key="w_check_your_setup.use_cache").check().run()
    no_exception(at)
    assert any("documents_share_attention" in e.value for e in at.error)     # an error is red
    assert any("use_cache=False" in c.value and "builds a cache" in c.value for c in at.caption)


def test_setup_a_model_type_judges_the_layers_beyond_attention_with_the_trainers_fix():
    at = open_page("check_your_setup")
    upload(at, ("flat.json", FLAT))
    assert any("attention layers only" in c.value for c in at.caption)
    at.selectbox(key="w_check_your_setup.model_type").set_value("lfm2").run()
    no_exception(at)
    said = " ".join(e.value for e in at.error).replace("\\", "")
    assert "(lfm2: attention SOUND, convolution LEAKS)" in said
    assert "**Fix:** Add seq_idx" in said and "return_seq_idx=True" in said       # the trainer's fix, first
    assert any("The whole fix (for a flattening collator" in m.value for m in at.markdown)


def test_setup_several_files_are_a_stream_and_the_save_snippet_is_shown():
    at = open_page("check_your_setup")
    assert any("safetensors.torch.save_file(" in c.value for c in at.code)
    padded = {"input_ids": [[5, 6, 7, 0], [8, 9, 0, 0]], "attention_mask": [[1, 1, 1, 0], [1, 1, 0, 0]]}
    upload(at, ("a.json", FLAT), ("b.json", padded))
    stream = next(s.value for s in [*at.success, *at.warning] if s.value.startswith("**The stream, 2 batches:**"))
    assert "packing" in stream
    assert at.selectbox(key="check_your_setup.batch_pick").options == ["a.json", "b.json"]
    assert np.isclose(float(stream.split("rows are ")[1].split("%")[0]), 100 * (11 + 5) / (11 + 8), atol=0.1)
