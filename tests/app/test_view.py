"""A view is a link: the page's step and settings live in the URL, a link restores them, a bad link is named
in one line and never breaks the page; work that takes time runs only on its button."""
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages import _content, _state, _text
from packing_lab.demos import warm as W
from packing_lab.demos.train import TrainResult
from tests._support import assert_clean, markdown

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TIMEOUT = 180


def opened(page: str, **params) -> AppTest:
    """``page`` opened from a link with ``params`` (a new session, as a browser opening the URL)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for name, value in params.items():
        at.query_params[name] = value
    at.switch_page(f"app_pages/{page}.py").run()
    return at


def notes(at: AppTest) -> list[str]:
    return [i.value for i in at.info if i.value.startswith("Part of this link was ignored")]


def url(at: AppTest) -> dict:
    return {k: v[-1] if isinstance(v, list) else v for k, v in dict(at.query_params).items()}


def test_a_link_sets_the_step_and_every_setting_it_names():
    at = opened("masks_and_labels", step="4", width="128", instruction="1", attn="flash_attention_2",
                **{"break": "prompts-in-the-loss"})
    assert not at.exception and at.error                                     # the planted bug's error: red
    ss = at.session_state
    assert (ss["masks_and_labels.width"], ss["masks_and_labels.instruction"], ss["masks_and_labels.attn"],
            ss["masks_and_labels.break_"]) == (128, True, "flash_attention_2", "prompts-in-the-loss")
    assert ss["masks_and_labels.step"] == "4 · Break it, check it"
    assert at.select_slider(key="w_masks_and_labels.width").value == 128      # the widgets show the link's values
    assert at.selectbox(key="w_masks_and_labels.break_").value == "prompts-in-the-loss"
    assert notes(at) == []
    assert url(at) == {"step": "4", "width": "128", "instruction": "1", "attn": "flash_attention_2",
                       "break": "prompts-in-the-loss"}


def test_the_url_follows_the_view_and_leaves_out_what_is_at_its_default():
    at = opened("masks_and_labels")
    assert url(at) == {}
    at.select_slider(key="w_masks_and_labels.width").set_value(256).run()
    at.selectbox(key="w_masks_and_labels.attn").set_value("eager").run()
    assert url(at) == {"width": "256", "attn": "eager"}
    at.select_slider(key="w_masks_and_labels.width").set_value(64).run()      # back to its default: out of the URL
    assert url(at) == {"attn": "eager"}
    again = opened("masks_and_labels", **url(at))                           # the link opens that view
    assert again.selectbox(key="w_masks_and_labels.attn").value == "eager"
    assert again.select_slider(key="w_masks_and_labels.width").value == 64


def test_the_shared_settings_travel_in_the_link_too():
    at = opened("padded_vs_packed", context="2048", strategy="bfd")
    assert_clean(at)
    assert at.session_state["context"] == 2048 and at.session_state["padded_vs_packed.strategy"] == "bfd"
    assert url(at) == {"context": "2048", "strategy": "bfd"}


BAD = {
    "markup": "<script>alert(1)</script><b id=x>",
    "oversized": "7" * 10_000,
    "out of range": "-1",
    "not a number": "nan",
}


@pytest.fixture(scope="module")
def declarations() -> dict:
    """Each page's declared settings, as the page itself declares them when it runs (``page_settings``)."""
    for p in _content.PAGES:
        AppTest.from_file(APP, default_timeout=TIMEOUT).switch_page(p.path).run()
    return {p.name: _state._DECLARED[p.name].settings for p in _content.PAGES}


@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("page", [p.name for p in _content.PAGES])
def test_a_bad_link_opens_the_default_view_and_names_what_it_ignored(page, kind, declarations):
    """Every declared setting of the page and of the sidebar gets the bad value at once, with an unknown name and a
    step past the last: no exception, no error box, every setting at its default, one line naming each."""
    own = declarations[page]
    keys = {**{n: n for n in _state.SHARED.settings}, **{n: f"{page}.{n}" for n in own}}
    settings = {**_state.SHARED.settings, **own}
    params = {_state._param(n): BAD[kind] for n, s in settings.items() if s.link}
    at = opened(page, **params, nonsense=BAD[kind], step="99")
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    lines = notes(at)
    assert len(lines) == 1, lines
    for name, s in settings.items():
        if s.link and keys[name] in at.session_state:     # a setting no widget of this view drew is not set
            assert at.session_state[keys[name]] == s.default, (name, at.session_state[keys[name]])
    assert all(_text.esc(param) in lines[0] for param in (*params, "nonsense", "step")), lines[0]
    assert "<script>" not in lines[0] and "<b " not in lines[0]              # never markup from the URL
    assert url(at) == {}                                                     # the URL keeps only what was used


def test_an_unknown_step_is_named_and_the_first_step_opens():
    at = opened("why_packing", step="7")
    assert at.session_state["why_packing.step"] == "1 · Pad or pack?"
    assert any("step" in n for n in notes(at))


def test_each_step_ends_with_the_next_step_and_the_last_with_the_next_page():
    at = opened("masks_and_labels")
    spec = _content.page("masks_and_labels")
    labels = [b.label for b in at.button if b.key and b.key.startswith("masks_and_labels.next_")]
    assert labels == [f"Next: step {_state.step_label(i, name)}" for i, name in enumerate(spec.steps, 1)][1:]
    links = [e for e in at.get("page_link")]
    assert [link.proto.label for link in links] == ["Next page: Leakage lab"]
    at.button(key="masks_and_labels.next_1").click().run()
    assert at.session_state["masks_and_labels.step"] == "2 · Positions" and url(at) == {"step": "2"}
    assert at.session_state["masks_and_labels.lesson_open"] is False       # the lesson box folds once read


def test_the_lesson_box_is_folded_on_a_first_visit_and_for_a_focused_screen():
    assert opened("bug_zoo").session_state["bug_zoo.lesson_open"] is False   # the step's figure comes first
    at = opened("bug_zoo", controls="hidden")
    assert at.session_state["bug_zoo.lesson_open"] is False
    assert url(at) == {"controls": "hidden"}                                # the flag stays in the view's link
    assert "The reproduced bugs were reported in real projects" in markdown(at)  # the lesson is still there, folded


# ---------------------------------------------------------------- no dead time: training only on the button
def _result(mask: str, seed: int) -> TrainResult:
    return TrainResult(mask=mask, seed=seed, steps=60, same_topic=0.9, losses=(2.0,) * 60,
                       train_loss=1.25 if mask == "on" else 1.05, packed_loss=1.2, alone_loss=1.2 if mask == "on" else 1.3,
                       visible_loss=1.1, drift_share=0.5, drift_cases=10, seconds=3.0)


def test_a_new_seed_or_neighbours_after_train_both_train_nothing_until_the_button(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(W, "_memo", {(0, "related"): (_result("on", 0), _result("off", 0))})
    trained = []

    def train_demo(mask, *, seed, same_topic, progress=None, **kw):
        trained.append((mask, seed))
        return _result(mask, seed)

    monkeypatch.setattr(W, "train_demo", train_demo)
    at = opened("leakage_lab")
    at.button(key="leakage_lab.train").click().run()
    assert trained == [] and any(m.label == "Train loss, mask off" for m in at.metric)   # the cached pair, at once
    at.number_input(key="w_leakage_lab.train_seed").set_value(3).run()
    at.radio(key="v_leakage_lab.neighbours").set_value("independent").run()
    assert_clean(at)
    assert trained == []                                                       # no training without the button
    stale = [w.value for w in at.warning if w.value.startswith("Stale")]
    assert len(stale) == 1 and "seed 0" in stale[0] and "train seed 3" in stale[0]
    assert any(m.label == "Train loss, mask off" for m in at.metric)          # the old runs stay, dimmed
    before = [c.value for c in at.caption if c.value.startswith("**Train both** takes")]
    assert before and "about 6 s" in before[0]          # an estimate before the click: the pair this server trained
    at.button(key="leakage_lab.train").click().run()
    assert trained == [("on", 3), ("off", 3)]
    assert not [w for w in at.warning if w.value.startswith("Stale")]
    # the link holds the new seed and neighbours (beside what the page's opening scenario set)
    assert {"train_seed": "3", "neighbours": "independent"}.items() <= url(at).items()


# ---------------------------------------------------------------- the benchmark: the lesson's context, estimates first
def test_the_benchmark_runs_at_the_lessons_context_whatever_the_sidebar_says():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["context"] = 2048
    at.switch_page("app_pages/benchmark.py").run()
    assert_clean(at)
    text = markdown(at)
    assert f"at context {_content.WORKED_CONTEXT}, in full squares. Padded" in text
    captions = " ".join(c.value for c in at.caption)
    assert "does not follow the sidebar's context (2048)" in captions
    assert "**Run the benchmark** takes" in captions and "**Break down** takes" in captions


def test_the_breakdown_is_cut_to_fit_a_minute_and_says_so(monkeypatch):
    from packing_lab.demos import estimate as E

    slow = E.AttentionRate(per_call=1e-3, per_cell=2e-9, masked_per_cell=5e-9, context=2048, heads=8, head_dim=64)
    monkeypatch.setattr(E, "attention_rate", lambda context, heads, head_dim=64: slow)
    at = opened("benchmark", bench_context="2048", docs="2048")
    assert_clean(at)
    captions = " ".join(c.value for c in at.caption)
    assert "The breakdown times" in captions and "of the 2048 documents" in captions


# ---------------------------------------------------------------- the prediction and the step-through are the view too
def test_an_answered_prediction_travels_in_the_link_and_opens_a_later_step_answered():
    at = opened("why_packing")
    at.radio(key="v_why_packing.guess").set_value(4096).run()
    assert url(at) == {"guess": "4096"}
    later = opened("why_packing", step="4", guess="4096", rows_per_step="128")
    assert_clean(later)
    assert not [i.value for i in later.info if i.value.startswith("Make a prediction")]
    assert any(m.label == "Steps per epoch" for m in later.metric)
    assert url(later) == {"step": "4", "guess": "4096", "rows_per_step": "128"}


def test_a_link_without_the_prediction_opens_the_gate_it_would_open_for_the_sender():
    at = opened("why_packing", step="4")
    assert any(i.value.startswith("Make a prediction in step 1 first") for i in at.info)


def test_a_leakage_prediction_answers_its_switches_and_a_link_carries_it():
    at = opened("leakage_lab")
    at.radio(key="v_leakage_lab.guess").set_value("They change").run()
    assert url(at)["guess"] == "They change"
    at.radio(key="w_leakage_lab.mask").set_value("off").run()             # another question: predict again
    assert at.session_state["leakage_lab.guess"] is None and "guess" not in url(at)
    again = opened("leakage_lab", guess="They stay the same", mask="off", scenario="advanced")
    assert_clean(again)
    assert again.session_state["leakage_lab.guess"] == "They stay the same"
    assert any(s.value.startswith("Not this time") for s in again.info)   # mask off: the logits change


def test_a_watch_it_pack_link_opens_at_its_packer_and_placement():
    at = opened("watch_it_pack", strategy="ffd", shown="5")
    assert_clean(at)
    assert "**Step 5 of 13:" in markdown(at)
    assert url(at) == {"strategy": "ffd", "shown": "5"}
    at.radio(key="v_watch_it_pack.strategy").set_value("bfd").run()        # the class's own change starts over
    assert "**13 pieces wait**" in markdown(at) and url(at) == {}
