"""Bug zoo: packing bugs reported in real projects, reproduced live; classic faults planted in a small batch; and how
losses weight documents."""
import streamlit as st

from app_pages._layout import figure, guard, lesson, steps
from app_pages._progress import waiting
from app_pages._state import choice, number, page_settings, text
from app_pages._text import esc
from packing_core import InputError
from packing_core.batch import LOSS_RULES
from packing_core.data import parse_lengths
from packing_lab.advice import AVERAGING_RULES, PRESETS, dpo_pair_gradients, pair_gradient, parse_layout, step_loss_weights
from packing_lab.viz import zoo_figures
from packing_lab.zoo import ZOO

OWN = "your own"   # the calculator's preset that leaves every setting to the learner
S = page_settings("bug_zoo", rows=text("4 | 60 60", lambda raw: parse_lengths(raw.replace("|", " "))),
                  preset=choice("split-pairs", (*PRESETS, OWN)), layout=text("1 || 1 1 1", parse_layout),
                  accumulation=number(2, 1, 64), ranks=number(1, 1, 64), rule=choice("document-micro", AVERAGING_RULES),
                  twice=False)

st.title("Bug zoo")
lesson(__file__)
with st.expander("How to read the zoo: reported bugs, planted faults, and what each check says"):   # the steps first
    st.markdown(
        "Packing bugs reported in real projects, each reproduced live, and classic mistakes planted in a small batch. "
        "All but one run without an error, and the loss still "
        "falls. Position ids left unpadded make transformers raise an IndexError, or misalign silently elsewhere. "
        "Each entry says what goes wrong, where it was reported, and how it was fixed; **Reproduce** runs it on the "
        "lab's models, broken and fixed, draws what went wrong beside the fix (the logits against each document "
        "alone, each layer's output, the mask, the targets or the positions), and shows what the lab's checks say of "
        "each. The bugs beyond attention are judged for the model's own layers (`check --model-type`); one of them "
        "only the causality check sees. A planted fault needs no model: **Plant it** draws it in a small batch."
    )


@st.cache_data(show_spinner="Reproducing the bug, broken and fixed (SmolLM2 entries take a few seconds)...",
               max_entries=32)
def reproduce(name: str):
    from packing_lab.zoo import reproduce_bug
    return reproduce_bug(name)


@st.cache_data(show_spinner=False, max_entries=16)
def plant(name: str):
    from packing_lab.zoo import plant_bug
    return plant_bug(name)


def cold_smollm2(where) -> None:
    """SmolLM2 and its tokenizer, converted from the GGUF file on a cold server under a bar at ``where`` (the
    estimate this server measured, or a first-run guess), before a reproduction needs them."""
    from packing_lab.demos import WAITS, cold_estimate, convert_smollm2, record_cold, smollm2_converted, tokenizer_extracted

    if smollm2_converted() and tokenizer_extracted():
        return
    with waiting(where, WAITS["convert"][0], cold_estimate("convert")) as spent:
        convert_smollm2()       # the converted copy and its tokenizer, no model built (a reproduction loads it)
    record_cold("convert", spent())


def reference(parts) -> str:
    """One tracker reference, its issue numbers as links."""
    return "".join(f"[{esc(text)}]({url})" if url else esc(text) for text, url in parts)


def entry(bug) -> None:
    """One bug: what goes wrong, where it was reported, the fix, and its reproduction on demand."""
    with st.expander(f"**{esc(bug.title)}** · `{bug.name}`"):
        st.markdown(f"**What goes wrong.** {esc(bug.what)}")
        if bug.reported:
            st.markdown("**Where it was reported.**\n" + "\n".join(f"- {reference(r)}" for r in bug.links))
        st.markdown(f"**The fix.** {esc(bug.fix)}")
        caught = bug.caught_words
        if bug.planted:
            st.caption(f"Planted in a small batch (no model), as on the Masks and labels page. Caught by: {esc(caught)}.")
        else:
            st.caption(f"Reproduced on: {esc(bug.needs)}. Caught by: {esc(caught)}.")
        if st.button("Plant it" if bug.planted else "Reproduce", key=S.key(f"run_{bug.name}")):
            st.session_state[S.key(f"shown_{bug.name}")] = True
        if st.session_state.get(S.key(f"shown_{bug.name}")):
            with guard(f"reproduce {bug.name}"):
                if "SmolLM2" in bug.needs:
                    cold_smollm2(st.container())   # a cold server converts it first, under a bar with the seconds
                r = plant(bug.name) if bug.planted else reproduce(bug.name)
            c1, c2 = st.columns(2)
            c1.markdown(f"**Broken:** {esc(r.symptom)}")
            c2.markdown(f"**Fixed:** {esc(r.fixed)}")
            for part, fig in zoo_figures(r).items():
                figure(fig, key=S.key(f"figure_{bug.name}_{part}"))
            (st.success if r.caught else st.warning)(
                f"The lab's check {'catches it' if r.caught else 'misses it'}: {esc(r.check_says)}")
            (st.success if r.silent_on_fix else st.warning)(
                "On the fixed setup the check is silent." if r.silent_on_fix else "The check still complains on the fix.")


reproduced_step, planted_step, loss_step, accumulation_step = steps(__file__)
with reproduced_step:
    st.caption("Each runs on a model, broken and fixed.")
    for bug in ZOO:
        if not bug.planted:
            entry(bug)
with planted_step:
    st.caption("Each is planted in a small batch of the lab's own: no model, only the tensors a trainer hands over.")
    for bug in ZOO:
        if bug.planted:
            entry(bug)

with loss_step:
    st.subheader("How a loss average weights documents")
    raw = st.text_input("Counted tokens per document, rows separated by |", **S.bind("rows"),
                        help="e.g. 4 | 60 60: a 4-token document alone in row 0, two 60-token documents in row 1")


    @st.cache_data(show_spinner="Measuring the weights on the tiny model...", max_entries=32)
    def weights(rows: tuple[tuple[int, ...], ...]):
        from packing_lab.demos import loss_lesson
        return loss_lesson(rows)


    with guard("read the rows"):
        rows = tuple(tuple(parse_lengths(part.replace(" ", ",")).tolist()) for part in raw.split("|") if part.strip())
        if not rows:
            raise InputError("no documents given: type counted tokens per document, e.g. 4 | 60 60")
        lesson = weights(rows)
    labels = [f"row {r}, doc {i} ({n} tokens)" for r, row in enumerate(rows) for i, n in enumerate(row)]
    st.dataframe({"document": labels,
                  **{f"per {rule}": [f"{w:.3f}" for w in lesson.measured[rule]] for rule in LOSS_RULES}},
                 hide_index=True)
    st.caption("Measured with autograd on the tiny model (random init, for speed): d(loss)/d(token loss), summed per "
               "document. They equal the formula exactly: the weights belong to the rule and the packing, not the "
               "model. The loss itself: " + ", ".join(f"per {r} {lesson.loss[r]:.3f}" for r in LOSS_RULES) + ".")
    st.markdown(
        "Once documents share rows, *how* the per-token losses are averaged decides how much each document "
        "counts. The weight of a document above is its share of the gradient: the sum over its tokens of "
        "d(loss)/d(token loss).\n\n"
        "- **per token**: sum of token losses / number of counted tokens. Every token weighs the same; a document "
        "weighs its share of the tokens, wherever it was packed.\n"
        "- **per row**: mean in each row, then over rows. A row weighs the same whatever it holds, so a short "
        "document alone in a row counts as much as a row of long ones.\n"
        "- **per document**: mean in each document, then over documents. Every document weighs the same, "
        "whatever its length."
    )
    st.markdown(
        "**What transformers and TRL do: per token, over the global batch.** transformers' `ForCausalLMLoss` "
        "flattens every row and calls `fixed_cross_entropy`, which sums and divides by `num_items_in_batch` when "
        "it is given (else takes the mean over the forward's counted tokens): no per-row mean. `Trainer` counts "
        "`num_items_in_batch` over all gradient-accumulation micro-batches, counting the prediction targets "
        "(`labels[..., 1:].ne(-100).sum()`, or `shift_labels` when the collator gives them) and, with "
        "`average_tokens_across_devices` (default True in 5.24), over every data-parallel rank. "
        "huggingface/transformers #34191 brought the count over gradient accumulation; #34373 added the option "
        "to count tokens across devices (off by default then). TRL's "
        "`SFTTrainer.compute_loss` passes `num_items_in_batch` on to `Trainer.compute_loss`, so it follows the same "
        "rule. A model that accepts no loss kwargs falls back to a per-micro-batch mean (huggingface/transformers #37766)."
    )


# ---------------------------------------------------------------- the calculator: accumulation and ranks
with accumulation_step:
    st.subheader("A loss-weight calculator: the rule, the accumulation steps, the ranks")
    preset = st.selectbox("Preset", [*PRESETS, OWN], **S.bind("preset"),
                          format_func=lambda k: f"{PRESETS[k].title} ({PRESETS[k].reported})" if k in PRESETS else
                          "your own: set every field")
    if preset in PRESETS and st.session_state.get(S.key("applied")) != preset:
        p = PRESETS[preset]
        for name, value in dict(layout=p.layout, accumulation=p.accumulation, ranks=p.ranks, rule=p.rule,
                                twice=p.divided_twice).items():
            st.session_state[S.key(name)] = value
        st.session_state[S.key("applied")] = preset
    if preset == OWN:
        st.session_state[S.key("applied")] = OWN
    c1, c2, c3 = st.columns([3, 1, 1])
    layout_text = c1.text_input("Micro-batches || rows | counted tokens per document", **S.bind("layout"))
    accumulation = c2.number_input("Accumulation steps", 1, 64, **S.bind("accumulation"))
    ranks = c3.number_input("Ranks", 1, 64, **S.bind("ranks"))
    r1, r2 = st.columns([3, 2], vertical_alignment="bottom")
    rule = r1.selectbox("Averaging rule", list(AVERAGING_RULES), format_func=lambda k: f"{k}: {AVERAGING_RULES[k]}",
                        **S.bind("rule"))
    twice = r2.checkbox("Loss divided twice", **S.bind("twice"),
                        help="the trainer divides by the accumulation steps again. transformers' Trainer divides a loss by "
                             "the accumulation steps unless it was normalised "
                             "by num_items_in_batch (Trainer.training_step, loss_is_scaled_for_ga); a loss that "
                             "normalises itself while the Trainer does not know it gets divided twice")
    with guard("read the micro-batches"):
        lw = step_loss_weights(parse_layout(layout_text), int(accumulation), int(ranks), rule, twice)
    st.dataframe({"document": [f"micro-batch {k} (rank {r}, step {s}), row {w}" for k, r, s, w in
                               zip(lw.micro_batch, lw.rank, lw.step, lw.row)],
                  "counted tokens": lw.tokens.tolist(),
                  "weight": [f"{x:.4f}" for x in lw.weights],
                  "unpacked, one step": [f"{x:.4f}" for x in lw.unpacked]}, hide_index=True)
    st.markdown(lw.sentence)
    st.markdown(
        "One optimizer step sums the gradients of every micro-batch of a rank (gradient accumulation) and averages "
        "the ranks (data parallelism). Write the step as micro-batches apart with `||`, rows apart with `|`, and "
        "the counted tokens of each document; micro-batch k runs on rank k // (accumulation steps). Each document's "
        "weight is its share of the step's gradient, beside its weight under the same rule with the same data "
        "unpacked in one micro-batch.")
    if preset == "split-pairs" and len(lw.weights) == len(dpo_pair_gradients()):
        g = dpo_pair_gradients()
        st.markdown(
            f"Read each document as a preference pair. In the toy of that PR (sigmoid DPO, beta 0.1, the policy "
            f"equal to the reference), the four pairs pull one parameter by {', '.join(f'{x:+.3g}' for x in g)}. "
            f"Weighted as above, its gradient is **{pair_gradient(lw.weights):+.4g}**; unpacked it is "
            f"**{pair_gradient(lw.unpacked):+.4g}**: the step moves the parameter the wrong way. The fix counts pairs "
            "over the whole step (`document-global`), as transformers counts tokens with `num_items_in_batch`.")
    st.caption("Only the rules taken over the whole step (token-global, document-global) weigh a document the same "
               "however the data is packed, accumulated or spread over ranks. Weights computed from the rule; the "
               "tests check every preset against a real torch autograd gradient.")
