"""Leakage lab: predict, then run documents alone and packed and compare their logits."""
import streamlit as st

from app_pages import _content
from app_pages._lab import cached_figure, esc, figure, guard, lesson, model_status, page_settings, plan, steps, terms_help
from packing_core.attention import available_backends
from packing_core.experiments import SAME_TOPIC, TOKENS_PER_TOPIC, TOPICS
from packing_core.models import DEFAULT_MODEL, DEFAULT_TEXTS, PRETRAINED, find_model, model_specs
from packing_core.verify import DEFAULT_LENGTHS, MAX_TEXTS, MIN_TEXTS
from packing_core.viz import logit_diff_figure, plan_strip

MODELS = {s.name: s.label for s in model_specs()}   # the registry's models, in its order
ANSWERS = ("They change", "They stay the same")
S = page_settings("leakage_lab", mask="on", positions="reset", model=DEFAULT_MODEL, backend="segments", skip=False,
                  train_seed=0, texts="\n".join(DEFAULT_TEXTS), drift=False, neighbours="related",
                  scenario="correct", use_cache=False)

st.title("Leakage lab")
lesson(__file__)
# one tab per idea, named as the teacher says them (_content.PAGES); training stays behind its button
predict_step, train_step, debate_step = steps(__file__)
predict_step.markdown(
    f"Each document runs through a model twice: alone, and packed in one row with the others "
    f"({len(DEFAULT_LENGTHS)} for the tiny models, {MIN_TEXTS} to {MAX_TEXTS} texts for a pretrained one). Done "
    "right, both give the same logits, up to rounding. Predict what happens to document 1, then look."
)


@st.cache_resource(show_spinner=False)
def loaded(name: str):
    """``(model, tokenizer or None)`` of a registered model, loaded once per process."""
    from packing_core import model_spec
    return model_spec(name).load()


def load_smollm2(where) -> None:
    """Load SmolLM2 once per server, saying so in ``where``; the first load ever converts it, and says how long."""
    import time

    from packing_core.experiments import smollm2_converted

    converting = not smollm2_converted()
    text = ("Converting SmolLM2 from its GGUF file to safetensors: the first load on this server, about 30 s "
            "on 2 cores (`python -m packing_core warm` does it before class)..." if converting else
            "Loading SmolLM2 from its converted copy (about a second)...")
    t0 = time.perf_counter()
    with where, st.spinner(text):
        loaded(PRETRAINED)
    if converting:
        st.session_state["leakage_lab.converted_s"] = time.perf_counter() - t0
    if "leakage_lab.converted_s" in st.session_state:
        where.caption(f"SmolLM2 converted in {st.session_state['leakage_lab.converted_s']:.0f} s; "
                      "later loads read the copy in under a second.")


@st.cache_data(show_spinner="Running the documents alone and packed...", max_entries=64)
def run(model: str, mask: str, positions: str, backend: str, texts: tuple[str, ...] | None = None,
        use_cache: bool = False):
    spec = find_model(model)
    if spec is not None and spec.tokenizer:
        from packing_core.verify import verify_pretrained
        return verify_pretrained(mask=mask, positions=positions, backend=backend, pretrained=loaded(model), texts=texts,
                                 use_cache=use_cache, model_name=model)
    from packing_core import verify_model
    if spec is not None:
        return verify_model(loaded(model)[0], mask=mask, positions=positions, backend=backend)
    from packing_core.verify import verify_pretrained  # a local folder from PACKING_LAB_MODEL_DIRS
    return verify_pretrained(mask=mask, positions=positions, backend=backend, pretrained=local_model(model),
                             texts=texts, model_name=model)


@st.cache_resource(show_spinner="Loading your model (safetensors only, no remote code)...")
def local_model(path: str):
    from packing_core.models import load_local_model
    return load_local_model(path)


DRIFT_STEPS = 20


@st.cache_data(show_spinner=f"Writing {DRIFT_STEPS} tokens of document 1, alone and packed...", max_entries=32)
def drift(mask: str, texts: tuple[str, ...], model: str, positions: str = "reset", backend: str = "segments",
          use_cache: bool = False):
    """The continuations through the verdict's own path: the same backend, use_cache and positions."""
    from packing_core.verify import drift_pretrained
    return drift_pretrained(texts, mask=mask, positions=positions, backend=backend, use_cache=use_cache,
                            steps=DRIFT_STEPS, pretrained=loaded(model))


@st.fragment
def lab() -> None:
    """Only this part reruns when a toggle changes."""
    from packing_core.models import model_dirs

    missing = {n: model_status(n)[1] for n in MODELS if not model_status(n)[0]}
    local = {str(p): f"{p.name} (local folder)" for p in model_dirs()}   # $PACKING_LAB_MODEL_DIRS
    models = [n for n in MODELS if n not in missing] + list(local)
    if st.session_state.get(S.key("model"), DEFAULT_MODEL) not in models:
        st.session_state[S.key("model")] = DEFAULT_MODEL
    scenarios = [n for n, (_, v) in _content.SCENARIOS.items() if v["model"] in models] + [_content.FREE]
    if S.get("scenario") not in scenarios:
        st.session_state[S.key("scenario")] = "correct"
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
    positions = c2.radio("Position ids", ("reset", "continuous"), horizontal=True,
                         **S.bind("positions"))
    model = c3.selectbox("Model", models, format_func=lambda m: MODELS.get(m) or local[m], **S.bind("model"),
                         help="Add your own: list Hugging Face model folders (safetensors) in PACKING_LAB_MODEL_DIRS")
    spec = find_model(model)   # None: a local folder, a transformers model like the pretrained one
    backends = available_backends("cpu") + list(spec.backends if spec is not None else ("sdpa",))
    if st.session_state.get(S.key("backend"), "segments") not in backends:
        st.session_state[S.key("backend")] = "segments"
    backend = c4.selectbox("Attention backend", backends, **S.bind("backend"),
                           help="causal_only ignores document boundaries: the mask bug inside a kernel; "
                                "sdpa is transformers' own attention, which finds documents from position_ids")
    use_cache = grid.checkbox("transformers' cache on (use_cache)", disabled=backend != "sdpa", **S.bind("use_cache"),
                              help="with a cache, transformers' sdpa skips finding documents from position_ids")
    use_cache = bool(use_cache and backend == "sdpa")
    for why in missing.values():
        st.caption(f"The pretrained model is not available here: {esc(why)}")

    texts = None
    if spec is None or spec.tokenizer:
        from packing_core.verify import MAX_TEXT_TOKENS, MAX_TEXTS, MIN_TEXTS
        raw = st.text_area(f"The documents: {MIN_TEXTS} to {MAX_TEXTS} texts, one per line, at most "
                           f"{MAX_TEXT_TOKENS} tokens each. Type your own; the model's tokenizer splits them.",
                           **S.bind("texts"), height=110)
        texts = tuple(line for line in raw.splitlines() if line.strip())
    else:
        from packing_core.verify import DEFAULT_LENGTHS
        row = plan(tuple(DEFAULT_LENGTHS), sum(DEFAULT_LENGTHS), "next-fit")
        figure(cached_figure(plan_strip, row, title=f"The packed row: documents of {', '.join(map(str, DEFAULT_LENGTHS))} "
                                     "random tokens", row_height=40), key=S.key("row"))
    st.markdown("**Predict:** packed after document 0, will the logits of document 1 change?")
    key = f"leakage_lab.guess_{model}_{mask}_{positions}_{backend}_{use_cache}"   # a new question for every setting
    guess = st.radio("Your prediction", ANSWERS, index=None, horizontal=True, key=key,
                     label_visibility="collapsed")
    reveal = st.checkbox("Skip predictions and always show the result", **S.bind("skip"))
    if guess is None and not reveal:
        st.info("Make a prediction to see the result.")
        return

    with guard(f"verify {model} with mask {mask}, positions {positions}, backend {backend}"):
        if model == PRETRAINED:
            load_smollm2(st.container())
        result = run(model, mask, positions, backend, texts, use_cache)
    rep = result
    changed = not rep.documents[1].equivalent
    # the answer to the guess beside the verdict: one row, so the reveal fits the step's two screens
    answer, verdict = st.columns(2) if guess is not None else (None, st.container())
    if guess is not None:
        right = (guess == ANSWERS[0]) == changed
        (answer.success if right else answer.info)(
            f"{'Right' if right else 'Not this time'}: document 1's logits "
            f"{'changed' if changed else 'stayed the same'} (max |Δlogit| {rep.documents[1].max_abs_diff:.1e}, "
            f"tolerance {rep.tolerance:.1e}).")
    if rep.equivalent:
        verdict.success(f"Verdict: EQUIVALENT. Every document matches its alone run within {rep.tolerance:.1e}.")
    else:
        bad = ", ".join(str(d.index) for d in rep.documents if not d.equivalent)
        verdict.warning(f"Verdict: NOT EQUIVALENT. Document(s) {bad} differ by up to {rep.max_abs_diff:.2e}, "
                        f"more than the tolerance {rep.tolerance:.1e}. Nothing raised an error.")
    figure(cached_figure(logit_diff_figure, rep.token_diffs, rep.cu_seqlens, rep.tolerance,
                             title="max |logit alone - logit packed| per token"), key=S.key("diffs"))
    table, why_tolerance = st.columns([3, 2])   # side by side: the reveal fits the step's two screens
    table.dataframe({"document": [d.index for d in rep.documents], "tokens": [d.length for d in rep.documents],
                     "max |Δlogit|": [f"{d.max_abs_diff:.2e}" for d in rep.documents],
                     "verdict": ["same" if d.equivalent else "DIFFERENT" for d in rep.documents]},
                    hide_index=True)
    why_tolerance.caption(f"Tolerance: {esc(rep.tolerance_reason)}")
    if texts is not None:
        # folded: the words back the verdict for a pretrained model, but the reveal above is the step's idea,
        # and the step stays within two projector screens (tests/e2e/test_projector.py)
        changed_n = f" ({len(result.changes)})" if result.changes else ""
        with st.expander(f"In words: the texts, the predictions packing changed{changed_n}, a continuation"):
            st.markdown("**The texts** (document 0, then document 1):")
            st.text("\n".join(result.texts))
            if result.changes:
                st.markdown(f"**Next-token predictions that packing changed: {len(result.changes)}**")
                st.dataframe({"document": [c.document for c in result.changes],
                              "after token": [c.token_text for c in result.changes],
                              "alone predicts": [c.alone_top1 for c in result.changes],
                              "packed predicts": [c.packed_top1 for c in result.changes],
                              "max |Δlogit|": [round(c.delta, 2) for c in result.changes]},
                             hide_index=True, width="stretch")
            elif result.changes is not None:
                st.markdown("**Next-token predictions:** packing changed none of them.")
            if spec is not None and spec.tokenizer:
                from packing_core.verify import drift_path
                path = drift_path(backend, mask, positions, use_cache)
                st.markdown(f"**Drift in words.** Greedy continuations of document 1, {DRIFT_STEPS} tokens each: alone, "
                            f"and packed after document 0, with the settings of the verdict above. Path: {esc(path)}.")
                if st.button("Continue document 1 in words", key=S.key("drift_go")):
                    st.session_state[S.key("drift")] = True
                if S.get("drift"):
                    with guard("continue document 1"):
                        words = drift(mask, texts, model, positions, backend, use_cache)
                    d1, d2 = st.columns(2)
                    d1.markdown("**Alone**")
                    d1.text(words.alone_text)
                    d2.markdown("**Packed after document 0**")
                    d2.text(words.packed_text)
                    st.caption(f"Both continuations followed this path: {esc(words.path)}.")
                    if not words.same:
                        st.warning(f"The words part at generated token {words.first_difference}: on this path, packing "
                                   "changed how document 1 goes on.")
                    elif rep.documents[1].equivalent:
                        st.success("The same words: on this path document 1 computes as it would alone.")
                    else:
                        st.info(f"The same {DRIFT_STEPS} words this time, although the verdict above found document 1's "
                                "logits changed: greedy decoding keeps only the top token, so a drift can hide in the "
                                "words. The logits are the evidence.")
    why_settings_matter()


def why_settings_matter() -> None:
    """The explanation, shown only once the learner has predicted (or chosen to skip predictions); folded,
    so that the reveal and its figure fit the step's two screens, and opened when the teacher explains."""
    with st.expander("Why the settings matter: the mask, the positions, the cache"):
        st.markdown(WHY, help=terms_help(*WHY_TERMS))


WHY_TERMS = ('sdpa', 'KV cache')   # defined beside the text
WHY = (
    "**The mask.** With the mask off, document 1 reads document 0 and its logits move by whole "
    "units. Document 0 still matches: causality already hides everything after it.\n\n"
    "**The positions.** Continuous positions tell document 1 it starts where it happens to sit in the "
    f"row (position {DEFAULT_LENGTHS[0]} for the tiny models) instead of at 0. "
    "A model with learned absolute positions sees different inputs, so its logits change. "
    "With plain RoPE and a correct mask they do not: RoPE makes attention depend only on the "
    "distance between two tokens, and shifting every position of an isolated document by the same "
    "amount keeps every distance. Scaled RoPE that is a fixed function of the config (linear, YaRN, "
    "Llama 3) keeps that property. Dynamic NTK and LongRoPE do not: they choose their frequencies from the "
    "largest position in the row once that passes the trained length. So the rule is "
    "model-specific: keep the positions your model expects. One practical reason to reset them anyway: "
    "transformers' padding-free path starts a document at every step that is not +1 (sdpa/eager) or every "
    "return to the minimum position (FlashAttention, one flattened row), so there continuous positions "
    "remove the mask as well.\n\n"
    "**A wrong mask never errors.** Every setting above runs without a warning. In training the loss "
    "still falls, and it can even look better when neighbouring documents are related (the experiment "
    "below); run alone, as at inference, the model is worse. Tensor checks catch some forms of the bug (an "
    "all-ones mask beside packed positions, cu_seqlens that mark whole rows). The one check that catches every "
    "form is this one: packed against alone, with a tolerance fitted to the dtype (never bitwise equality).\n\n"
    f"**transformers' own attention and its cache.** With `sdpa` and no attention mask, "
    "transformers builds the block-diagonal mask itself from the position ids. Its sdpa/eager/flex paths skip "
    f"that step when a KV cache is in use, and a model called with `use_cache` at its config default "
    "builds one: document 1 then reads document 0 with no warning. Turn the cache off and the same call is "
    "correct."
)

with predict_step:
    lab()


# ---------------------------------------------------------------- a wrong mask never errors
NEIGHBOURS = {"related": f"{SAME_TOPIC:.0%} share a topic (sorted by source)",
              "independent": f"1 in {TOPICS} (shuffled)"}


def train_pair(seed: int, neighbours: str, where):
    """The demo pair from packing_core's cache (memory, then disk), or trained now with a progress bar in ``where``."""
    from packing_core.experiments import train_pair as pair

    bar = None

    def progress(share: float, what: str) -> None:
        nonlocal bar
        bar = bar or where.progress(0.0)
        bar.progress(min(share, 1.0), text=what)

    result = pair(seed, neighbours, progress=progress)
    if bar is not None:
        bar.empty()
    return result


with train_step:
    st.subheader("A wrong mask never errors")
    st.markdown(
        "Two training runs of the tiny model: same starting weights, same batches, same steps. "
        "The only difference is the mask. The documents are synthetic: each is on one of "
        f"{TOPICS} topics (its own {TOKENS_PER_TOPIC} tokens) and starts with a BOS token. "
        "You choose how often a document sits next to one "
        "on the same topic. The model starts from random weights and is small, so both runs finish in "
        "under a minute on a CPU. Then both models are judged the same way: each document alone, as at "
        "inference, and each document with the previous one visible."
    )
    c1, c2, c3 = st.columns([1, 2, 2], vertical_alignment="bottom")
    seed = c1.number_input("Seed", min_value=0, max_value=999, step=1, **S.bind("train_seed"),
                           help="Another seed draws other data and other starting weights.")
    neighbours = c2.radio("Neighbouring documents", list(NEIGHBOURS), format_func=NEIGHBOURS.get, horizontal=True,
                          **S.bind("neighbours"), help="how often a document follows one on its own topic")
    if c3.button("Train both", key=S.key("train"), type="primary"):
        st.session_state[S.key("trained")] = True   # keep showing the runs on later reruns (cached)
    busy = st.container()   # the progress bar sits right under the button, in view while it trains

    if st.session_state.get(S.key("trained")):
        from packing_core.experiments import TOPICS
        from packing_core.viz import DELTA_COLOURS, loss_curves_figure

        with guard(f"train the tiny model with seed {seed}"):
            on, off = train_pair(int(seed), neighbours, busy)
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
        gap = off.train_loss - on.train_loss
        looks = (f"looks better in training: {off.train_loss:.3f} against {on.train_loss:.3f}, because each "
                 "document reads the one before it and borrows its topic" if gap < -0.02 else
                 f"looks no better in training: {off.train_loss:.3f} against {on.train_loss:.3f}, because a "
                 "neighbour on an unrelated topic has nothing to lend")
        worse = "worse" if off.alone_loss > on.alone_loss else "no worse"
        chance = 1 / TOPICS
        if off.drift_share > on.drift_share:   # it reads its neighbour: the lean that inference never feeds
            harm = "That is the harm that counts: it learned to lean on a neighbour that inference never gives it. "
        else:
            harm = (f"It trained with a neighbour always in view, yet it learned to ignore that neighbour (drift "
                    f"{100 * off.drift_share:.0f}%, about a blind guess's {100 * chance:.1f}%); alone it is "
                    f"{worse} all the same. ")
        st.markdown(
            f"**What the numbers say.** The broken run {looks}. Run every held-out document alone, as at "
            f"inference, and it is {worse}: {off.alone_loss:.3f} against {on.alone_loss:.3f}. {harm}"
            "With the previous document visible, after a change of topic the first guess comes from the old "
            f"topic {100 * on.drift_share:.0f}% of the time for the mask-on model and {100 * off.drift_share:.0f}% for "
            f"the mask-off one (a blind guess: 1 in {TOPICS}). The mask-on model never learned to ignore a "
            "neighbour: it never had one. So the drift figure alone does not convict the bug; the alone loss does. "
            + ("Switch the neighbours to *independent*: the better-looking training loss goes away, because it "
               "exists only when neighbours are informative." if neighbours == "related" else
               "With independent neighbours the broken run gains nothing in training: a neighbour on an "
               "unrelated topic has nothing to lend.")
        )
        st.caption(f"Held-out loss packed as in training: mask on {on.packed_loss:.3f}, mask off {off.packed_loss:.3f}; "
                   f"with the previous document visible: mask on {on.visible_loss:.3f}, mask off {off.visible_loss:.3f}. "
                   f"{on.steps} steps each, {on.seconds + off.seconds:.1f} s for both runs.")

with debate_step:
    st.subheader("Is reading across documents always a bug?")
    st.markdown(
        "Not always. Much pretraining concatenates documents with an end-of-text token between them and "
        "uses the plain causal mask on purpose: GPT-3 did so and relied on the separator token to tell "
        "the model that the context before it is unrelated ([Brown et al. 2020, appendix B]"
        "(https://arxiv.org/abs/2005.14165)). nanoGPT's data preparation and transformers' `run_clm.py` "
        "example both concatenate documents under the plain causal mask (nanoGPT with an end-of-text token; "
        "run_clm with whatever special tokens the tokenizer adds, and no separator of its own), and "
        "Megatron-LM's `--reset-attention-mask` and "
        "`--reset-position-ids` are off unless you ask for them.\n\n"
        "Where the mask matters most:\n"
        "- **Long context.** Llama 3 masks across documents and reports that this had little effect in "
        "standard pretraining but mattered in continued pretraining on very long sequences "
        "([Llama 3 report, section 3.2](https://arxiv.org/abs/2407.21783)). The longer the row, the more "
        "unrelated text a token can read.\n"
        "- **Instruction data.** Each answer should depend on its own prompt only. Hugging Face notes that "
        "packing without example boundaries gave cross-example attention that hurt quality and "
        "convergence ([packing with FlashAttention 2](https://huggingface.co/blog/packing-with-FA2)), and "
        "TRL's docs warn that packed sequences can influence one another.\n"
        "- **Measured in pretraining too.** Zhao et al. find that masking within documents removes "
        "distracting context and improves results ([arXiv 2402.13991](https://arxiv.org/abs/2402.13991)).\n\n"
        "This lab's tiny experiment is the clean case: documents that are unrelated by construction, "
        "judged alone. Decide for your data which case you are in, and measure it the same way."
    )
