"""The cost views' model presets: each one's fields are its public config, and N is what transformers builds."""
import json

import pytest

from packing_core import InputError
from packing_core.analysis import MODEL_SHAPES, end_to_end
from packing_core.analysis.shapes import llama_shape, model_shape
from packing_core.analysis.tables import strategy_table


def _llama_config(shape):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=shape.vocab, hidden_size=shape.d_model, intermediate_size=shape.d_ff,
                       num_hidden_layers=shape.n_layer, num_attention_heads=shape.n_heads,
                       num_key_value_heads=shape.n_kv_heads, tie_word_embeddings=shape.tied_embeddings)


@pytest.mark.parametrize("key", list(MODEL_SHAPES))
def test_each_presets_parameter_count_is_what_transformers_builds_from_its_config(key):
    import torch
    from transformers import LlamaForCausalLM

    shape = MODEL_SHAPES[key]
    with torch.device("meta"):          # shapes only: a 70B model costs no memory here
        model = LlamaForCausalLM(_llama_config(shape))
    assert sum(p.numel() for p in model.parameters()) == shape.params


def test_the_7b_preset_is_transformers_llama_config_defaults():
    from transformers import LlamaConfig

    c, s = LlamaConfig(), MODEL_SHAPES["7B"]
    assert (c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
            c.tie_word_embeddings) == (s.vocab, s.d_model, s.d_ff, s.n_layer, s.n_heads, s.tied_embeddings)


def test_the_smollm2_preset_is_the_config_of_the_model_the_lab_ships(require_smollm2):
    from packing_core.models.pretrained import _converted_model_dir

    path = _converted_model_dir() / "config.json"          # converts the installed GGUF when the cache is empty
    c, s = json.loads(path.read_text()), MODEL_SHAPES["SmolLM2-135M"]
    assert (c["vocab_size"], c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"],
            c["num_attention_heads"], c["num_key_value_heads"], c["tie_word_embeddings"]) == \
        (s.vocab, s.d_model, s.d_ff, s.n_layer, s.n_heads, s.n_kv_heads, s.tied_embeddings)


def test_attention_weighs_less_in_a_bigger_model_at_the_same_rows():
    rows = strategy_table([120, 90, 300, 40, 55, 30, 210, 65], 512)
    share = {k: {e.strategy: e for e in end_to_end(rows, k)}["pad"].attention_share for k in MODEL_SHAPES}
    assert share["SmolLM2-135M"] > share["7B"] > share["70B"] > 0
    # by the formula: 12 n_layer d_model T / (6 N + 12 n_layer d_model T), T = 512 (every pad computed)
    s = MODEL_SHAPES["70B"]
    attn = 12 * s.n_layer * s.d_model * 512
    assert share["70B"] == pytest.approx(attn / (6 * s.params + attn))


def test_a_shape_by_hand_and_an_unknown_preset():
    mine = llama_shape("mine", n_layer=2, d_model=8, n_heads=2, n_kv_heads=1, d_ff=16, vocab=10, tied_embeddings=True,
                       source="by hand")
    assert mine.params == 10 * 8 + 2 * (2 * 64 + 2 * 8 * 4 + 3 * 8 * 16 + 16) + 8
    assert model_shape(mine) is mine and model_shape("70B") is MODEL_SHAPES["70B"]
    assert MODEL_SHAPES["70B"].label == "70B (Llama-2 shape): 80 layers, d_model 8,192, 64 heads, 69.0B parameters"
    with pytest.raises(InputError, match="choose one of SmolLM2-135M, 7B, 70B"):
        model_shape("GPT-9")
