"""Leakage lab: predict, then compare alone and packed logits; causality; beyond attention; the mask off in training."""
from contextlib import nullcontext

import streamlit as st

from app_pages import _content, _leakage_steps
from app_pages._data import model_status, plan
from app_pages._layout import cached_figure, figure, guard, lesson, prediction, scroll_here, steps, terms_help
from app_pages._links import fragment
from app_pages._progress import progress, waiting
from app_pages._state import Setting, choice, lines, number, page_settings, text
from app_pages._text import esc
from packing_core.attention import available_backends
from packing_core.models import (
    DEFAULT_MODEL,
    DEFAULT_TEXTS,
    PRETRAINED,
    attn_implementations_of,
    load_model,
    model_dirs,
    model_specs,
    runs_texts,
)
from packing_core.verify import (
    DEFAULT_LENGTHS,
    MAX_TEXT_TOKENS,
    MAX_TEXTS,
    MIN_TEXTS,
    attention_arguments,
    drift_path,
    drift_pretrained,
    drift_verdict,
    verify_model,
)
from packing_lab.demos import SAME_TOPIC, TOKENS_PER_TOPIC, TOPICS, TrainPair
from packing_lab.viz import logit_diff_figure, plan_strip

MODELS = {s.name: s.label for s in model_specs()}   # the registry's models, in its order
ANSWERS = ("They change", "They stay the same")
DRIFT_STEPS = 20
S = page_settings("leakage_lab", mask=choice("on", ("on", "off")), positions=choice("reset", ("reset", "continuous")),
                  model=choice(DEFAULT_MODEL, lambda: (*MODELS, *map(str, model_dirs()))),
                  attention=choice("segments", lambda: (*available_backends("cpu"), *attn_implementations_of(PRETRAINED))),
                  skip=False, train_seed=number(0, 0, 999), drift=Setting(False, link=False),
                  texts=text("\n".join(DEFAULT_TEXTS), lines(MIN_TEXTS, MAX_TEXTS, 8 * MAX_TEXT_TOKENS)),
                  neighbours=choice("related", ("related", "independent")), use_cache=False,
                  scenario=choice("correct", (*_content.SCENARIOS, _content.FREE)), causal=choice("on", ("on", "off")),
                  signal=False, guess=choice(None, ANSWERS))

st.title("Leakage lab")
lesson(__file__)
# one tab per idea, named as the teacher says them (_content.PAGES); training stays behind its button
predict_step, mixers_step, train_step, debate_step = steps(__file__)
predict_step.markdown(
    f"Each document runs through a model twice: alone, and packed in one row with the others "
    f"({len(DEFAULT_LENGTHS)} for the tiny models, {MIN_TEXTS} to {MAX_TEXTS} texts for a pretrained one). Done "
    "right, both give the same logits, up to rounding. Predict what happens to document 1, then look."
)


@st.cache_resource(show_spinner="Loading the model (a folder: safetensors only, no remote code)...")
def loaded(name: str):
    """``(model, tokenizer or None)`` of a registered model or a local folder, loaded once per process."""
    return load_model(name)


def load_smollm2(where) -> None:
    """Load SmolLM2 once per server, saying so in ``where`` (the top of the step); the first load ever converts it
    under a bar with the seconds against an estimate this server measured (or a first-run guess, said so)."""
    from packing_lab.demos import WAITS, cold_estimate, convert_smollm2, record_cold, smollm2_converted

    if not smollm2_converted():
        with waiting(where, WAITS["convert"][0] + " (`packing-lab warm` does it before class)",
                     cold_estimate("convert")) as spent:
            convert_smollm2()   # converts and caches the copy, builds no model: the cached loader below reads it
        st.session_state["leakage_lab.converted_s"] = spent()
        record_cold("convert", spent())
    with where, st.spinner("Loading SmolLM2 from its converted copy (about a second)..."):
        loaded(PRETRAINED)
    if "leakage_lab.converted_s" in st.session_state:
        where.caption(f"SmolLM2 converted in {st.session_state['leakage_lab.converted_s']:.0f} s; "
                      "later loads read the copy in under a second.")


@st.cache_data(show_spinner="Running the documents alone and packed...", max_entries=64)
def run(model: str, mask: str, positions: str, attention: str, texts: tuple[str, ...] | None = None,
        use_cache: bool = False, causal: bool = True):
    return verify_model(model, mask=mask, positions=positions, texts=texts, use_cache=use_cache, causal=causal,
                        loaded=loaded(model), **attention_arguments(attention))


@st.cache_data(show_spinner=f"Writing {DRIFT_STEPS} tokens of document 1, alone and packed...", max_entries=32)
def drift(mask: str, texts: tuple[str, ...], model: str, positions: str = "reset", attention: str = "segments",
          use_cache: bool = False):
    """The continuations through the verdict's own path: the same attention, use_cache and positions."""
    return drift_pretrained(texts, mask=mask, positions=positions, use_cache=use_cache, steps=DRIFT_STEPS,
                            pretrained=loaded(model), **attention_arguments(attention))


@fragment("leakage_lab")
def lab() -> None:
    """Only this part reruns when a toggle changes."""
    busy = st.container()    # the top of the step: SmolLM2's first conversion shows its bar here
    missing = {n: model_status(n)[1] for n in MODELS if not model_status(n)[0]}
    local = {str(p): f"{p.name} (local folder)" for p in model_dirs()}   # $PACKING_LAB_MODEL_DIRS
    models = [n for n in MODELS if n not in missing] + list(local)
    S.keep_within("model", models, DEFAULT_MODEL)
    scenarios = [n for n, (_, v) in _content.SCENARIOS.items() if v["model"] in models] + [_content.FREE]
    S.keep_within("scenario", scenarios, "correct")
    if S.from_link():   # a link says every switch itself: its scenario must not reset them
        st.session_state[S.key("applied")] = S.get("scenario")
    scenario = st.selectbox("Scenario", scenarios, **S.bind("scenario"),
                            format_func=lambda n: _content.SCENARIOS[n][0] if n in _content.SCENARIOS
                            else "Advanced: set every switch yourself")
    if scenario in _content.SCENARIOS and st.session_state.get(S.key("applied")) != scenario:
        for name, value in _content.SCENARIOS[scenario][1].items():   # the widgets below pick these up
            st.session_state[S.key(name)] = value
        st.session_state[S.key("applied")] = scenario
    if scenario == _content.FREE:
        st.session_state[S.key("applied")] = _content.FREE
    # the free grid: open when the learner chose it, folded away under a named scenario
    grid = st.container(border=True) if scenario == _content.FREE else st.expander("Advanced: every switch")
    c1, c2, c3, c4 = grid.columns(4)
    mask = c1.radio("Attention mask", ("on", "off"), horizontal=True, **S.bind("mask"),
                    help="off = the runner gets cu_seqlens [0, T]: one causal triangle over the whole row")
    positions = c2.radio("Position ids", ("reset", "continuous"), horizontal=True, **S.bind("positions"))
    model = c3.selectbox("Model", models, format_func=lambda m: MODELS.get(m) or local[m], **S.bind("model"),
                         help="Add your own: list Hugging Face model folders (safetensors) in PACKING_LAB_MODEL_DIRS")
    own = attn_implementations_of(model)   # transformers' own attention, for a model that has it
    S.keep_within("attention", available_backends("cpu") + list(own), "segments")
    attention = c4.selectbox("Attention", available_backends("cpu") + list(own), **S.bind("attention"),
                             help="the lab's backends; causal_only ignores document boundaries (the mask bug inside "
                                  "a kernel); sdpa is transformers' own attention, which finds documents from "
                                  "position_ids")
    use_cache = grid.checkbox("transformers' cache on (use_cache)", disabled=attention not in own,
                              **S.bind("use_cache"), help="with a cache, transformers' sdpa skips finding documents "
                                                          "from position_ids")
    use_cache = bool(use_cache and attention in own)
    causal = grid.radio("Causal flag", ("on", "off"), horizontal=True, disabled=attention in own, **S.bind("causal")) == "on"
    for why in missing.values():
        st.caption(f"The pretrained model is not available here: {esc(why)}")

    texts = None
    if runs_texts(model):
        raw = st.text_area(f"The documents: {MIN_TEXTS} to {MAX_TEXTS} texts, one per line, at most "
                           f"{MAX_TEXT_TOKENS} tokens each. Type your own; the model's tokenizer splits them.",
                           **S.bind("texts"), height=110)
        texts = tuple(line for line in raw.splitlines() if line.strip())
    else:
        row = plan(tuple(DEFAULT_LENGTHS), sum(DEFAULT_LENGTHS), "next-fit")
        figure(cached_figure(plan_strip, row, title=f"The packed row: documents of {', '.join(map(str, DEFAULT_LENGTHS))} "
                                                    "random tokens", row_height=40), key=S.key("row"))
    st.markdown("**Predict:** packed after document 0, will the logits of document 1 change?")
    key = f"{model}_{mask}_{positions}_{attention}_{use_cache}" + ("" if causal else "_acausal")
    S.answer_to("guess", key)     # a prediction answers these switches; a link carries it
    guess = prediction(S, ANSWERS)
    reveal = st.checkbox("Skip predictions and always show the result", **S.bind("skip"))
    if guess is None and not reveal:
        st.info("Make a prediction to see the result.")
        return

    with guard(f"verify {model} with mask {mask}, positions {positions}, attention {attention}"):
        if model == PRETRAINED:
            load_smollm2(busy)
        rep = run(model, mask, positions, attention, texts, use_cache, causal or attention in own)
    doc1 = rep.documents[1]
    # the answer to the guess beside the verdict: one row, so the reveal fits the step's two screens
    answer, verdict = st.columns(2) if guess is not None else (None, st.container())
    if guess is not None:
        right = (guess == ANSWERS[0]) == (not doc1.equivalent)
        (answer.success if right else answer.info)(
            f"{'Right' if right else 'Not this time'}: document 1's logits "
            f"{'stayed the same' if doc1.equivalent else 'changed'} (max |Δlogit| {doc1.max_abs_diff:.1e}, "
            f"tolerance {rep.tolerance:.1e}).")
    scroll_here("leakage_lab.answer", (key, guess, reveal))   # the answer in view on a projector
    _leakage_steps.verdicts(rep, verdict)     # isolation and causality, the second check beside the first
    figure(cached_figure(logit_diff_figure, rep.token_diffs, rep.cu_seqlens, rep.tolerance,
                         title="max |logit alone - logit packed| per token"), key=S.key("diffs"))
    # folded: the figure above shows each document; the step stays within two projector screens
    with st.expander("Each document's numbers, and the tolerance"):
        table, why_tolerance = st.columns([3, 2])
        table.dataframe({"document": [d.index for d in rep.documents], "tokens": [d.length for d in rep.documents],
                         "max |Δlogit|": [f"{d.max_abs_diff:.2e}" for d in rep.documents],
                         "verdict": [d.verdict for d in rep.documents]}, hide_index=True)
        why_tolerance.caption(f"Tolerance: {esc(rep.tolerance_reason)}")
    if texts is not None:
        # folded: the words back the verdict for a pretrained model, but the reveal above is the step's idea,
        # and the step stays within two projector screens (tests/e2e/test_projector.py)
        in_words(rep, texts, model, mask, positions, attention, use_cache)
    with st.expander("Why the settings matter: the mask, the positions, the cache"):
        st.markdown(_content.LEAKAGE_WHY.format(first=DEFAULT_LENGTHS[0]), help=terms_help(*_content.LEAKAGE_WHY_TERMS))


def in_words(rep, texts, model, mask, positions, attention, use_cache) -> None:
    """The texts, the next-token predictions packing changed, and a continuation of document 1 on the same path."""
    changed_n = f" ({len(rep.changes)})" if rep.changes else ""
    with st.expander(f"In words: the texts, the predictions packing changed{changed_n}, a continuation"):
        st.markdown("**The texts** (document 0, then document 1):")
        st.text("\n".join(rep.texts))
        if rep.changes:
            st.markdown(f"**Next-token predictions that packing changed: {len(rep.changes)}**")
            st.dataframe({"document": [c.document for c in rep.changes],
                          "after token": [c.token_text for c in rep.changes],
                          "alone predicts": [c.alone_top1 for c in rep.changes],
                          "packed predicts": [c.packed_top1 for c in rep.changes],
                          "max |Δlogit|": [round(c.delta, 2) for c in rep.changes]}, hide_index=True, width="stretch")
        elif rep.changes is not None:
            st.markdown("**Next-token predictions:** packing changed none of them.")
        path = drift_path(attention, mask, positions, use_cache)
        st.markdown(f"**Drift in words.** Greedy continuations of document 1, {DRIFT_STEPS} tokens each: alone, "
                    f"and packed after document 0, with the settings of the verdict above. Path: {esc(path)}.")
        if st.button("Continue document 1 in words", key=S.key("drift_go")):
            st.session_state[S.key("drift")] = True
        if not S.get("drift"):
            return
        with guard("continue document 1"):
            words = drift(mask, texts, model, positions, attention, use_cache)
        d1, d2 = st.columns(2)
        d1.markdown("**Alone**")
        d1.text(words.alone_text)
        d2.markdown("**Packed after document 0**")
        d2.text(words.packed_text)
        st.caption(f"Both continuations followed this path: {esc(words.path)}.")
        severity, sentence = drift_verdict(words, not rep.documents[1].equivalent)
        getattr(st, severity)(sentence)

with predict_step:
    lab()
with mixers_step:
    _leakage_steps.not_only_attention(S)


# ---------------------------------------------------------------- a wrong mask never errors
NEIGHBOURS = {"related": f"{SAME_TOPIC:.0%} share a topic (sorted by source)",
              "independent": f"1 in {TOPICS} (shuffled)"}


with train_step:
    busy = st.container()   # the top of the step: a run's progress shows here, scrolled into view
    st.subheader("A wrong mask never errors")
    # the choice the lesson asks for (how often neighbours share a topic) and the button first, the seed last: on the
    # focused screen (controls=hidden) the seed goes and leaves no gap between them; the explanation under the runs
    c2, c3, c1 = st.columns([2, 1, 1], vertical_alignment="bottom")
    seed = c1.number_input("Seed", min_value=0, max_value=999, step=1, **S.bind("train_seed"),
                           help="Another seed draws other data and other starting weights.")
    neighbours = c2.radio("Neighbouring documents", list(NEIGHBOURS), format_func=NEIGHBOURS.get, horizontal=True,
                          **S.bind("neighbours", lesson=True), help="how often a document follows one on its own topic")
    from packing_lab.demos import cached_pair, train_estimate, train_pair

    chosen, estimate = (int(seed), neighbours), train_estimate(int(seed), neighbours)
    pressed = c3.button("Train both", key=S.key("train"), type="primary", help=f"{estimate.about()}: {estimate.basis}")
    if pressed:
        st.session_state[S.key("trained")] = chosen   # what the runs below show, until the button is pressed again
    st.caption(f"**Train both** takes {estimate.about()} for these settings ({esc(estimate.basis)}). Changing a "
               "setting trains nothing until you press it.")
    ran, pair = st.session_state.get(S.key("trained")), None
    if ran:
        from packing_lab.viz import DELTA_COLOURS, loss_curves_figure

        with guard(f"train the tiny model with seed {ran[0]}"):   # only the button trains; else the cache
            with progress(busy, estimate) if pressed and estimate.seconds else nullcontext() as update:
                pair = train_pair(*ran, progress=update) if pressed else cached_pair(*ran)
        stale = tuple(ran) != chosen
        if stale:
            st.warning(f"Stale: the runs below are seed {ran[0]} with {NEIGHBOURS[ran[1]]}. The settings above "
                       f"changed; press **Train both** to train seed {chosen[0]} ({estimate.about()}).")
    if pair is not None:
        pair = TrainPair(*pair)
        on, off = pair
        result = st.container(key="stale_leakage_lab_train" if stale else "leakage_lab_train")
        with result:
            figure(cached_figure(loss_curves_figure, [on, off],
                                 title="Training loss per step, and the loss with each document alone"),
                   key=S.key("train_curves"))
            m1, m2, m3 = st.columns(3)
            m1.metric("Train loss, mask on", f"{on.train_loss:.3f}")
            # deltas coloured by meaning (viz.style.DELTA_COLOURS): the broken run's lower train loss is no good news
            m1.metric("Train loss, mask off", f"{off.train_loss:.3f}", delta=f"{off.train_loss - on.train_loss:+.3f}",
                      delta_color=DELTA_COLOURS["neutral"], help="mean of the last 20 steps, as the training log shows it")
            m2.metric("Loss alone, mask on", f"{on.alone_loss:.3f}")
            m2.metric("Loss alone, mask off", f"{off.alone_loss:.3f}", delta=f"{off.alone_loss - on.alone_loss:+.3f}",
                      delta_color=DELTA_COLOURS["leak" if off.alone_loss > on.alone_loss else "neutral"],
                      help="held-out documents, each run on its own, as at inference: the real harm")
            m3.metric("Drift with the previous document visible, mask on", f"{100 * on.drift_share:.0f}%")
            m3.metric("Drift with the previous document visible, mask off", f"{100 * off.drift_share:.0f}%",
                      delta=f"{100 * (off.drift_share - on.drift_share):+.0f} points", delta_color=DELTA_COLOURS["neutral"],
                      help=f"both models read the previous document here; over {off.drift_cases} documents that "
                           "follow one on another topic, how often the first guess comes from the old topic")
            st.markdown(f"**What the numbers say.** {pair.story()}")   # library text, no user input
            st.caption(f"Held-out loss packed as in training: mask on {on.packed_loss:.3f}, mask off {off.packed_loss:.3f}; "
                       f"with the previous document visible: mask on {on.visible_loss:.3f}, mask off {off.visible_loss:.3f}. "
                       f"{on.steps} steps each, {on.seconds + off.seconds:.1f} s for both runs.")

    st.markdown(_content.LEAKAGE_TRAIN.format(topics=TOPICS, tokens=TOKENS_PER_TOPIC))

with debate_step:
    st.subheader("Is reading across documents always a bug?")
    st.markdown(_content.LEAKAGE_DEBATE)
