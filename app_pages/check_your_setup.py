"""Check your setup: where each lesson shows up in transformers and TRL, and a batch from your trainer, checked."""
import streamlit as st

import packing_core as pc
from app_pages import _content
from app_pages._lab import choice, figure, guard, lesson, page_settings, steps
from packing_core.attention import ATTENTION_READERS
from packing_core.check import BATCH_FILE_TYPES, PICKLE_SUFFIXES, check_all_implementations, load_batch_bytes
from packing_core.viz import hf_batch_figure

S = page_settings("check_your_setup", attn=choice("sdpa", ATTENTION_READERS))

st.title("Check your setup")
lesson(__file__)
framework, trainer = steps(__file__)

# ---------------------------------------------------------------- in your framework
with framework:
    st.subheader("In your framework")
    st.markdown("Where each lesson of this lab shows up in transformers and TRL (checked in their source and docs):")
    for lesson_name, where in _content.FRAMEWORK:
        st.markdown(f"- **{lesson_name}.** {where}")


# ---------------------------------------------------------------- a batch from your trainer
@st.cache_data(show_spinner=False, max_entries=8)
def check_upload(data: bytes, name: str, attn: str):
    batch = load_batch_bytes(data, name)
    return pc.check_hf_batch(batch, attn), check_all_implementations(batch)


with trainer:
    st.subheader("Check a batch from your trainer")
    st.markdown(
        "Save one batch as your trainer hands it to `model(**batch)`, and upload it: transformers' padding-free "
        "format (`input_ids`, `labels`, `position_ids`, optionally `cu_seq_lens_q/k`), a padded batch with an "
        "`attention_mask`, or packed rows with `position_ids` only (sound for sdpa/eager; FlashAttention finds "
        "documents from `position_ids` only in one flattened row, so packed rows `[B>1, L]` leak under it). "
        "Safetensors, `.npz` or JSON; pickles (`.pt`, `.bin`, `.pkl`) are refused, because unpickling an "
        "untrusted file can run arbitrary code. "
        "`python -m packing_core check FILE --model smollm2` does the same and also runs the model on it."
    )
    attn = st.selectbox("Attention implementation that reads the batch", ATTENTION_READERS, **S.bind("attn"),
                        help="transformers' sdpa / eager / flex_attention / flash_attention_2/3, or the lab's own "
                             "backends: each reads different tensors of the same batch.")
    # the pickle suffixes too: such a file gets the library's one-line refusal, not a silent file-picker filter
    up = st.file_uploader("Batch file", type=[*BATCH_FILE_TYPES, *(s.lstrip(".") for s in PICKLE_SUFFIXES)],
                          key=S.key("batch_file"))
    if up is not None:
        with guard(f"check {up.name}"):
            checked, every = check_upload(up.getvalue(), up.name, attn)
        rows_, width_ = checked.shape
        st.markdown(f"**{checked.format}** batch: {rows_} row(s) of {width_} tokens, "
                    f"{checked.n_documents} intended document(s). {checked.documents.labels_reason}.")
        (st.success if checked.sound else st.warning)(f"{checked.verdict}. Read as: {checked.effective.path}.")
        for f in checked.findings:
            (st.warning if f.severity == "error" else st.info)(
                f"**{f.title}** (`{f.name}`, {f.severity}): {f.detail}. Fix: {f.fix}")
        st.caption("Per attention implementation: " + " · ".join(c.verdict for c in every))
        row_ = st.number_input("Row", 0, rows_ - 1, 0, key=S.key("batch_row")) if rows_ > 1 else 0
        with guard("draw the row"):
            figure(hf_batch_figure(checked, int(row_), title="Your batch: red marks each finding"),
                   key=S.key("batch_fig"))
