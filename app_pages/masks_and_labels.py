"""Masks and labels: one packed row, its attention mask, positions, targets and loss mask; break it, check it."""
import numpy as np
import streamlit as st

from app_pages import _content, _findings
from app_pages._findings import verdict
from app_pages._layout import document_picker, figure, guard, lesson, steps, terms_help
from app_pages._state import choice, number, page_settings
from app_pages._text import esc
from packing_core import PackedBatch, check_batch
from packing_core.attention import ATTENTION_READERS, packed_attention
from packing_core.check import check_all_implementations
from packing_core.verify import eval_loss_packed_vs_alone
from packing_lab.advice import alone_vs_packed_attention, document_starts_here, max_seqlen_lesson
from packing_lab.viz import hf_batch_figure, layout_figure, mask_figure, targets_figure
from packing_lab.zoo import BREAKS, broken_batch, loss_vs_answers, naive_targets

WIDTHS = (32, 64, 128, 256, 512, 1024, 2048)
PROMPT_BREAKS = ("prompts-in-the-loss", "prompts-cut-from-attention")
S = page_settings("masks_and_labels", width=choice(64, WIDTHS), instruction=False, break_=choice("none", BREAKS),
                  attn=choice("sdpa", ATTENTION_READERS), doc=number(None, 0, 4096))

st.title("Masks and labels")
lesson(__file__)


@st.cache_data(show_spinner=False, max_entries=16)
def build(width: int, instruction: bool):
    """The example row (next-fit: documents in order) and its continuous-position twin."""
    docs = _content.row_documents(width, instruction)
    kw = dict(prompt_lengths=docs.prompt_lengths)
    batch = PackedBatch.from_documents(docs.documents, width, "next-fit", **kw)
    twin = PackedBatch.from_documents(docs.documents, width, "next-fit", positions="continuous", **kw)
    return docs, batch, twin.position_ids[0].numpy()


@st.cache_resource(show_spinner="Tokenising the example documents...")
def first_tokens():
    """The example texts' document starts under each convention, with SmolLM2's tokenizer when it is here."""
    return document_starts_here(_content.EXAMPLE_TEXTS)


@st.cache_data(show_spinner=False, max_entries=32)
def eval_check(width: int, instruction: bool, how: str):
    """Each document's evaluation loss in the (broken) batch against alone, on the tiny model."""
    _, batch, _ = build(width, instruction)
    return eval_loss_packed_vs_alone(broken_batch(batch, how), batch)


@st.cache_data(show_spinner=False, max_entries=32)
def attention_check(width: int, instruction: bool, how: str):
    """Each document alone against packed, on one attention layer (the check that reads no tensor rule)."""
    _, batch, _ = build(width, instruction)
    return alone_vs_packed_attention(broken_batch(batch, how))


c1, c2, c3 = st.columns([2, 2, 2], vertical_alignment="bottom")   # the toggle's label whole at 1024 px
width = c1.select_slider("Row width (tokens)", options=WIDTHS, **S.bind("width"),
                         help="64 shows every token; 2,048 is downsampled to colour only.")
instruction = c2.toggle("Instruction tuning", **S.bind("instruction"),
                        help="Each document becomes a question (prompt) and its answer.")
breaks = [b for b in BREAKS if instruction or b not in PROMPT_BREAKS]
if S.get("break_") not in breaks:
    st.session_state[S.key("break_")] = "none"
how = c3.selectbox("Break it: plant a classic bug", breaks, **S.bind("break_"))
st.caption(BREAKS[how])
attn = st.selectbox("Attention implementation that reads the batch", ATTENTION_READERS, **S.bind("attn"),
                    help="transformers' sdpa / eager / flex_attention / flash_attention_2/3, or the lab's own "
                         "backends: each reads different tensors of the same batch.")

with guard(f"build a row of {width} tokens"):
    docs, good, continuous = build(width, instruction)
    shown = broken_batch(good, how)
    checked_row = check_batch(shown, attn)
    per_impl = check_all_implementations(shown)
    kernel = packed_attention(shown, attn).allowed(0)
    intended_mask = packed_attention(good, "segments").allowed(0)     # the block-diagonal causal mask of the documents
    varlen = packed_attention(shown, "varlen").allowed(0)   # what a kernel fed cu_seqlens reads: the one-layer check's view
    causal = packed_attention(shown, "causal_only").allowed(0)   # one triangle over the row's real tokens
    loss_positions, answers = loss_vs_answers(shown)
    isolation = attention_check(width, instruction, how)
    evaluation = eval_check(width, instruction, how)
doc = shown.document_ids[0].numpy()
in_row = np.unique(doc[doc >= 0])
n_docs = len(in_row)
# a document picked here, or by a click in any figure below, is framed in every figure of every step
picked = document_picker(S, "doc", int(in_row.max()) + 1 if n_docs else 0)
PICK = (S, "doc")

# one tab per idea, named as the teacher says them (_content.PAGES); the controls above serve them all
mask_step, positions_step, targets_step, check_step = steps(__file__)

# ---------------------------------------------------------------- attention
with mask_step:
    st.subheader("Attention: a causal mask is not a boundary mask")
    # the figure first, the words under it (a projector's first screen shows the masks)
    differs = not np.array_equal(kernel, varlen)
    panels = {"causal only (j ≤ i)": causal, f"what {attn} reads in this batch": kernel}
    if differs:   # a kernel that reads no cu_seqlens may compute this batch correctly where a varlen kernel would not
        panels["what a varlen kernel reads (its cu_seqlens)"] = varlen
    figure(mask_figure(panels, doc, shown.position_ids[0].numpy(), highlight=picked, pickable=True),
           key=S.key("masks"), pick=PICK)
    st.markdown(
        "Above is one packed row of short documents, placed by next-fit; each character is one token. Packing is "
        "correct only if every document gets the computation it would get alone. The attention mask "
        "decides that, helped by position ids that restart at each document when the model needs them. "
        "Two more tensors decide what is trained, not what is computed: the targets and the loss mask. "
        "(A document split across two rows never gets its alone computation: its second piece cannot "
        "see its start.)",
        help=terms_help('next-fit'),
    )
    block_diagonal = bool(np.array_equal(kernel, intended_mask))
    st.markdown(
        f"Row 0 holds {n_docs} documents. **Left**, the ordinary causal triangle (j ≤ i): every red "
        f"cell is a token reading another document. **Right**, what {attn} reads in this batch: "
        + ("here the block-diagonal causal mask, j ≤ i *and* segment[i] == segment[j], one triangle per document. "
           "Plant a bug above, or pick `causal_only`, to see it break." if block_diagonal else
           "here **not** the block-diagonal causal mask (j ≤ i *and* segment[i] == segment[j], one triangle per "
           "document), because of the bug planted above or the implementation chosen: red cells are reads across "
           "documents.")
        + " Hover a cell to see which query reads which key; click a document's block to frame it in every figure."
    )

    def listed(values) -> str:
        values = [int(v) for v in values]
        return "[" + ", ".join(map(str, values[:12])) + (", ..." if len(values) > 12 else "") + "]"

    planted = shown.cu_seqlens.tolist()
    intended = good.cu_seqlens.tolist()
    st.markdown(
        f"A varlen kernel never builds this {width} x {width} matrix. It reads the document offsets, "
        f"`cu_seqlens` = `{listed(intended)}` (the cumulative sum of the lengths, over the batch's rows laid end "
        "to end, with a cut at each row edge: see *Why packing*), and computes only the blocks.",
        help=terms_help('varlen'),
    )
    if planted != intended:
        st.markdown(
            f"**The planted bug:** this batch carries `cu_seqlens` = `{listed(planted)}` instead. "
            + (f"`{attn}` never reads `cu_seqlens` (it finds the documents from `position_ids`), so on {attn} this "
               "batch still computes correctly (middle); a varlen kernel reads the planted offsets and lets the "
               "documents of a row read each other (right). The one-layer check of step 4 reads the batch as a "
               "varlen kernel does, so it reports that leak." if differs else
               f"`{attn}` reads them, so its documents read each other (right panel, red).")
        )

# ---------------------------------------------------------------- positions
with positions_step:
    st.subheader("Positions restart at every document")
    figure(layout_figure(shown, 0, continuous_positions=continuous, highlight=picked, pickable=True),
           key=S.key("layout"), pick=PICK)
    st.markdown(
        "With continuous positions the second document thinks it starts at position "
        f"{int(continuous[doc == in_row[min(1, n_docs - 1)]][0])}, which never happens when "
        "it is used alone. Red cells differ from the reset positions. Whether that changes the output "
        "depends on the model (see the *Leakage lab*): learned absolute positions change, plain RoPE under "
        "a correct mask does not. Reset them all the same when you train with transformers' padding-free "
        "path: it starts a document at every step that is not +1 (sdpa/eager) or every return to the minimum "
        "position (FlashAttention, one flattened row only), so continuous positions there also erase the "
        "document boundaries."
    )

# ---------------------------------------------------------------- targets and loss
with targets_step:
    st.subheader("Targets stop at the document edge; the loss mask is its own tensor")
    figure(targets_figure(shown, 0, naive_targets(good, 0), highlight=picked, pickable=True), key=S.key("targets"),
           pick=PICK)
    st.markdown(
        "Shifting the whole row by one makes the last token of a document predict the first token "
        "of the next one (red): an artificial transition. The fix is a target of -100 at each edge "
        "(–), as this batch has. "
        "With an EOS ending each document instead, row-shifted targets train EOS → the first token of "
        "the next document. That is a document-start target, the intended design of EOS-delimited pretraining, "
        "not an artificial transition. Mask it (-100) too if each document must train exactly as it would alone. "
        "Targets are separate from attention both ways. A batch can isolate its documents perfectly and "
        "still train on a wrong boundary target (try *row-shifted targets* above). And masking the target "
        "at an edge does not stop the next document from reading the previous one: without the attention "
        "mask, that path stays open. "
        "The loss mask is separate from the attention mask: "
        + ("prompt tokens (P) stay in attention, because the answer must read the question, but "
           "leave the loss." if instruction else
           "switch on instruction tuning to see prompt tokens that are attended but not trained."),
        help=terms_help('EOS'),
    )
    with st.expander("The documents in this row"):
        st.code("\n".join(docs.texts), language=None)
    with st.expander("The first token of each document: EOS between documents, a BOS, or a chat header"):
        with guard("tokenise the example documents"):
            starts, tokenizer_name = first_tokens()
        st.markdown(f"With positions reset and the mask on, a document's first position sees only its own token. "
                    f"Which token that is decides what it learns. The {len(_content.EXAMPLE_TEXTS)} example texts "
                    f"above, tokenised by {tokenizer_name}, packed three ways (document 1 shown):")
        st.dataframe({"each document starts with": [s.convention for s in starts],
                      "position 0 holds": [s.first_holds for s in starts],
                      "and learns to predict": [s.first_predicts for s in starts],
                      "first word trained": ["yes" if s.opening_trained else "never" for s in starts],
                      "tokens added per document": [s.added_per_document for s in starts]},
                     hide_index=True, width="stretch")
        st.markdown("\n".join(f"- **{esc(s.convention)}.** {esc(s.sentence)}" for s in starts))

# ---------------------------------------------------------------- the checks
with check_step:
    st.subheader("Break it, check it")
    # what may be trained: every next token of the same document, or, with instruction tuning, the answers only
    trainable = ("answer targets (with instruction tuning only the answers are trained)" if instruction else
                 "trainable targets (every next token of the same document)")
    counted = (f"In this batch, loss positions = {trainable}: {loss_positions} = {answers}." if loss_positions == answers
               else f"Loss positions: {loss_positions}, {trainable}: {answers}.")
    verdict(checked_row, f"check_batch, {checked_row.verdict}. {counted}")
    figure(hf_batch_figure(checked_row, 0, title="The row as check_batch reads it: red marks each finding",
                           highlight=picked, pickable=True), key=S.key("checked"), pick=PICK)
    st.markdown("The row is a `PackedBatch`: `check_batch` reads its tensors, and each problem it finds is a "
                "finding, a rule in words with a name. Plant a bug above (*Break it*) and watch what each check "
                "sees. Your own trainer's batches are checked on *Check your setup*.",
                help=terms_help('PackedBatch', 'finding'))
    _findings.findings(checked_row)
    st.caption("Per attention implementation: " + " · ".join(c.verdict for c in per_impl))
    if shown.max_seqlen != good.max_seqlen:      # the planted max_seqlen: what flash-attn's launch then covers
        st.markdown("**max_seqlen sizes the launch.** " + esc(max_seqlen_lesson(shown.cu_seqlens, shown.max_seqlen))
                    + " sdpa and eager never read max_seqlen; choose `flash_attention_2` or `varlen` above to see the "
                    "check's `max_length_too_small`.")
    if isolation.equivalent:
        st.caption(f"Alone vs packed, one attention layer with random weights, reading the batch as a varlen kernel "
                   f"fed its cu_seqlens: every document's output matches its alone run (max |Δ| "
                   f"{max(isolation.max_abs_diff, default=0):.1e}). This layer has no positions, so it judges the "
                   "cu_seqlens only"
                   + (f"; {attn} reads this batch differently (step 1 shows both), and the verdict above judges "
                      f"what {attn} reads." if differs else "."))
    else:
        st.warning(f"Alone vs packed, one attention layer with random weights, reading the batch as a varlen "
                   f"kernel does (its cu_seqlens): document piece(s) "
                   f"{', '.join(map(str, isolation.differing))} differ from their alone run by up to "
                   f"{max(isolation.max_abs_diff):.1f}. "
                   + (f"{attn} reads no cu_seqlens, so this is what a varlen kernel would compute, not {attn}: "
                      "step 1 shows both. " if differs else "")
                   + ("check_batch and the loss count see nothing here: the loss tensors are intact, only "
                      "who may read whom changed. Only this comparison catches it."
                      if checked_row.sound else "The tensors show it too."))
    (st.caption if evaluation.agree else st.warning)(
        "**Evaluation under packing**, a cheap production check: evaluate held-out data packed and unpacked and "
        "compare the loss per document. Here, on the tiny model (random init) reading this batch's cu_seqlens and "
        "positions: " + evaluation.sentence)
