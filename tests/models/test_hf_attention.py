"""Transformers integration: our backends inside a HF LLaMA, HF's own packing pitfall, SmolLM2."""
import re
import shutil

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from packing_core._settings import cache_dir
from packing_core.models import hf_attention as hf_attention_mod
from packing_core.models import load_pretrained, pretrained_status
from packing_core.models import pretrained as hf
from packing_core.models import pretrained as pretrained_mod
from packing_core.models.hf_attention import ATTN_IMPLEMENTATIONS, hf_runner
from packing_core.models.tokenizers import default_tokenizer, real_tokenizer
from packing_core.verify import verify_pretrained
from packing_core.verify.equivalence import default_documents
from packing_core.verify.run import verify_hf
from tests._support import skip_or_fail

LENGTHS = (12, 8, 10)


@pytest.fixture(scope="module")
def llama():
    """A small random LLaMA built from its config (no download): 4 query heads share 2 kv heads."""
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def documents():
    return default_documents(LENGTHS, vocab_size=256, seed=1)


# ---------------------------------------------------------------- HF's own attention
def test_hf_config_keeps_the_cache_on_by_default(llama):
    assert llama.config.use_cache is True


def test_sdpa_with_cache_leaks_across_documents_even_with_positions_reset(llama, documents):
    report = verify_hf(llama, documents, mask="off", positions="reset", attn="sdpa", use_cache=True)
    first, *later = report.documents
    assert first.equivalent
    assert not any(d.equivalent for d in later), report.format_table()


def test_sdpa_with_the_config_default_leaks_in_train_mode_too(llama, documents):
    llama.train()
    try:
        report = verify_hf(llama, documents, mask="off", attn="sdpa", use_cache=None)
    finally:
        llama.eval()
    assert not report.equivalent, report.format_table()


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_hf_attention_without_cache_finds_documents_from_position_resets(llama, documents, attn):
    # The runner passes no boundaries to HF's own attention: position_ids alone mark them.
    report = verify_hf(llama, documents, mask="off", positions="reset", attn=attn, use_cache=False)
    assert report.equivalent, report.format_table()


def test_hf_attention_cannot_find_documents_when_positions_run_on(llama, documents):
    report = verify_hf(llama, documents, mask="on", positions="continuous", attn="sdpa",
                          use_cache=False)
    assert not report.documents[1].equivalent, report.format_table()


# ---------------------------------------------------------------- our registered backends
def test_every_backend_is_registered_with_transformers():
    from transformers import AttentionInterface
    assert set(ATTN_IMPLEMENTATIONS) <= set(AttentionInterface._global_mapping)
    assert "packing_lab_segments" in ATTN_IMPLEMENTATIONS


@pytest.mark.parametrize("attn", ["packing_lab_segments", "packing_lab_dense", "packing_lab_padded"])
@pytest.mark.parametrize("use_cache", [False, True])
def test_registered_backends_keep_packed_documents_apart(llama, documents, attn, use_cache):
    # They read cu_seq_lens, so a cache (or anything else) cannot switch the mask off.
    report = verify_hf(llama, documents, mask="on", attn=attn, use_cache=use_cache)
    assert report.equivalent, report.format_table()


def test_registered_causal_only_backend_leaks(llama, documents):
    report = verify_hf(llama, documents, mask="on", attn="packing_lab_causal_only")
    assert report.documents[0].equivalent
    assert not report.documents[1].equivalent, report.format_table()


def test_registered_backend_computes_what_sdpa_computes(llama):
    # One document, no boundaries passed: same scaling and shared kv heads as HF's sdpa.
    ids = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = llama(ids, use_cache=False).logits
        llama.set_attn_implementation("packing_lab_segments")
        try:
            got = llama(ids, use_cache=False).logits
        finally:
            llama.set_attn_implementation("sdpa")
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_registered_backend_refuses_kv_cache_decoding(llama):
    llama.set_attn_implementation("packing_lab_segments")
    try:
        with pytest.raises(ValueError, match="use_cache=False"):
            llama.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=2, do_sample=False)
    finally:
        llama.set_attn_implementation("sdpa")


def test_runner_puts_the_models_attention_back(llama, documents):
    run = hf_runner(llama, "packing_lab_dense")
    run(torch.tensor(documents[0]), torch.arange(LENGTHS[0]), torch.tensor([0, LENGTHS[0]]), LENGTHS[0])
    assert llama.config._attn_implementation == "sdpa"


def test_short_backend_names_map_to_registered_ones():
    assert hf_attention_mod.attn_name("segments") == "packing_lab_segments"
    assert hf_attention_mod.attn_name("sdpa") == "sdpa"


def test_unknown_attention_name_lists_the_choices():
    with pytest.raises(ValueError, match="packing_lab_segments"):
        hf_attention_mod.attn_name("flash-of-genius")


def test_blank_texts_are_refused_before_any_model_loads(monkeypatch):
    def no_loading(*a, **k):
        raise AssertionError("the model loaded before the texts were checked")

    monkeypatch.setattr(pretrained_mod, "load_pretrained", no_loading)
    with pytest.raises(ValueError, match="text 1 is empty"):
        verify_pretrained(texts=["A sentence.", "  "])


# ---------------------------------------------------------------- missing model
@pytest.fixture
def no_model(tmp_path, monkeypatch):
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path))
    monkeypatch.setattr(hf, "GGUF_PACKAGE", "no_such_model_package")
    real_tokenizer.cache_clear()
    yield
    real_tokenizer.cache_clear()


def test_missing_model_status_gives_the_install_command(no_model):
    available, message = pretrained_status()
    assert not available
    assert pretrained_mod.INSTALL_PRETRAINED in message


def test_loading_a_missing_model_raises_with_the_install_command(no_model):
    with pytest.raises(ValueError, match=re.escape(pretrained_mod.INSTALL_PRETRAINED)):
        load_pretrained()


def test_default_tokenizer_falls_back_to_bytes_and_says_why(no_model):
    tokenizer, reason = default_tokenizer()
    assert tokenizer(["hé"]) == [[104, 195, 169]]
    assert "byte" in reason and pretrained_mod.INSTALL_PRETRAINED in reason


# ---------------------------------------------------------------- the real SmolLM2
@pytest.fixture(scope="session")
def smollm2():
    available, message = pretrained_status()
    if not available:
        skip_or_fail(message)
    return load_pretrained()


def test_real_tokenizer_adds_no_special_tokens(smollm2):
    tokenizer = real_tokenizer()
    ids = tokenizer(["Hello world", "x"])
    assert len(ids) == 2 and len(ids[0]) == 2
    assert smollm2[1].bos_token_id not in ids[0]
    assert tokenizer.decode(ids[0]) == "Hello world"
    assert len(smollm2[1]) == 49152


def _holds_plain_safetensors(folder) -> bool:
    """One ``model.safetensors``, or the shards its index names, all safetensors; no pickle anywhere."""
    import json

    index = folder / "model.safetensors.index.json"
    files = ({folder / f for f in json.loads(index.read_text())["weight_map"].values()} if index.is_file()
             else {folder / "model.safetensors"})
    pickles = [p for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".pkl")]
    return bool(files) and all(f.suffix == ".safetensors" and f.is_file() for f in files) and not pickles


def test_smollm2_cache_holds_plain_safetensors(smollm2):
    folder = cache_dir() / pretrained_mod._MODEL_DIR
    assert _holds_plain_safetensors(folder)
    assert "quantization_config" not in (folder / "config.json").read_text()


def test_smollm2_packed_with_the_mask_changes_no_prediction(smollm2):
    result = verify_pretrained(mask="on", pretrained=smollm2)
    assert result.equivalent, result.format_table()
    assert result.changes == ()


def test_smollm2_without_the_mask_changes_the_second_texts_predictions(smollm2):
    result = verify_pretrained(mask="off", pretrained=smollm2)
    assert result.documents[0].equivalent
    assert not result.equivalent
    assert result.changes and {c.document for c in result.changes} == {1}
    assert all(c.alone_top1 != c.packed_top1 for c in result.changes)
    assert "changed by packing" in result.format_table()
    assert result.to_dict()["changes"][0]["document"] == 1


def test_smollm2_sdpa_with_cache_leaks_on_real_text(smollm2):
    result = verify_pretrained(mask="off", attn_implementation="sdpa", use_cache=True, pretrained=smollm2)
    assert not result.equivalent
    clean = verify_pretrained(mask="off", attn_implementation="sdpa", use_cache=False, pretrained=smollm2)
    assert clean.equivalent, clean.format_table()


@pytest.mark.slow_model
def test_smollm2_converts_from_gguf_and_matches_alone_when_packed(tmp_path, monkeypatch):
    if pretrained_mod._gguf_folder() is None:
        skip_or_fail(f"SmolLM2 is not installed: {pretrained_mod.INSTALL_PRETRAINED}")
    monkeypatch.setenv("PACKING_LAB_CACHE", str(tmp_path))   # a cold cache: convert the GGUF
    pretrained = load_pretrained()   # its time is a benchmark figure (docs/measurements.md), not a test: the machine is shared
    assert _holds_plain_safetensors(tmp_path / pretrained_mod._MODEL_DIR)
    shutil.rmtree(tmp_path / pretrained_mod._MODEL_DIR)   # 0.5 GB: pytest keeps old tmp folders around
    on = verify_pretrained(mask="on", pretrained=pretrained)
    assert on.max_abs_diff < 1e-3, on.format_table()
    off = verify_pretrained(mask="off", pretrained=pretrained)
    assert off.documents[-1].max_abs_diff > 1, off.format_table()
