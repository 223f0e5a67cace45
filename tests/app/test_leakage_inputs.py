"""The Leakage lab with your texts, drift in words, and your model folder (AppTest)."""
import pytest
import torch
from streamlit.testing.v1 import AppTest
from transformers import LlamaConfig, LlamaForCausalLM

from packing_core.models import pretrained_status
from packing_core.models.tokenizers import real_tokenizer
from tests._support import skip_or_fail


def open_lab(**state) -> AppTest:
    at = AppTest.from_file("../../app.py", default_timeout=180)
    at.switch_page("app_pages/leakage_lab.py").run()
    at.checkbox(key="w_leakage_lab.skip").check()
    for key, value in state.items():
        getattr(at, "radio" if key == "mask" else "selectbox")(key=f"w_leakage_lab.{key}").set_value(value)
    return at.run()


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    """A real LlamaForCausalLM (random init, for speed) with SmolLM2's tokenizer, saved as safetensors."""
    tokenizer = real_tokenizer()
    if tokenizer is None:
        skip_or_fail("SmolLM2's tokenizer is not installed")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tokenizer.hf), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    folder = tmp_path_factory.mktemp("my-model")
    LlamaForCausalLM(cfg).save_pretrained(folder, safe_serialization=True)
    tokenizer.hf.save_pretrained(folder)
    return folder


def test_a_folder_in_the_setting_appears_in_the_picker_and_runs_typed_texts(model_folder, monkeypatch):
    monkeypatch.setenv("PACKING_LAB_MODEL_DIRS", str(model_folder))
    at = open_lab(model=str(model_folder), mask="off")
    at.text_area(key="w_leakage_lab.texts").set_value("The cat sat on the mat.\nStocks fell sharply today.").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(w.value.startswith("Verdict: NOT EQUIVALENT") for w in at.warning)
    assert "Stocks fell sharply today." in "\n".join(t.value for t in at.text)


def test_one_text_is_refused_with_the_limit_named(model_folder, monkeypatch):
    monkeypatch.setenv("PACKING_LAB_MODEL_DIRS", str(model_folder))
    at = open_lab(model=str(model_folder))
    at.text_area(key="w_leakage_lab.texts").set_value("just one line").run()
    assert not at.exception and "give 2 to 4 texts, got 1" in at.error[0].value


def test_smollm2_drift_in_words_side_by_side():
    if not pretrained_status()[0]:
        skip_or_fail("SmolLM2 is not installed")
    at = open_lab(model="smollm2", mask="off")
    at.button(key="leakage_lab.drift_go").click().run()
    assert not at.exception and not at.error
    assert any("The words part at generated token" in w.value for w in at.warning)
    assert "tower" in "\n".join(t.value for t in at.text).lower()


def test_a_folder_without_a_tokenizer_says_so_in_one_line(tmp_path, monkeypatch):
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    LlamaForCausalLM(cfg).save_pretrained(tmp_path, safe_serialization=True)
    monkeypatch.setenv("PACKING_LAB_MODEL_DIRS", str(tmp_path))
    at = open_lab(model=str(tmp_path))
    assert not at.exception and len(at.error) == 1 and "no tokenizer files" in at.error[0].value
