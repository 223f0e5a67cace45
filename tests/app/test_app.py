"""Every page of the lab through Streamlit's AppTest, asserting on the numbers it shows.

Each test starts from ``app.py`` (the real router and sidebar) and switches to its page.
"""
import io
import re

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

import packing_core as pc
from app_pages import _content
from packing_core.check.rules import RULES
from tests._support import (
    assert_clean,
    errors,
    findings_shown,
    markdown,
    metric,
    no_exception,
    open_page,
    percent,
    skip_or_fail,
)


# ---------------------------------------------------------------- why packing
def _why_packing() -> AppTest:
    """Why packing with its answers shown (the page hides them behind a prediction)."""
    at = open_page("why_packing")
    at.checkbox(key="w_why_packing.skip").check().run()
    assert_clean(at)
    return at


def test_why_packing_shows_the_worked_example_at_22_and_89_percent():
    at = _why_packing()
    assert metric(at, "Padded to the context") == "22.2%"
    assert metric(at, "Concatenated and cut") == "88.9%"
    text = markdown(at)
    assert "[0, 120, 210, 510, 550, 605, 635, 845, 910]" in text                 # the stream
    assert "`[0, 120, 210, 510, 512, 550, 605, 635, 845, 910]`" in text   # what a kernel reads: one array
    assert len(at.get("plotly_chart")) == 5     # two strips, the stream and its cut, the tickets' slots, the schedule


def test_why_packing_computes_that_three_quarters_of_the_ticket_slots_are_pads():
    at = _why_packing()
    assert "cuts only the 1,269 tickets" in markdown(at)   # why the page switches to bfd
    assert metric(at, "Tickets") == "200,000"
    assert 0.70 < percent(metric(at, "Pads when padded")) < 0.80
    assert "three quarters" in markdown(at)


# ---------------------------------------------------------------- padded vs packed
def test_padded_vs_packed_starts_on_the_worked_example_packed():
    at = open_page("padded_vs_packed")
    assert (metric(at, "Rows"), metric(at, "Utilisation")) == ("2", "88.9%")


def test_changing_the_strategy_changes_the_numbers():
    at = open_page("padded_vs_packed")
    at.selectbox(key="w_padded_vs_packed.strategy").set_value("pad").run()
    assert_clean(at)
    assert (metric(at, "Rows"), metric(at, "Slots"), metric(at, "Utilisation")) == ("8", "4,096", "22.2%")
    assert metric(at, "Attention FLOP ratio") == "1.0x"


def test_attention_cost_is_quadratic_padded_rows_against_sum_of_squares():
    at = open_page("padded_vs_packed")
    text = markdown(at)
    assert f"8 x 512² = {8 * 512 ** 2:,} cells" in text
    assert "Σ len² = 166,198: **12.6x** fewer" in text            # a kernel that skips masked blocks
    assert "Σ width² = 524,288, only **4.0x** fewer" in text       # a materialised mask skips nothing
    assert "speed-up" not in text.lower()
    assert any("splits 1 document" in c.value or "cuts 1 document" in c.value for c in at.caption)
    table = next(d.value for d in at.dataframe if "strategy" in d.value.columns)   # the kernels' table leads
    assert list(table["strategy"]) == list(pc.STRATEGIES)      # every registered strategy, in its order


def test_end_to_end_flops_show_the_formula_and_follow_the_slot_ratio_on_a_7b_shape():
    at = open_page("padded_vs_packed")
    assert any("6\\,N" in x.value for x in at.get("latex"))
    at.radio(key="w_padded_vs_packed.model_shape").set_value("7B").run()
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "end-to-end ratio" in d.value)
    row = dict(zip(table["strategy"], table["end-to-end ratio"]))
    assert row["bfd"] == "4.05x" and dict(zip(table["strategy"], table["attention share"]))["pad"] == "2.0%"


def test_one_500_token_outlier_pads_the_other_31_rows():
    at = open_page("padded_vs_packed")
    para = next(m.value for m in at.markdown if "outlier" in m.value)
    calm, stretched = [float(v) / 100 for v in re.findall(r"\*\*([\d.]+)%\*\*", para)]
    assert "all 32 rows stretch to 500" in para and "The other 31 rows gain 12,710 pads" in para
    assert "gains 12,672" in para     # net: the outlier's own row lost its pads
    assert stretched < calm / 3


def test_fit_decreasing_rows_read_in_order_are_correlated_until_shuffled():
    at = open_page("padded_vs_packed")
    assert float(metric(at, "bfd rows: neighbour correlation")) > 0.9
    assert abs(float(metric(at, "bfd, rows shuffled"))) < 0.2


def test_editing_the_lengths_replans_and_bad_lengths_say_what_is_wrong():
    at = open_page("padded_vs_packed")
    at.text_area(key="w_padded_vs_packed.lengths").set_value("512, 512, 256, 256").run()
    assert (metric(at, "Rows"), metric(at, "Utilisation")) == ("3", "100.0%")
    at.text_area(key="w_padded_vs_packed.lengths").set_value("120, abc").run()
    assert not at.exception and "abc" in errors(at)


def test_an_extreme_setting_is_an_error_message_not_a_traceback():
    at = open_page("padded_vs_packed")
    at.sidebar.select_slider[0].set_value(16)
    at.radio(key="w_padded_vs_packed.overlong").set_value("drop").run()
    assert not at.exception and "overlong='drop' dropped them all" in errors(at)


def test_a_random_draw_replaces_the_lengths_with_a_batch_of_the_dataset():
    at = open_page("padded_vs_packed")
    at.number_input(key="w_padded_vs_packed.draw_n").set_value(40).run()
    at.button[0].click().run()
    assert_clean(at)
    drawn = at.text_area(key="w_padded_vs_packed.lengths").value
    assert len(drawn.split(",")) == 40 and drawn != ", ".join(map(str, _content.WORKED_LENGTHS))


def test_shared_settings_survive_switching_pages():
    at = open_page("padded_vs_packed")
    at.sidebar.select_slider[0].set_value(1024).run()
    at.sidebar.selectbox[0].set_value("bimodal").run()
    at.switch_page("app_pages/dataset_explorer.py").run()
    assert_clean(at)
    assert at.session_state["context"] == 1024 and at.sidebar.select_slider[0].value == 1024
    assert any("bimodal at context 1024" in h.value for h in at.subheader)


# ---------------------------------------------------------------- masks and labels
def test_masks_page_passes_the_check_on_the_batch_as_built():
    at = open_page("masks_and_labels")
    assert "sdpa: SOUND" in at.success[0].value
    assert "`cu_seqlens` = `[0, 23, 57, 96]`" in markdown(at)      # the batch's rows laid end to end


def test_masks_page_shows_that_only_alone_vs_packed_catches_prompts_cut_from_attention():
    at = open_page("masks_and_labels")
    at.toggle(key="w_masks_and_labels.instruction").set_value(True).run()
    at.selectbox(key="w_masks_and_labels.break_").set_value("prompts-cut-from-attention").run()
    assert_clean(at)
    assert "sdpa: SOUND" in at.success[0].value and "loss positions = answer targets" in at.success[0].value
    assert len(at.warning) == 1 and "Only this comparison catches it" in at.warning[0].value


def test_masks_page_reports_continuous_positions_as_a_warning_for_varlen_and_a_leak_for_sdpa():
    at = open_page("masks_and_labels")
    at.selectbox(key="w_masks_and_labels.break_").set_value("continuous-positions").run()
    at.selectbox(key="w_masks_and_labels.attn").set_value("varlen").run()
    assert_clean(at)
    assert "varlen: SOUND" in at.warning[0].value                         # sound, with a warning: amber, not red
    assert findings_shown(at)["positions_do_not_restart"] == "warning"
    assert "sdpa: 1 ERROR(S): documents_share_attention" in " ".join(c.value for c in at.caption)


def test_masks_page_draws_the_mask_the_kernel_reads_so_row_cu_seqlens_changes_the_picture():
    at = open_page("masks_and_labels")
    at.selectbox(key="w_masks_and_labels.attn").set_value("varlen").run()
    clean = at.get("plotly_chart")[0].proto.spec
    at.selectbox(key="w_masks_and_labels.break_").set_value("row-cu-seqlens").run()
    no_exception(at)
    assert at.get("plotly_chart")[0].proto.spec != clean
    assert findings_shown(at)["documents_share_attention"] == "error"       # an error is red


def test_masks_page_corrects_the_eos_fix_and_keeps_attention_apart_from_targets():
    text = markdown(open_page("masks_and_labels"))
    assert "the intended design of EOS-delimited pretraining" in text
    assert "does not stop the next document from reading the previous one" in text
    assert "Three things make sure" not in text


@pytest.mark.parametrize("how", ["pads-in-the-loss", "row-shifted-targets"])
def test_masks_page_catches_each_planted_bug_by_name(how):
    at = open_page("masks_and_labels")
    at.toggle(key="w_masks_and_labels.instruction").set_value(True).run()
    assert "SOUND" in at.success[0].value
    at.selectbox(key="w_masks_and_labels.break_").set_value(how).run()
    no_exception(at)
    caught = {name for name, kind in findings_shown(at).items() if kind == "error"}
    assert "ERROR(S)" in at.error[0].value and caught <= set(RULES) and caught
    assert all(e.value.startswith("**Fix:**") for e in at.error[1:])      # each error leads with its fix


def test_masks_page_is_usable_at_2048_tokens():
    at = open_page("masks_and_labels")
    at.select_slider(key="w_masks_and_labels.width").set_value(2048).run()
    assert_clean(at)
    assert "2048 x 2048" in markdown(at)


# ---------------------------------------------------------------- dataset explorer
def test_explorer_opens_on_the_support_tickets_with_a_recommendation():
    at = open_page("dataset_explorer")
    assert metric(at, "Documents") == "200,000" and metric(at, "Mean") == "114"
    assert at.info[0].value.startswith("**Recommendation.** First run: bucket.") and "Long run: pack with" in at.info[0].value
    assert len(at.dataframe[0].value) == len(pc.STRATEGIES)


def test_explorer_recommends_dropping_overlong_instruction_data():
    at = open_page("dataset_explorer")
    at.radio(key="dataset_explorer.kind_support-tickets").set_value("instruction").run()
    assert "Drop the 1,269 documents" in at.info[0].value


def _upload(at, name, data, mime="text/csv"):
    at.file_uploader(key="w_upload").set_value((name, data, mime)).run()
    assert_clean(at)
    return at


def test_an_uploaded_csv_becomes_the_dataset():
    at = _upload(open_page("dataset_explorer"), "mine.csv", b"length,text\n3,a\n700,b\n10,c\n")
    at.button[0].click().run()
    assert_clean(at)
    assert metric(at, "Documents") == "3" and metric(at, "Longest") == "700"
    assert at.session_state["dataset"] == "uploaded file"
    assert at.sidebar.selectbox[0].value == "uploaded file"


def test_an_uploaded_parquet_text_column_is_tokenised():
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2], "body": ["hello", "packing lab"]}), buf)
    at = _upload(open_page("dataset_explorer"), "texts.parquet", buf.getvalue(), "application/octet-stream")
    at.selectbox(key="w_upload_column").set_value("body")
    at.selectbox(key="w_upload_tok").set_value("bytes")
    at.button[0].click().run()
    assert_clean(at)
    assert metric(at, "Documents") == "2" and metric(at, "Longest") == "11"


def test_the_uploader_accepts_exactly_the_registrys_input_suffixes():
    from packing_core.data import INPUT_SUFFIXES

    at = open_page("dataset_explorer")
    assert set(at.file_uploader(key="w_upload").proto.type) == set(INPUT_SUFFIXES)


def test_the_uploaders_tokenizer_is_auto_and_says_what_it_resolved_to():
    smol, _ = pc.model_spec("smollm2").available()
    at = open_page("dataset_explorer")
    box = at.selectbox(key="w_upload_tok")
    assert box.value == "auto" and box.label == f"Tokenizer (auto: {'smollm2' if smol else 'bytes'})"
    chats = b'{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n'
    at = _upload(at, "chats.jsonl", chats, "application/json")
    at.button[0].click().run()
    assert_clean(at)
    if smol:   # chat data needs a chat template: auto works without changing a setting
        assert metric(at, "Documents") == "1" and at.session_state["upload"]["profile"].kind == "messages"


@pytest.mark.parametrize("name,data,fragment", [
    ("bad.csv", b"length\n5\n-3\n", "-3"),
    ("empty.csv", b"length\n", "no documents"),
    ("broken.parquet", b"PAR1 not really", "Parquet"),
])
def test_a_bad_upload_says_what_is_wrong(name, data, fragment):
    at = open_page("dataset_explorer")
    at.file_uploader(key="w_upload").set_value((name, data, "application/octet-stream")).run()
    if at.button:
        at.button[0].click().run()
    assert not at.exception and fragment.lower() in errors(at).lower()
    assert metric(at, "Documents") == "200,000"   # the page still works on the built-in data


def test_an_error_about_a_previous_file_goes_when_another_file_is_chosen():
    at = open_page("dataset_explorer")
    at.file_uploader(key="w_upload").set_value(("neg.csv", b"length\n5\n-3\n", "text/csv")).run()
    at.button[0].click().run()
    assert "-3" in errors(at)
    _upload(at, "good.csv", b"length\n5\n3\n8\n")
    at.button[0].click().run()
    assert_clean(at)
    assert metric(at, "Documents") == "3"


def test_explorer_reads_a_real_dataset_chosen_in_the_sidebar():
    at = open_page("dataset_explorer")
    real = [o for o in at.sidebar.selectbox[0].options if o in ("fortunes", "gsm8k")]
    if not real:
        skip_or_fail("no real dataset installed (fortunes: apt-get install fortunes)")
    at.sidebar.selectbox[0].set_value(real[0]).run()
    assert_clean(at)
    assert int(metric(at, "Documents").replace(",", "")) > 1000
    assert at.info[0].value.startswith("**Recommendation.**")


# ---------------------------------------------------------------- leakage lab
def _lab(mask="on", positions="reset", model="tiny-rope", attention="segments") -> AppTest:
    at = open_page("leakage_lab")
    at.checkbox(key="w_leakage_lab.skip").check()
    at.radio(key="w_leakage_lab.mask").set_value(mask)
    at.radio(key="w_leakage_lab.positions").set_value(positions)
    at.selectbox(key="w_leakage_lab.model").set_value(model)
    at.selectbox(key="w_leakage_lab.attention").set_value(attention)
    at.run()
    assert_clean(at)
    return at


def _verdict(at) -> str:
    return " ".join(x.value for x in [*at.success, *at.warning] if x.value.startswith("Verdict"))


def test_leakage_lab_asks_for_a_prediction_before_it_reveals():
    at = open_page("leakage_lab")
    assert not _verdict(at) and "prediction" in at.info[0].value
    assert not any(e.label.startswith("Why the settings matter") for e in at.expander)   # no answer before the guess
    at.radio(key="v_leakage_lab.guess").set_value("They change").run()
    assert_clean(at)
    assert "EQUIVALENT" in _verdict(at) and at.info[0].value.startswith("Not this time")
    assert any(e.label.startswith("Why the settings matter") for e in at.expander)
    text = markdown(at)
    assert "Dynamic NTK and LongRoPE do not" in text and "Reset them anyway" not in text
    assert "every step that is not +1 (sdpa/eager)" in text


@pytest.mark.parametrize("scenario,equivalent", [
    ("correct", True), ("mask off", False), ("continuous, RoPE", True), ("continuous, absolute", False),
])
def test_leakage_lab_named_scenarios_set_every_switch(scenario, equivalent):
    at = open_page("leakage_lab")
    assert at.selectbox(key="w_leakage_lab.scenario").options[-1] == "Advanced: set every switch yourself"
    at.checkbox(key="w_leakage_lab.skip").check()
    at.selectbox(key="w_leakage_lab.scenario").set_value(scenario).run()
    assert_clean(at)
    assert _verdict(at).startswith("Verdict: EQUIVALENT" if equivalent else "Verdict: NOT EQUIVALENT")
    expected = _content.SCENARIOS[scenario][1]
    assert at.radio(key="w_leakage_lab.mask").value == expected["mask"]
    assert at.selectbox(key="w_leakage_lab.model").value == expected["model"]


@pytest.mark.parametrize("page,title", [("why_packing", "Why packing"), ("masks_and_labels", "Masks and labels"),
                                        ("check_your_setup", "Check your setup"), ("benchmark", "Benchmark")])
def test_each_page_opens_with_a_line_to_read_out_and_a_question_for_the_class(page, title):
    text = markdown(open_page(page))
    say, ask = _content.TEACHER[title]
    assert say in text and f"**Ask the class:** {ask}" in text


def test_the_navigation_follows_the_sixty_minute_lesson():
    from pathlib import Path
    app = (Path(__file__).parents[2] / "app.py").read_text()
    assert "for i, p in enumerate(_content.PAGES)" in app   # app.py routes to the lesson's pages, in order
    assert [t for t, _ in _content.LESSON_PLAN] == [p.title for p in _content.PAGES] == list(_content.TEACHER)
    assert sum(m for _, m in _content.LESSON_PLAN) == 60


def test_check_your_setup_maps_the_lessons_to_transformers_and_trl():
    at = open_page("check_your_setup")
    text = markdown(at)
    for name in ("DataCollatorWithFlattening", "padding_free", "use_cache", "num_items_in_batch", "position_ids"):
        assert name in text, name
    assert [t.label for t in at.tabs] == ["1 · In your framework", "2 · Check a batch"]
    assert at.file_uploader(key="check_your_setup.batch_file") is not None


def test_check_your_setup_shows_the_same_batch_sound_on_4_57_and_leaking_on_4_46():
    from packing_lab.advice import same_batch_by_release

    at = open_page("check_your_setup")
    text = markdown(at)
    cells = dict((r, (s, d)) for r, s, d in same_batch_by_release())
    assert f"transformers 4.46.3: **leaks** (largest logit difference {cells['4.46.3'][1]:.1e})" in text
    assert f"transformers 4.57.6: **sound** (largest logit difference {cells['4.57.6'][1]:.1e})" in text
    picker = at.selectbox(key="w_check_your_setup.transformers")
    assert picker.value == "installed here" and "4.46.3" in picker.options


def test_check_your_setup_follows_the_bug_zoo_in_the_lesson():
    names = [p.name for p in _content.PAGES]
    assert names.index("check_your_setup") == names.index("bug_zoo") + 1


def test_masks_and_labels_no_longer_holds_the_framework_map_or_the_batch_upload():
    at = open_page("masks_and_labels")
    said = markdown(at)
    assert "DataCollatorWithFlattening" not in said and "Save one batch as your trainer hands it" not in said
    assert [h.value for h in at.subheader if h.value in ("In your framework", "Check a batch from your trainer")] == []
    assert not at.get("file_uploader")
    assert "Check your setup" in said          # the check step points to where the upload went


@pytest.mark.parametrize("spec", [p for p in _content.PAGES if p.steps], ids=lambda p: p.name)
def test_each_page_with_steps_draws_them_as_numbered_tabs_in_lesson_order(spec):
    at = open_page(spec.name, **({"why_packing.skip": True} if spec.name == "why_packing" else {}))
    assert [t.label for t in at.tabs] == [f"{i} · {name}" for i, name in enumerate(spec.steps, 1)]
    assert all(len(t.children) for t in at.tabs), "a step is empty"


@pytest.mark.parametrize("settings,equivalent", [
    (dict(), True),
    (dict(mask="off"), False),
    (dict(attention="causal_only"), False),
    (dict(model="tiny-abs", positions="continuous"), False),
    (dict(model="tiny-rope", positions="continuous"), True),
])
def test_leakage_lab_verdict_follows_the_mask_positions_and_model(settings, equivalent):
    verdict = _verdict(_lab(**settings))
    assert verdict.startswith("Verdict: EQUIVALENT" if equivalent else "Verdict: NOT EQUIVALENT")


# ---------------------------------------------------------------- benchmark
def _small_benchmark():
    """The Benchmark page at its smallest sizes, so a run takes a moment."""
    at = open_page("benchmark")
    at.select_slider(key="w_benchmark.docs").set_value(32)
    at.select_slider(key="w_benchmark.heads").set_value(1)
    at.select_slider(key="w_benchmark.repeats").set_value(1)
    return at.run()


def test_benchmark_shows_the_flop_ratio_before_running_and_the_measurement_after():
    at = _small_benchmark()
    text = markdown(at)
    assert re.search(r"Σ len² = [\d,]+, a bound of \*\*[\d.]+x\*\*", text)
    assert re.search(r"`dense` computes \d+ x 512² = [\d,]+, a bound of \*\*[\d.]+x\*\*", text)
    at.button[0].click().run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert table["layout"][0] == "padded" and "segments" in set(table["layout"])
    bound = dict(zip(table["layout"], table["its FLOP bound"]))
    assert float(bound["dense"].rstrip("x")) < float(bound["segments"].rstrip("x"))   # each against its own work
    assert "share of the FLOP ratio" not in table.columns
    assert (pd.to_numeric(table["tokens/s"]) > 0).all()
    assert len(at.get("plotly_chart")) == 1


def test_benchmark_breaks_down_the_segments_time_on_live_numbers():
    at = _small_benchmark()
    at.button(key="benchmark.breakdown_run").click().run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert len(table) == 4 and table["stage"][3].startswith("the whole backend")
    assert (pd.to_numeric(table["seconds"]) > 0).all()
    stages = at.session_state["benchmark.breakdown"].stages
    text = markdown(at)
    # The sentence quotes the measured shares, not fixed numbers.
    for name in ("kernel_cached", "kernel_cold", "backend"):
        assert f"**{stages[name].of_flop_ratio:.0%}**" in text


def test_leakage_lab_sdpa_with_cache_scenario_leaks_on_smollm2():
    from packing_core.models import pretrained_status
    ok, why = pretrained_status()
    if not ok:
        skip_or_fail(why)
    at = open_page("leakage_lab")
    at.checkbox(key="w_leakage_lab.skip").check()
    at.selectbox(key="w_leakage_lab.scenario").set_value("sdpa with cache").run(timeout=600)
    assert_clean(at)
    assert at.selectbox(key="w_leakage_lab.attention").value == "sdpa" and at.checkbox(key="w_leakage_lab.use_cache").value
    assert _verdict(at).startswith("Verdict: NOT EQUIVALENT")
    at.checkbox(key="w_leakage_lab.use_cache").uncheck().run(timeout=600)   # the same call without the cache
    assert_clean(at)
    assert _verdict(at).startswith("Verdict: EQUIVALENT")
