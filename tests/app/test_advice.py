"""The engineer's views: model presets in the cost view, the explorer's headline against pad-longest, the
settings to paste, and the cheatsheet download."""
import pytest

from packing_core.analysis import MODEL_SHAPES, end_to_end, strategy_table
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
