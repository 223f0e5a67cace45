"""A model folder's model_type, read from its config.json alone, bounded, and looked up in the families table."""
import json

import pytest

from packing_core._validate import InputError
from packing_core.attention.families import family
from packing_core.models.folders import MAX_CONFIG_BYTES, config_model_type


def _folder(tmp_path, config) -> str:
    (tmp_path / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return str(tmp_path)


def test_the_model_type_of_a_saved_tiny_model_reaches_its_family(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model("lfm2", hidden_size=32, num_hidden_layers=1)
    config.save_pretrained(tmp_path)
    assert family(config_model_type(tmp_path)).causal_lm == "Lfm2ForCausalLM"


def test_a_multimodal_config_names_its_language_model(tmp_path):
    folder = _folder(tmp_path, {"model_type": "qwen3_5", "text_config": {"model_type": "qwen3_5_text"}})
    assert config_model_type(folder) == "qwen3_5_text"


@pytest.mark.parametrize("config, match", [
    ({"hidden_size": 8}, "names no model_type"),
    ("[1, 2]", "names no model_type"),
    ("{not json", "config.json"),
    (" " * (MAX_CONFIG_BYTES + 1), "config"),
])
def test_a_folder_without_a_readable_model_type_is_refused_in_one_line(tmp_path, config, match):
    with pytest.raises(ValueError, match=match):
        config_model_type(_folder(tmp_path, config))


def test_a_folder_without_config_json_says_what_to_give_instead(tmp_path):
    with pytest.raises(InputError, match="--model-type NAME"):
        config_model_type(tmp_path)
