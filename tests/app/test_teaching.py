"""What the lab says, sentence by sentence: one test per finding of the round-2 teaching review.

Each test fails on the old wording or behaviour. Where a sentence states a number, the test
reads the number from the library, so the page and the test cannot drift apart together.
"""
import inspect
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import packing_core as pc
from app_pages import _content
from packing_core.analysis import MODEL_SHAPES, end_to_end
from packing_core.check import load_batch_bytes
from packing_core.check.rules import RULES
from packing_core.data import list_sources
from packing_core.verify import DEFAULT_LENGTHS, MAX_TEXTS, MIN_TEXTS, drift_pretrained
from packing_lab.advice import batch_cu_seqlens
from packing_lab.demos import TOKENS_PER_TOPIC, TOPICS, loss_lesson
from packing_lab.viz import strategy_figure
from packing_lab.zoo import ZOO
from tests._support import assert_clean
from tests._support import open_page as _open_page

ROOT = Path(__file__).parents[2]
TIMEOUT = 120


def open_page(name: str, **state) -> AppTest:
    return _open_page(name, timeout=TIMEOUT, **state)


def text(at: AppTest) -> str:
    """Everything the page wrote as markdown or caption."""
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption])


def hovers(at: AppTest) -> dict:
    """term -> its definition, from the help tooltips of the page's paragraphs ("**term**: meaning")."""
    tips = "\n\n".join(m.proto.help for m in [*at.markdown, *at.caption] if m.proto.help)
    return dict(re.findall(r"\*\*([^*]+)\*\*: ([^\n]+)", tips))


def alerts(at: AppTest) -> str:
    return "\n".join(x.value for x in [*at.success, *at.info, *at.warning])


def framework() -> str:
    return " ".join(where for _, where in _content.FRAMEWORK)


def zoo(name: str):
    return next(b for b in ZOO if b.name == name)


def why_packing_answered() -> AppTest:
    at = open_page("why_packing")
    at.checkbox(key="w_why_packing.skip").check().run()
    assert_clean(at)
    return at


# ---------------------------------------------------------------- WRONG
def test_W1_why_packing_gives_one_global_cu_seqlens_cut_at_the_row_edge():
    at = why_packing_answered()
    page = text(at)
    flat = batch_cu_seqlens(pc.make_plan(_content.WORKED_LENGTHS, _content.WORKED_CONTEXT, "concat-cut"))
    assert flat == [0, 120, 210, 510, 512, 550, 605, 635, 845, 910]
    assert f"`{flat}`" in page and "the offsets of the queries and of the keys over the whole batch" in page
    assert "one set of offsets per row" not in page


def test_W2_the_bug_zoo_lesson_box_says_one_bug_crashes_and_names_both_kinds_of_check():
    say, _ = _content.TEACHER["Bug zoo"]
    assert "found only by someone who compared" not in say and "shipped" not in say
    assert "one crashes" in say and "tensor check" in say
    assert any(b.caught_by for b in ZOO)          # the zoo's own "Caught by" findings: tensor checks
    assert any(not b.caught_by for b in ZOO)      # and entries only the alone-vs-packed comparison sees


def test_W2_round3_a_varlen_kernel_is_causal_only_if_asked():
    """torch 2.13's varlen_attn defaults to window_size=(-1, -1) (full attention), flash-attn's varlen to causal=False."""
    import inspect

    from torch.nn.attention.varlen import varlen_attn

    said = _content.GLOSSARY["varlen"]
    assert "computes one causal block per document" not in said
    assert "causal only if you ask for it" in said and "window_size=(-1, 0)" in said and "causal=True" in said
    assert tuple(inspect.signature(varlen_attn).parameters["window_size"].default) == (-1, -1)


def test_W3_the_bug_zoo_intro_admits_the_crash():
    page = text(open_page("bug_zoo"))
    assert "None of them raises an error" not in page
    assert "All but one run without an error" in page and "IndexError" in page
    from packing_lab.zoo import positions
    assert "IndexError" in inspect.getsource(positions)   # the family whose entry raises


def test_W4_bfd_is_said_to_cut_only_the_tickets_longer_than_the_context():
    at = why_packing_answered()
    page = text(at)
    rows = {r.strategy: r for r in pc.strategy_table(pc.load_lengths("support-tickets"), 512)}
    assert "never cuts a document" not in page
    assert f"cuts only the {rows['bfd'].docs_split:,} tickets" in page
    assert f"would cut {rows['concat-cut'].docs_split:,}" in page and rows["bfd"].docs_split > 0


def test_W5_a_mean_per_example_does_not_change_with_the_packing():
    assert "per row or per example would change with the packing" not in framework()
    assert "A mean per row changes with the packing" in framework()
    a, b = loss_lesson([[4], [60, 60]]), loss_lesson([[4, 60], [60]])
    assert a.measured["document"] == pytest.approx(b.measured["document"])   # the claim, measured
    assert a.measured["row"] != pytest.approx(b.measured["row"])


def test_W6_trl_use_cache_and_no_mask_are_given_trls_own_reasons():
    from trl.trainer import sft_trainer
    source = inspect.getsource(sft_trainer)
    assert "cache isn't compatible with gradient checkpointing" in source        # TRL's reason for use_cache
    assert "causes FlashAttention to ignore position_ids" in source               # and for no mask
    assert "for this reason" not in framework()
    assert "gradient-checkpointing warning" in framework() and "FlashAttention reads directly" in framework()


def test_W7_pad_is_the_baseline_not_padded_to_a_batchs_longest_sample():
    at = open_page("padded_vs_packed")
    at.selectbox(key="w_padded_vs_packed.strategy").set_value("pad").run()
    assert "pads every row to the context: it is the baseline" in text(at)
    assert "its batch's longest sample" not in text(at)
    at.selectbox(key="w_padded_vs_packed.strategy").set_value("pad-longest").run()
    assert "pads each row to its batch's longest sample" in text(at)


# ---------------------------------------------------------------- MISLEADING
def test_M1_the_continuation_is_labelled_with_the_verdicts_own_path():
    source = (ROOT / "app_pages/leakage_lab.py").read_text()
    assert "with the mask on, document 1 cannot read document 0" not in source
    assert "drift_pretrained(texts, mask=mask, positions=positions, use_cache=use_cache" in source
    assert "**attention_arguments(attention)" in source.split("def drift(")[1].split("def ")[0]
    params = inspect.signature(drift_pretrained).parameters
    assert {"backend", "attn_implementation", "use_cache", "positions"} <= set(params)


@pytest.mark.slow_model
def test_M1_the_sdpa_cache_scenario_never_shows_the_same_words(require_smollm2):
    at = open_page("leakage_lab")
    at.checkbox(key="w_leakage_lab.skip").check()
    at.selectbox(key="w_leakage_lab.scenario").set_value("sdpa with cache").run(timeout=900)
    at.button(key="leakage_lab.drift_go").click().run(timeout=900)
    assert_clean(at)
    said = alerts(at)
    assert "Verdict: NOT EQUIVALENT" in said and "The same words" not in said
    assert "use_cache=True" in text(at).replace("\\", "")   # the path, markdown-escaped on the page


def test_M2_eos_delimited_documents_are_a_legitimate_design():
    page = text(open_page("masks_and_labels"))
    assert "does not remove that target" not in page and "helps only as a trained target" not in page
    assert "the intended design of EOS-delimited pretraining" in page and "Mask it (-100) too" in page


def test_M3_every_attention_figure_names_its_baseline_kernel():
    at = open_page("padded_vs_packed")
    page = text(at)
    assert "run by a padded causal kernel (SDPA with is_causal), which computes the pads" in page
    assert "unpadding kernel" in page and "what packing buys is the slot ratio, **4.0x**" in page
    ratio = next(m for m in at.metric if m.label == "Attention FLOP ratio")
    assert "computes the pads" in ratio.help
    titles = [a.text.replace("<br>", " ") for a in strategy_figure(pc.strategy_table([120, 90, 300], 512)).layout.annotations]
    assert "attention FLOP ratio vs padded rows, pads computed" in titles
    bench = text(open_page("benchmark"))
    assert "SDPA with is_causal over padded rows" in bench and "Padding pays attention for a full square" not in bench
    assert "Padded (SDPA with is_causal, pads computed)" in bench


def test_M4_flash_attention_finds_packed_documents_only_in_one_flattened_row():
    from transformers.modeling_flash_attention_utils import _is_packed_sequence
    rows = __import__("torch").tensor([[0, 1, 2, 0, 1], [0, 1, 0, 1, 2]])
    assert not _is_packed_sequence(rows, batch_size=2)          # the library's own rule
    assert _is_packed_sequence(rows[:1], batch_size=1)
    page = text(open_page("check_your_setup"))
    assert "only in one flattened row" in framework() and "`[B>1, L]`" in framework()
    assert "packed rows `[B>1, L]` leak under it" in page


def test_M5_sdpa_eager_and_flex_are_correct_on_the_flattened_row():
    assert "Only the FlashAttention kernels take the variable-length path it needs" not in framework()
    assert "Only FlashAttention runs it as a varlen kernel" in framework()
    assert "sdpa, eager and flex turn the restarting `position_ids` into a block-diagonal mask" in framework()


def test_M6_positions_without_a_mask_is_scoped_to_where_the_mask_comes_from_elsewhere():
    what = zoo("positions-without-mask").what
    assert "not who attends to whom" not in what
    assert what.startswith("Where the mask comes from elsewhere") and "padding-free path" in what


def test_M7_the_independent_case_says_the_model_learned_to_ignore_its_neighbour():
    at = open_page("leakage_lab")
    at.radio(key="v_leakage_lab.neighbours").set_value("independent")
    at.button(key="leakage_lab.train").click().run(timeout=900)   # two training runs: minutes on a loaded box
    assert_clean(at)
    drift = {m.label: float(m.value.rstrip("%")) for m in at.metric if m.label.startswith("Drift")}
    on, off = (drift[f"Drift with the previous document visible, mask {x}"] for x in ("on", "off"))
    page = text(at)
    assert off <= on                                   # seed 0, independent: the mask-off model ignores it
    assert "it learned to lean on a neighbour" not in page and "learned to ignore that neighbour" in page


def test_M8_the_explorer_says_pack_from_the_start_on_long_tailed_lengths_at_8192():
    at = open_page("dataset_explorer", context=8192, dataset="long-tailed")
    advice = at.info[0].value
    assert advice.startswith("**Recommendation.** Pack from the start") and "long-tailed" in advice


# ---------------------------------------------------------------- IMPRECISE
def test_I1_documents_start_at_every_step_that_is_not_plus_one_or_at_the_minimum():
    for said in (RULES["positions_do_not_restart"].fix, text(open_page("masks_and_labels"))):
        assert "fall to 0" not in said and "fall back to 0" not in said
        assert "every step that is not +1 (sdpa/eager)" in said and "return to the minimum" in said
    from transformers.masking_utils import find_packed_sequence_indices
    found = find_packed_sequence_indices(__import__("torch").tensor([[0, 1, 2, 5, 6]]))
    assert found.tolist() == [[0, 0, 0, 1, 1]]        # a jump that is not +1, no return to 0: a new document


def test_I2_the_cache_gate_is_scoped_to_sdpa_eager_and_flex():
    assert "sdpa/eager/flex" in zoo("cache-hides-packing").title
    assert "sdpa/eager" in zoo("mask-hides-packing").title      # FlashAttention drops an all-ones mask
    assert "transformers' sdpa/eager/flex skip that detection" in framework()


def test_I3_num_items_in_batch_counts_the_shifted_labels_and_the_default_came_later():
    from transformers import Trainer
    assert 'batch["labels"][..., 1:]' in inspect.getsource(Trainer._get_num_items_in_batch)
    page = text(open_page("bug_zoo"))
    assert "`labels[..., 1:].ne(-100).sum()`" in page and "(`labels.ne(-100).sum()`)" not in page
    assert "#34373 added the option" in page


def test_I4_trl_documents_padding_free_for_flash_attention_without_refusing_other_kernels():
    from trl import SFTConfig
    assert "FlashAttention 2 or 3" in inspect.getdoc(SFTConfig)
    assert "it needs FlashAttention 2 or 3" not in framework() and "does not check" in framework()


def test_I5_flex_attention_is_not_counted_as_paying_only_the_sum_of_squares():
    page = text(open_page("padded_vs_packed"))
    assert "(varlen fed `cu_seqlens`, FlexAttention, one call per document)" not in page
    assert "FlexAttention computes every 128-token tile on or below the diagonal that a document touches" in page


def test_I6_the_flops_formula_counts_full_squares_over_the_row_length():
    page = text(open_page("padded_vs_packed"))
    assert "T the tokens it attends to" not in page
    assert "T the length of the row (or document)" in page and "A counts full squares" in page


def test_I7_a_flop_ratio_is_not_a_ceiling():
    say, _ = _content.TEACHER["Benchmark"]
    assert "is a ceiling" not in say and "not a hard ceiling" in say
    source = (ROOT / "app_pages/benchmark.py").read_text()
    assert "a bound is a ceiling, not a promise" not in source


def test_I8_the_leakage_lab_counts_its_documents_from_the_library():
    page = text(open_page("leakage_lab"))
    assert "Three documents run" not in page
    assert f"{len(DEFAULT_LENGTHS)} for the tiny models, {MIN_TEXTS} to {MAX_TEXTS} texts" in page


def test_I9_longrope_also_depends_on_the_row():
    from transformers import modeling_rope_utils
    # nested in dynamic_rope_update: LongRoPE picks its factors from the row's largest position
    assert "seq_len = torch.max(position_ids) + 1" in inspect.getsource(modeling_rope_utils.dynamic_rope_update)
    assert "LongRoPE" in RULES["positions_do_not_restart"].fix
    assert "Dynamic NTK and LongRoPE do not" in _content.LEAKAGE_WHY     # the Leakage lab's explanation


def test_I10_nanogpt_and_run_clm_are_not_said_to_build_the_same_stream():
    source = _content.LEAKAGE_DEBATE      # the Leakage lab's debate step
    assert "build the same stream" not in source and "no separator of its own" in source


def test_I11_unpickling_an_untrusted_file_can_run_code():
    page = text(open_page("check_your_setup"))
    assert "because loading one runs code" not in page
    assert "unpickling an untrusted file can run arbitrary code" in page
    with pytest.raises(ValueError, match="unpickling an untrusted file can run arbitrary code"):
        load_batch_bytes(b"not a pickle", "batch.pt")            # the refusal says the same


def test_I12_positions_start_at_the_models_first_position():
    rule = RULES["positions_do_not_restart"].fix
    assert "must start at 0" not in rule and "RoBERTa" in rule and "model's first position" in rule


def test_I13_the_roberta_origin_bug_is_a_sibling_not_an_instance():
    reported = " ".join(zoo("continuous-absolute-positions").reported)
    assert "silently degraded RoBERTa-family models" not in reported
    assert "sibling" in reported and "wrong origin" in reported


def test_I14_smollm2_is_named_with_its_quantisation():
    from packing_core.models.pretrained import GGUF_FILE
    assert "Q4_1" in GGUF_FILE
    assert "Q4_1" in pc.model_spec("smollm2").label and "Q4_1" in (ROOT / "docs" / "setup.md").read_text()


def test_I15_tensor_checks_catch_some_forms_and_alone_vs_packed_every_form_it_can_see():
    """Round 3's M4: alone vs packed catches every form that makes a document compute differently packed, on the
    call path tested; not what the alone run shares (a missing causal flag): that needs the causality check."""
    say, _ = _content.TEACHER["Leakage lab"]
    assert "the only way to see it" not in say and "the one check that catches every form" not in say
    assert "catches every form that makes it compute differently packed, on the call path you test" in say
    assert "change a later token" in say and "missing causal flag" in say
    assert "The one check that catches every form is this one" not in _content.LEAKAGE_WHY
    assert "pair it with the causality check" in _content.LEAKAGE_WHY
    broken = pc.verify_model("tiny-rope", causal=False)          # the sentence's reason, measured
    assert broken.equivalent and broken.future_visible
    all_ones = pc.check_hf_batch({"input_ids": [[5, 6, 7, 8]], "position_ids": [[0, 1, 0, 1]],
                                  "attention_mask": [[1, 1, 1, 1]]})
    assert all_ones.names == ("documents_share_attention",)   # a tensor check sees it


# ---------------------------------------------------------------- STALE
def test_S2_the_setup_guide_counts_the_fortunes_it_reads():
    setup = (ROOT / "docs" / "setup.md").read_text()
    assert "about 14,000 short texts" not in setup
    if "fortunes" in [s.name for s in list_sources() if s.available]:
        assert f"({len(pc.load_lengths('fortunes')):,} here)" in setup


@pytest.mark.parametrize("context", [512, 128])
def test_S3_the_padded_vs_packed_question_quotes_the_live_ratios(context):
    at = open_page("padded_vs_packed", context=context)
    lengths = _content.WORKED_LENGTHS
    rows = pc.strategy_table(lengths, context, overlong="split", batch_size=32, buckets=8, seed=0)
    cut = {r.strategy: r for r in rows}["concat-cut"]
    step = {e.strategy: e for e in end_to_end(rows, MODEL_SHAPES["SmolLM2-135M"])}["concat-cut"]
    page = text(at)
    assert "twelve-fold" not in page
    assert f"attention shrinks {cut.attention_ratio:.1f}-fold but the whole step only gets {step.ratio:.2f} times" in page


# ---------------------------------------------------------------- issue 21: missing teaching, words, predictions
def test_numbers_the_pages_state_come_from_the_library():
    source = (ROOT / "app_pages/leakage_lab.py").read_text() + (ROOT / "app_pages/_content.py").read_text()
    for literal in ("position 40", "8 topics", "9 in 10", "positions 40"):
        assert literal not in source, literal
    assert "positions 40.." not in (ROOT / "packing_lab/zoo/positions.py").read_text()
    assert f"positions {DEFAULT_LENGTHS[0]}.." in zoo("continuous-absolute-positions").what
    page = text(open_page("leakage_lab"))
    assert f"one of {TOPICS} topics (its own {TOKENS_PER_TOPIC} tokens)" in page
    assert f"position {DEFAULT_LENGTHS[0]} for the tiny models" not in page   # shown only after a prediction


def test_why_packing_asks_before_it_answers():
    at = open_page("why_packing")
    assert not at.metric and "Make a prediction" in at.info[0].value
    assert "4,096" not in text(at)
    at.radio(key="v_why_packing.guess").set_value(1024).run()
    assert_clean(at)
    assert at.info[0].value.startswith("Not this time") and "4,096 slots" in at.info[0].value
    assert [m.value for m in at.metric][:2] == ["22.2%", "88.9%"]


def test_the_trade_off_names_bucketings_price_and_shows_its_row_order():
    assert "its loss and token count swing with the bucket it came from" in text(why_packing_answered())
    at = open_page("padded_vs_packed")
    bucket = next(m for m in at.metric if m.label == "bucket rows")
    assert float(bucket.value) > 0.5                               # look-alike neighbours, live
    assert "Bucketing pays this price by design" in text(at)


def test_a_glossary_is_in_the_sidebar_of_every_page():
    for page in ("why_packing", "padded_vs_packed", "masks_and_labels", "bug_zoo", "check_your_setup", "dataset_explorer",
                 "benchmark"):
        at = open_page(page)
        assert any(e.label.startswith("Glossary") for e in at.sidebar.expander), page


def test_jargon_has_a_hover_definition_where_it_first_appears():
    seen = {}
    for page in ("why_packing", "padded_vs_packed", "masks_and_labels"):
        at = open_page(page)
        if page == "why_packing":
            at.checkbox(key="w_why_packing.skip").check().run()
        seen.update(hovers(at))
    for word in ("bfd", "ffd", "next-fit", "varlen", "cu_seqlens", "sdpa", "PackedBatch", "finding"):
        assert seen.get(word) == _content.GLOSSARY[word], word      # a sentence in words beside its first use


def test_findings_show_their_plain_language_rule_before_the_identifier():
    at = open_page("masks_and_labels")
    at.selectbox(key="w_masks_and_labels.break_").set_value("continuous-positions").run()
    card = next(w.value for w in at.warning if "`positions_do_not_restart`" in w.value)
    assert card.startswith("**Fix:**")                                   # what to do, then what is wrong, then its name
    assert card.index(RULES["positions_do_not_restart"].title) < card.index("`positions_do_not_restart`")


def test_a_planted_row_cu_seqlens_changes_the_mask_picture():
    at = open_page("masks_and_labels")
    at.selectbox(key="w_masks_and_labels.attn").set_value("flash_attention_2").run()   # a kernel that reads cu_seqlens
    before = at.get("plotly_chart")[0].proto.spec
    at.selectbox(key="w_masks_and_labels.break_").set_value("row-cu-seqlens").run()
    assert not at.exception
    after = at.get("plotly_chart")[0].proto.spec
    assert after != before   # the kernel's mask, drawn from what flash_attention_2 reads


def test_M4_an_uploaded_batch_of_packed_rows_is_flagged_for_flash_attention():
    import json
    at = open_page("check_your_setup")
    batch = {"input_ids": [[5, 6, 7, 8], [9, 10, 11, 12]], "position_ids": [[0, 1, 0, 1], [0, 1, 2, 0]]}
    at.file_uploader(key="check_your_setup.batch_file").set_value(
        ("rows.json", json.dumps(batch).encode(), "application/json")).run()
    assert_clean(at)
    assert pc.check_hf_batch(batch).format == "packed rows"
    shown = " ".join(c.value for c in at.caption)
    assert "sdpa: SOUND" in shown and "flash_attention_2: 1 ERROR(S): documents_share_attention" in shown
