"""Check your setup: where each lesson shows up in transformers and TRL, and a batch from your trainer, checked."""
import streamlit as st

import packing_core as pc
from app_pages import _content, _findings
from app_pages._findings import verdict
from app_pages._layout import figure, guard, lesson, steps
from app_pages._state import Setting, choice, page_settings
from app_pages._text import esc, stop
from packing_core.attention import ATTENTION_READERS, KERNELS, known_families
from packing_core.check import (
    BATCH_FILE_TYPES,
    PICKLE_SUFFIXES,
    SCOPE_NOTE,
    check_all_implementations,
    load_batch_bytes,
    save_snippet,
    summarize_checks,
)
from packing_lab.advice import padding_free_example, same_batch_by_release
from packing_lab.viz import hf_batch_figure

NONE = "(none: attention layers only)"
INSTALLED = "installed here"   # the transformers release this server runs; the verdict names it
MAX_PAGE_BATCHES = 32      # files one upload checks as a stream (the CLI takes a folder of any size)
S = page_settings("check_your_setup", attn=choice("sdpa", ATTENTION_READERS), use_cache=False,
                  model_type=choice(NONE, lambda: (NONE, *(f.model_type for f in known_families(built=True)))),
                  kernels=Setting([], link=False),
                  transformers=choice(INSTALLED, lambda: (INSTALLED, *(r for r, _, _ in same_batch_by_release()))))

st.title("Check your setup")
lesson(__file__)
framework, trainer = steps(__file__)

# ---------------------------------------------------------------- in your framework
with framework:
    st.subheader("In your framework")
    st.markdown("Where each lesson of this lab shows up in transformers and TRL (checked in their source and docs):")
    st.markdown("\n".join(f"- **{lesson_name}.** {where}" for lesson_name, where in _content.FRAMEWORK))
    # folded: the step stays within two projector screens (tests/e2e/test_projector.py)
    with st.expander("Padding-free on sdpa: the whole batch's tokens, squared"):
        st.markdown(f"{padding_free_example().sentence} Train padding-free with "
                    "`attn_implementation='flash_attention_2'` (or 3); on sdpa or eager, keep packed rows `[B, L]`.")
    # folded too: the same batch read by two releases of transformers (docs/checker-releases.md has every rule)
    with st.expander("The same batch, sound on one release and leaking on another"):
        st.markdown("Three documents of 7, 9 and 5 "
                    "tokens packed in one row, `position_ids` restarting per document, no mask, `use_cache=False` "
                    "(what `DataCollatorWithFlattening` emits), on a tiny Llama under sdpa, each document against its "
                    "run alone, measured in a venv per transformers release:")
        st.markdown("\n".join(f"- transformers {r}: **{s}** (largest logit difference {d:.1e})"
                               for r, s, d in same_batch_by_release()))
        st.caption("Packed detection from position_ids first shipped in transformers 4.53.1 (PR #39194): before it, "
                   "sdpa and eager read each row as one document. The check below judges for the release you pick; "
                   "docs/checker-releases.md has every rule by release.")


# ---------------------------------------------------------------- a batch from your trainer
@st.cache_data(show_spinner=False, max_entries=16)
def check_upload(data: bytes, name: str, attn: str, use_cache: bool, model_type: str | None, kernels: tuple,
                 release: str | None):
    batch = load_batch_bytes(data, name)
    options = dict(use_cache=use_cache, model_type=model_type, kernels=kernels, transformers=release)
    return pc.check_hf_batch(batch, attn, **options), check_all_implementations(batch, **options)


def stream_headline(results) -> None:
    """A stream of files leads with its worst verdict: red when any batch has an error, naming the batches."""
    summary = summarize_checks([c for _, c, _ in results], [n for n, _, _ in results])
    wrong = [(n, c) for n, c, _ in results if c.errors]
    said = f"**The stream, {len(results)} batches:** {summary.line}"
    if wrong:
        names = ", ".join(f"{esc(n)} ({len(c.errors)} error{'s' if len(c.errors) > 1 else ''}: "
                          f"{', '.join(f.name for f in c.errors)})" for n, c in wrong)
        st.error(f"**{len(wrong)} of {len(results)} batches have errors:** {names}.\n\n{said}")
    else:
        (st.success if summary.packing_on else st.warning)(said)
    # one line per batch, worst first: it wraps at a projector's 1024 px where a table scrolled sideways
    order = sorted(results, key=lambda r: (-len(r[1].errors), -len(r[1].warnings)))
    st.markdown("\n".join(
        f"- {':red[**error**]' if c.errors else ':orange[warning]' if c.warnings else ':green[sound]'} "
        f"**{esc(n)}**: {c.shape[0]} x {c.shape[1]}, {c.n_documents} documents"
        + (f"; {', '.join(f.name for f in c.errors + c.warnings)}" if c.findings else "") for n, c, _ in order))


with trainer:
    st.subheader("Check a batch from your trainer")
    st.markdown("Upload one batch as your trainer hands it to `model(**batch)` (safetensors, `.npz` or JSON), or "
                "several: they are checked as a stream. What to save and how: below the settings.")
    # the pickle suffixes too: such a file gets the library's one-line refusal, not a silent file-picker filter
    ups = st.file_uploader("Batch file(s)", type=[*BATCH_FILE_TYPES, *(s.lstrip(".") for s in PICKLE_SUFFIXES)],
                           accept_multiple_files=True, key=S.key("batch_file"))
    verdicts = st.container()   # the verdicts lead, above the settings that judge them
    c1, c2 = st.columns(2)
    attn = c1.selectbox("Attention implementation that reads the batch", ATTENTION_READERS, **S.bind("attn"),
                        help="transformers' sdpa / eager / flex_attention / flash_attention_2/3, or a trainer's own "
                             "model: each reads different tensors of the same batch.")
    families = [NONE] + [f.model_type for f in known_families(built=True)]
    model_type = c2.selectbox("Model type (config.json's model_type)", families, **S.bind("model_type"),
                              help="judges every layer of that family that mixes tokens (short convolutions, "
                                   "recurrent state) and its own mask call; none judges attention layers only")
    release = st.selectbox("transformers release that reads the batch (the trainer's)",
                           S.settings["transformers"].allowed(),
                           **S.bind("transformers"),
                           help="the rules changed between releases; the verdict names the one it judged for")
    use_cache = st.checkbox("The forward call uses a cache (use_cache=True)", **S.bind("use_cache"),
                            help="a plain model(**batch) with use_cache at a LLaMA-style config's default")
    st.caption("Trainer and TRL call the model with use_cache=False. A plain `model(**batch)` leaves use_cache at "
               "the config's default (True for LLaMA-style models): transformers then builds a cache and skips "
               "finding documents from position_ids, so sdpa, eager and flex read each row as one document.")
    chosen = None if model_type == NONE else model_type
    kernels = ()
    if chosen is not None:
        kernels = tuple(st.multiselect("Fast kernels installed where the model trains (CUDA)",
                                       sorted({k.package for k in KERNELS.values()}), **S.bind("kernels"),
                                       help="without them transformers refuses seq_idx and cu_seq_lens at a "
                                            "convolution or a recurrence"))
    with st.expander("What to upload, and how to save a batch (TRL's and torchtune's batches as they come)"):
        st.markdown(
            "Save one batch as your trainer hands it to `model(**batch)`, and upload it: transformers' padding-free "
            "format (`input_ids`, `labels`, `position_ids`, optionally `cu_seq_lens_q/k` with `max_length_q/k`), a "
            "padded batch with an "
            "`attention_mask`, or packed rows with `position_ids` only (sound for sdpa/eager from transformers 4.53.1 "
            "on, leaking before it; FlashAttention from 4.55 finds documents from `position_ids` only in one "
            "flattened row, so packed rows `[B>1, L]` leak under it). "
            "Safetensors, `.npz` or JSON; pickles (`.pt`, `.bin`, `.pkl`) are refused, because unpickling an "
            "untrusted file can run arbitrary code. Several files are checked as a stream of batches. "
            "`python -m packing_core check FILE --model smollm2` does the same and also runs the model on it."
        )
        st.code(save_snippet(), language="python", wrap_lines=True)
        st.caption("Plain `safetensors.torch.save_file(batch, path)` fails on TRL's batch: `max_length_q` is a "
                   "Python int and `cu_seq_lens_q` and `_k` are one shared tensor. This line handles both.")
    if len(ups) > MAX_PAGE_BATCHES:
        verdicts.error(f"{len(ups)} files: the page checks at most {MAX_PAGE_BATCHES} as a stream; check a folder of "
                       "any size with `python -m packing_core check FOLDER`.")
        stop()
    with verdicts:
        results = []
        for up in ups:
            with guard(f"check {up.name}"):
                results.append((up.name, *check_upload(up.getvalue(), up.name, attn, use_cache, chosen, kernels,
                                                       None if release == INSTALLED else release)))
        if len(results) > 1:
            stream_headline(results)
            worst_first = [n for n, _, _ in sorted(results, key=lambda r: (-len(r[1].errors), -len(r[1].warnings)))]
            name = st.selectbox("Batch to look at (the worst first)", worst_first, key=S.key("batch_pick"))
            results = [r for r in results if r[0] == name]
        if results:
            name, checked, every = results[0]
            rows_, width_ = checked.shape
            verdict(checked, f"**{esc(name)}**: {checked.verdict}. Read as: {checked.effective.path}.")
            _findings.findings(checked)
            st.markdown(f"**{checked.format_words}**: {rows_} row(s) of {width_} tokens, "
                        f"{checked.n_documents} intended document(s). {checked.documents.labels_reason}.")
            if chosen is None:
                st.caption(SCOPE_NOTE.replace("give --model or --model-type", "choose a model type above"))
            row_ = st.number_input("Row", 0, rows_ - 1, 0, key=S.key("batch_row")) if rows_ > 1 else 0
            with guard("draw the row"):
                figure(hf_batch_figure(checked, int(row_), title="Your batch: red marks each finding"),
                       key=S.key("batch_fig"))
            st.caption("Per attention implementation: " + " · ".join(c.verdict for c in every))
