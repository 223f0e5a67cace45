"""Bug zoo: packing bugs that reached users of real projects, each reproduced live; and how losses weight documents."""
import streamlit as st

from app_pages._lab import esc, figure, guard, lesson, page_settings, steps, text
from packing_core import ZOO, InputError
from packing_core.batch import LOSS_RULES
from packing_core.data import parse_lengths
from packing_core.viz import zoo_figures

S = page_settings("bug_zoo", rows=text("4 | 60 60", lambda raw: parse_lengths(raw.replace("|", " "))))

st.title("Bug zoo")
lesson(__file__)
st.markdown(
    "Packing bugs that reached users of real projects. All but one run without an error, and the loss still "
    "falls. Position ids left unpadded make transformers raise an IndexError, or misalign silently elsewhere. "
    "Each entry says what goes wrong, where it was reported, and how it was fixed; **Reproduce** runs it on the "
    "lab's models, broken and fixed, draws what went wrong beside the fix (the logits against each document "
    "alone, the mask, the targets or the positions), and shows what the lab's checks say of each. A planted "
    "fault needs no model: **Plant it** draws it in a small batch."
)


@st.cache_data(show_spinner="Reproducing the bug, broken and fixed (SmolLM2 entries take a few seconds)...",
               max_entries=32)
def reproduce(name: str):
    from packing_core.verify import reproduce_bug
    return reproduce_bug(name)


@st.cache_data(show_spinner=False, max_entries=16)
def plant(name: str):
    from packing_core.verify import plant_bug
    return plant_bug(name)


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
        caught = "; ".join(bug.caught_by_titles) or (
            "no static finding: only alone vs packed (Masks and labels page) shows it" if bug.planted
            else "no static finding: only a model run shows it")
        if bug.planted:
            st.caption(f"Planted in a small batch (no model), as on the Masks and labels page. Caught by: {esc(caught)}.")
        else:
            st.caption(f"Reproduced on: {esc(bug.needs)}. Caught by: {esc(caught)}.")
        if st.button("Plant it" if bug.planted else "Reproduce", key=S.key(f"run_{bug.name}")):
            st.session_state[S.key(f"shown_{bug.name}")] = True
        if st.session_state.get(S.key(f"shown_{bug.name}")):
            with guard(f"reproduce {bug.name}"):
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


reproduced_step, planted_step, loss_step = steps(__file__)
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
    st.markdown(
        "Once documents share rows, *how* the per-token losses are averaged decides how much each document "
        "counts. The weight of a document below is its share of the gradient: the sum over its tokens of "
        "d(loss)/d(token loss).\n\n"
        "- **per token**: sum of token losses / number of counted tokens. Every token weighs the same; a document "
        "weighs its share of the tokens, wherever it was packed.\n"
        "- **per row**: mean in each row, then over rows. A row weighs the same whatever it holds, so a short "
        "document alone in a row counts as much as a row of long ones.\n"
        "- **per document**: mean in each document, then over documents. Every document weighs the same, "
        "whatever its length."
    )
    raw = st.text_input("Counted tokens per document, rows separated by |", **S.bind("rows"),
                        help="e.g. 4 | 60 60: a 4-token document alone in row 0, two 60-token documents in row 1")


    @st.cache_data(show_spinner="Measuring the weights on the tiny model...", max_entries=32)
    def weights(rows: tuple[tuple[int, ...], ...]):
        from packing_core import loss_lesson
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
