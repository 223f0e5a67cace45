"""The engineer's views: model presets in the cost view, the explorer's headline against pad-longest, the
settings to paste, and the cheatsheet download."""
import pytest

from packing_core.analysis import MODEL_SHAPES, end_to_end
from packing_core.analysis.tables import strategy_table
from tests._support import assert_clean, open_page

WORKED = [120, 90, 300, 40, 55, 30, 210, 65]


@pytest.mark.parametrize("key", list(MODEL_SHAPES))
def test_the_cost_view_offers_every_preset_and_shows_its_config_and_attention_share(key):
    at = open_page("padded_vs_packed")
    radio = at.radio(key="w_padded_vs_packed.model_shape")
    assert list(radio.options) == [MODEL_SHAPES[k].name for k in MODEL_SHAPES]
    radio.set_value(key).run()
    assert_clean(at)
    shape = MODEL_SHAPES[key]
    caption = next(c.value for c in at.caption if c.value.startswith(shape.name))
    assert f"N = {shape.params:,.0f} parameters" in caption and f"{shape.n_heads} heads" in caption
    assert shape.source in caption
    table = next(d.value for d in at.dataframe if "attention share" in d.value)
    pad = {e.strategy: e for e in end_to_end(strategy_table(WORKED, 512), key)}["pad"]
    assert dict(zip(table["strategy"], table["attention share"]))["pad"] == f"{pad.attention_share:.1%}"


# ---------------------------------------------------------------- the explorer: headline and settings
def _tickets():
    import packing_core as pc

    return pc.load_lengths("support-tickets", tokenizer=pc.load_tokenizer("auto"))


def test_the_explorers_headline_leads_with_pad_longest_and_keeps_the_full_context_figure_beside_it():
    from packing_core.analysis import headline

    at = open_page("dataset_explorer")
    head = headline(strategy_table(_tickets(), 512))
    shown = next(m.value for m in at.markdown if m.value.startswith("### ")).replace("\\", "")   # unescaped
    assert shown == "### " + head.sentence[0].upper() + head.sentence[1:]
    assert f"vs {head.pad_longest_value:.1%} padded to each batch's longest" in shown
    assert f"({head.ratio:.1f}x against padding to the context, {head.padding_value:.1%})" in shown
    assert head.pad_longest_ratio < head.ratio
    assert any("batches of 32 documents" in c.value for c in at.caption)


def test_the_recommendation_step_shows_each_trainers_settings_to_paste():
    from packing_core.analysis import length_stats, recommended_settings

    at = open_page("dataset_explorer")
    lengths = _tickets()
    kind = at.radio(key="dataset_explorer.kind_support-tickets").value          # the page's answer to "what is it?"
    settings = recommended_settings(length_stats(lengths, 512), strategy_table(lengths, 512), kind)
    info = at.info[0].value
    assert info.endswith(f"long run `{settings[0].call}`.")          # the advice ends with TRL's switch
    assert at.code[0].value == settings[0].code
    for s in settings:
        at.radio(key="w_dataset_explorer.trainer").set_value(s.framework).run()
        assert_clean(at)
        assert at.code[0].value == s.code and any(s.source in c.value.replace("\\", "") for c in at.caption)


def test_the_explorers_opening_paragraph_describes_the_data_on_screen():
    tickets = open_page("dataset_explorer")
    shown = "\n".join(m.value for m in tickets.markdown).replace("\\", "")     # markdown escapes taken off
    assert "its lengths are long-tailed (median 89, p95 282 tokens)" in shown and "77.9% of this dataset" in shown
    other = open_page("dataset_explorer", dataset="bimodal")
    text = "\n".join(m.value for m in other.markdown).replace("\\", "")
    assert "long-tailed" not in text and "its lengths are bimodal (median 47, p95 446 tokens)" in text
