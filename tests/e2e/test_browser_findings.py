"""Errors look like errors, in a real Chromium at 1024 x 768: a batch's ERROR is a red box that leads with its fix
in one short line, a stream of batch files leads with its worst verdict, and no finding's ``where`` or ``fix`` sits
in a column scrolled off the right edge.

The batches are what transformers' ``DataCollatorWithFlattening(return_flash_attn_kwargs=True,
return_position_ids=True)`` builds from six chats tokenised with SmolLM2's chat template, saved as safetensors,
and the same batch with an all-ones ``attention_mask`` added (the classic bug: beside a 2D mask transformers'
sdpa never reads the position resets).
"""
import re

import pytest

from tests._support import AppPage

pytestmark = [pytest.mark.browser, pytest.mark.viewport(width=1024, height=768)]
SIZE = {"width": 1024, "height": 768}
FIX_WORDS = 20
CHATS = [
    [{"role": "user", "content": "What does str.split do?"},
     {"role": "assistant", "content": "It cuts a string at a separator and returns the parts."}],
    [{"role": "user", "content": "Explain a list comprehension."},
     {"role": "assistant", "content": "It builds a list from an iterable in one expression."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a tuple?"},
     {"role": "assistant", "content": "An immutable sequence."}],
    [{"role": "user", "content": "What does zip do?"}, {"role": "assistant", "content": "It pairs items of iterables."}],
    [{"role": "user", "content": "Why use a set?"}, {"role": "assistant", "content": "Fast membership tests."}],
    [{"role": "user", "content": "What is a generator?"},
     {"role": "assistant", "content": "A function that yields values lazily, one at a time."}],
]

# Sideways scrolling a class would need: a data grid's scroller or a code block wider than its box.
SIDEWAYS_JS = """() => {
  const out = [];
  document.querySelectorAll("[data-testid='stMain'] .dvn-scroller, [data-testid='stMain'] pre").forEach(el => {
    if (!el.offsetParent || el.closest("details:not([open])")) return;
    if (el.scrollWidth > el.clientWidth + 1) out.push(`${el.tagName}: ${el.scrollWidth}px in ${el.clientWidth}px`);
  });
  return out;
}"""

# The boxes of the open step, top to bottom: their kind, their text and where they start on the page.
BOXES_JS = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  main.scrollTo(0, 0);
  return [...main.querySelectorAll("[data-testid^='stAlertContent']")].filter(a => a.offsetParent)
    .map(a => ({kind: a.dataset.testid.replace('stAlertContent', '').toLowerCase(), text: a.innerText.trim(),
                top: Math.round(a.getBoundingClientRect().top)}));
}"""


@pytest.fixture(scope="module")
def batch_files(tmp_path_factory):
    """The padding-free batch as the collator builds it, and the same batch with an all-ones attention_mask."""
    import torch
    from transformers import DataCollatorWithFlattening

    from packing_core.check.files import save_batch_file
    from tests._trainers.truth import smollm2_tokenizer

    tok = smollm2_tokenizer()
    ids = [tok.apply_chat_template(chat, tokenize=True)["input_ids"] for chat in CHATS]
    batch = DataCollatorWithFlattening(return_tensors="pt", return_flash_attn_kwargs=True,
                                       return_position_ids=True)([{"input_ids": i} for i in ids])
    folder = tmp_path_factory.mktemp("batches")
    good, bad = folder / "flattening_batch.safetensors", folder / "flattening_allones_mask.safetensors"
    save_batch_file(batch, good)
    save_batch_file({**batch, "attention_mask": torch.ones_like(batch["input_ids"])}, bad)
    return good, bad


@pytest.fixture
def checker(browser, streamlit_server, artifacts_dir):
    ctx = browser.new_context(viewport=SIZE)
    ctx.set_default_timeout(120_000)
    app = AppPage(ctx.new_page(), streamlit_server, artifacts_dir / "screenshots")
    app.page.on("pageerror", lambda exc: app.js_errors.append(str(exc)))
    app.open("check_your_setup?step=2")
    yield app
    ctx.close()


def _boxes(app) -> list[dict]:
    app.page.wait_for_timeout(300)
    return app.page.evaluate(BOXES_JS)


def _fix_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.strip())


def test_two_batch_files_lead_with_the_error_in_red_not_a_green_box(checker, batch_files):
    good, bad = batch_files
    checker.upload([str(good)])
    checker.upload([str(bad)])                 # added: the uploader keeps the first file
    assert checker.text().count("flattening_") >= 2
    boxes = _boxes(checker)
    checker.screenshot("findings-two-files-1024")
    verdicts = [b for b in boxes if b["kind"] in ("error", "success", "warning")]
    assert verdicts and verdicts[0]["kind"] == "error", [(b["kind"], b["text"][:80]) for b in boxes]
    assert "flattening_allones_mask" in verdicts[0]["text"] or "1 error" in verdicts[0]["text"], verdicts[0]
    assert verdicts[0]["top"] < SIZE["height"], verdicts[0]                 # on the first screen
    before_red = [b for b in boxes[:boxes.index(verdicts[0])] if b["kind"] == "success"]
    assert before_red == []
    assert any(b["kind"] == "error" and "documents_share_attention" in b["text"] + checker.text() for b in boxes)
    assert checker.page.evaluate(SIDEWAYS_JS) == []
    checker.assert_healthy()


def test_one_bad_batch_file_is_a_red_error_whose_first_line_is_its_fix(checker, batch_files):
    _, bad = batch_files
    checker.upload([str(bad)])
    errors = [b for b in _boxes(checker) if b["kind"] == "error"]
    checker.screenshot("findings-one-bad-file-1024")
    assert errors, checker.text()[:2000]
    finding = next((b for b in errors if "Documents read each other" in b["text"]), errors[0])
    fix = _fix_line(finding["text"])
    assert fix.startswith("Fix:") and re.search(r"\battention_mask\b", fix), finding["text"]
    assert len(fix.removeprefix("Fix:").split()) <= FIX_WORDS, fix
    assert "(padded)" not in checker.text()
    assert checker.page.evaluate(SIDEWAYS_JS) == []
    checker.assert_healthy()


def test_a_planted_faults_findings_show_where_and_fix_without_sideways_scrolling(browser, streamlit_server,
                                                                                 artifacts_dir):
    ctx = browser.new_context(viewport=SIZE)
    ctx.set_default_timeout(120_000)
    app = AppPage(ctx.new_page(), streamlit_server, artifacts_dir / "screenshots")
    try:
        for hidden in ("", "&controls=hidden"):
            app.open("masks_and_labels?width=128&break=pads-in-the-loss&attn=flash_attention_2&step=4" + hidden)
            errors = [b for b in _boxes(app) if b["kind"] == "error"]
            assert errors, app.text()[:2000]
            assert app.page.evaluate(SIDEWAYS_JS) == []
            assert "fix" in app.text().lower()
            app.screenshot("findings-masks-and-labels-1024" + hidden.replace("&", "-").replace("=", "-"))
        app.assert_healthy()
    finally:
        ctx.close()
