"""Context parallel: predict the busiest rank, then one packed row cut over the ranks, the ring's steps with the
mask each applies, and the causal work per rank under each scheme (on the row, and on the sidebar's dataset)."""
import streamlit as st

from app_pages._data import current_lengths, dataset_label, within_page_budget
from app_pages._layout import figure, guard, lesson, prediction, scroll_here, steps
from app_pages._state import SHARED, choice, page_settings
from app_pages._text import esc, stop
from packing_lab.demos import CP_SCHEMES, cp_dataset_rows, cp_lesson, one_document_work
from packing_lab.viz import cp_balance_figure, cp_cut_figure, ring_steps_figure

ROW = (6, 7, 23)             # the packed row the steps cut: three documents, none a multiple of 2·CP
ONE = 32                     # the prediction's one document, over four ranks
ANSWERS = ("Rank 0", "The last rank", "All the same")
# the class's prediction is part of the view: a link to a later step carries it, and opens that step answered
S = page_settings("context_parallel", cp=choice(2, (2, 4)), scheme=choice("zigzag-document", CP_SCHEMES),
                  skip=False, guess=choice(None, ANSWERS))


@st.cache_data(show_spinner=False, max_entries=16)
def row_lesson(lengths: tuple, cp: int, scheme: str):
    return cp_lesson(lengths, cp, scheme)


@st.cache_data(show_spinner="Cutting the dataset's rows over 2, 4 and 8 ranks...", max_entries=16)
def dataset_rows(name: str, lengths, context: int):
    return cp_dataset_rows(lengths, context)


st.title("Context parallel")
lesson(__file__)
predict, ring, balance = steps(__file__)
with predict:
    st.markdown(f"With context parallelism (CP) each rank holds part of every row, and attention passes keys rank to "
                f"rank. **Predict:** one document of {ONE} tokens is cut over 4 ranks in order: rank 0 holds its "
                f"first {ONE // 4} tokens, rank 3 its last {ONE // 4}. Each token reads itself and the tokens before "
                "it. Which rank computes the most attention?")
    guess = prediction(S, ANSWERS)
    skip = st.checkbox("Skip predictions and always show the answers (self-study)", **S.bind("skip"))
if guess is None and not skip:
    predict.info("Make a prediction to see the answer.")
    for later in (ring, balance):
        later.info("Make a prediction in step 1 first: this step builds on its answer.")
    stop()

work = one_document_work(ONE, 4)
cont, zig = work["contiguous"], work["zigzag-document"]
with predict:
    if guess is not None:
        right = guess == ANSWERS[1]
        (st.success if right else st.info)(
            f"{'Right' if right else 'Not this time'}: the last rank computes {cont[-1]:.0f} (query, key) pairs, "
            f"rank 0 {cont[0]:.0f}, {cont[-1] / cont[0]:.1f}x as many. Cut into 8 chunks instead, rank r taking "
            f"chunks r and 7 - r (zigzag), every rank computes {zig[0]:.0f}.")
        scroll_here("context_parallel.answer", guess)
    chart = st.container()    # the figure first (on a projector's first screen), its switches and words under it
    left, right_col = st.columns([1, 2])
    cp = left.radio("CP (ranks)", (2, 4), horizontal=True, **S.bind("cp"))
    scheme = right_col.radio("Scheme", CP_SCHEMES, horizontal=True, **S.bind("scheme"))
    with guard("cut the row"):
        cut = row_lesson(ROW, cp, scheme)
    split = cut.split
    st.markdown(f"A packed row of documents of {', '.join(map(str, ROW))} tokens. Zigzag per document (Transformer "
                f"Engine's THD layout) pads each to a multiple of 2·CP = {2 * cp} and cuts *each document* in "
                f"{2 * cp} chunks; the row schemes pad the row's end and cut the row. The cut adds "
                f"**{split.pads_added} pads** here.")
    with chart:
        figure(cp_cut_figure(split), key="context_parallel.cut")
    offsets = "; ".join(f"rank {rb.rank}: padded `{rb.cu_seqlens_padded_rank.tolist()}`, real "
                        f"`{rb.cu_seqlens_rank.tolist()}`" for rb in split.ranks)
    st.caption(f"Each rank's own offsets, its slots run by run: {offsets}. A kernel given only the real offsets "
               "divided by CP reads the wrong slots as real (Transformer Engine #1930: a 7-token document computed "
               "as 6).")

with ring:
    st.markdown(f"At step s rank r holds the keys of rank r - s. The mask of each step is the one rule, same document "
                f"and no later key, on where each slot sits in the row. Under zigzag the steps take three shapes: the "
                f"**diagonal**; an earlier rank's keys, of which only the first chunk counts (**lower-triangle**); a "
                f"later rank's keys, read only by the rank's second chunk (**upper-triangle**). Under contiguous, a "
                f"later rank's keys are never read. CP {cp}, {scheme}; each panel says the pairs it computes.")
    figure(ring_steps_figure(cut.steps, cp), key="context_parallel.ring")
    st.caption("Put back together, the outputs equal the row unsplit, document by document (the lab's tests run the "
               "tiny model through this ring at CP 2, 4 and 8). A panel marked nothing reads no key: under zigzag "
               "per document, rank 0's second chunk of each document is its padded end.")

with balance:
    figure(cp_balance_figure(cut.balances, title=f"This row's causal work per rank at CP {cp}"),
           key="context_parallel.balance")
    name, lengths = current_lengths()
    context = SHARED.get("context")
    st.markdown(f"**{esc(dataset_label(name))}** at context {context:,} (the sidebar's), packed by bfd: the slowest "
                "rank's work over the mean (1.0 = even), and the pads each scheme adds.")
    with guard("balance the dataset over the ranks"):
        within_page_budget(lengths, context)
        rows = dataset_rows(name, lengths, context)
    st.dataframe(rows, hide_index=True, width="stretch")
    st.caption("Zigzag per row evens one document per row, not a packed row of several; zigzag per document evens "
               "each document, paying its pads, and its rank 0 holds every document's padded tail.")
