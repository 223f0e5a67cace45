"""The Leakage lab's second check beside the first (causality), and its step "Not only attention".

Kept beside the page so that the page stays thin; each draws the library's reports.
"""
import streamlit as st

from app_pages import _content
from app_pages._layout import cached_figure, figure, guard
from packing_core.models import hybrid_model, layer_leaks
from packing_core.verify import verify_model
from packing_lab.viz import hybrid_leak_figure

HYBRID_LENGTHS = (8, 8)


def verdicts(rep, where) -> None:
    """Isolation's verdict and causality's in one box (a warning when either fails), and the reason when only
    the second check sees it."""
    said = f"Verdict: {rep.verdict}" + ("" if rep.equivalent else " Nothing raised an error.")
    if rep.causality is not None:
        said += f"\n\nCausality: {rep.causality.verdict}"
    (where.success if rep.equivalent and not rep.future_visible else where.warning)(said)
    if rep.causality is not None and rep.equivalent and rep.future_visible:
        c = next(c for c in rep.causality.cuts if c.first_moved is not None)
        st.markdown(_content.LEAKAGE_TWO_CHECKS + "\n\n" +
                    _content.LEAKAGE_TWO_CHECKS_REASON.format(cut=c.position, first=c.first_moved))


@st.cache_resource(show_spinner="Running the teaching hybrid model...")
def hybrid_runs():
    """tiny-hybrid's per-layer leaks, and alone vs packed with attention's mask only and with every signal."""
    return (layer_leaks(hybrid_model(), HYBRID_LENGTHS), verify_model(hybrid_model(honour=("attention",))),
            verify_model(hybrid_model()))


def not_only_attention(S) -> None:
    """tiny-hybrid: a perfect attention mask, and still a leak by layer kind; then every layer gets its signal."""
    st.subheader("Not only attention")
    with guard("run the teaching hybrid model"):
        leak, attention_only, every = hybrid_runs()
    # the switch, the verdict and the figure first; the words under them
    signal = st.toggle("Give the convolution and the recurrence their signal (seq_idx, cu_seqlens)",
                       **S.bind("signal"))
    shown = every if signal else attention_only
    (st.success if shown.equivalent else st.warning)(f"Alone vs packed, the whole model: {shown.verdict}")
    given = tuple(leak.without_signal) if signal else ("attention",)
    figure(cached_figure(hybrid_leak_figure, leak, given=given), key=S.key("layers"))
    st.markdown(_content.LEAKAGE_MIXERS.format(conv=int((leak.without_signal["convolution"] > 0).sum()),
                                               n=leak.lengths[-1]))
    st.caption(_content.LEAKAGE_MIXERS_REAL)

