"""A check's verdict and findings on a page: an error is red everywhere, a warning amber, a note blue; each finding
leads with its fix in one line (``Finding.action``, at most 20 words), and the detail (where, the whole fix) folds
under it. Cards, not a table: at a projector's 1024 px a table's ``where`` and ``fix`` columns scrolled off the edge.
"""
from __future__ import annotations

import streamlit as st

from app_pages._text import esc

TRAINER_WORDS = {"trl": "TRL's padding-free collator", "flattening": "a flattening collator (padding-free)",
                 "padded": "a padding collator", "torchtune": "torchtune", "megatron": "Megatron-LM",
                 "olmo_core": "OLMo-core", "document_ids": "a document-numbers mask (axolotl, LLaMA-Factory)"}


def box(severity: str):
    """The alert of a severity: ``box("error")`` is ``st.error``, on the page and in a container alike."""
    return {"error": st.error, "warning": st.warning}.get(severity, st.info)


def verdict_severity(checked) -> str:
    """The worst severity among a check's findings, "success" when it has none that matters."""
    return "error" if checked.errors else "warning" if checked.warnings else "success"


def verdict(checked, text: str) -> None:
    """``text`` (the check's own verdict sentence) in the colour of its worst finding: red for an error."""
    severity = verdict_severity(checked)
    (st.success if severity == "success" else box(severity))(text)


def findings(checked) -> None:
    """Each finding as a card: its fix first (one line), then what is wrong; where, and the whole fix, folded."""
    trainer = TRAINER_WORDS.get(getattr(checked, "trainer", ""), "")
    for f in checked.findings:
        box(f.severity)(f"**Fix:** {esc(f.action)}\n\n{esc(f.title)} (`{f.name}`, {f.severity})")
        with st.expander(f"Where, and the whole fix: {esc(f.title)}"):
            st.markdown(f"**Where.** {esc(f.detail)}.")
            whose = f" (for {trainer}, as this batch's keys name it)" if f.advice and trainer else ""
            st.markdown(f"**The whole fix{whose}.** {esc(f.fix)}")
