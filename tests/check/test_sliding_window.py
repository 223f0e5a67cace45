"""A 4D mask replaces a sliding-window model's window: transformers uses the mask as given, so the window is lost."""
import numpy as np
import pytest
import torch

from packing_core.check import check_hf_batch
from packing_core.check.mixers import family_sliding_window

WINDOW = 4096                  # mistral's default config (transformers' MistralConfig)


def _batch(lengths, *, window=None) -> dict:
    """One row of documents with a 4D block-causal mask (may-read, bool), windowed when ``window`` is given."""
    seg = np.repeat(np.arange(len(lengths)), lengths)
    i = np.arange(len(seg))
    allowed = (seg[:, None] == seg[None, :]) & (i[None, :] <= i[:, None])
    if window is not None:
        allowed &= (i[:, None] - i[None, :]) < window
    ids = np.arange(1, len(seg) + 1)[None] % 1000 + 1
    labels = ids.copy()
    labels[0, np.r_[0, np.cumsum(lengths)[:-1]]] = -100
    return {"input_ids": ids, "labels": labels, "attention_mask": allowed[None, None]}


def test_the_windows_are_read_from_the_installed_configs():
    assert family_sliding_window("mistral") == WINDOW
    assert family_sliding_window("gemma3_text") == WINDOW                      # sliding layers among full ones
    assert family_sliding_window("llama") is None
    assert family_sliding_window("qwen2") is None                               # use_sliding_window=False
    assert family_sliding_window("not-a-family") is None


def test_a_block_mask_over_a_document_longer_than_the_window_is_an_error_for_a_sliding_family():
    batch = _batch([WINDOW + 54, 50])
    c = check_hf_batch(batch, "sdpa", model_type="mistral")
    assert "mask_replaces_sliding_window" in c.names and not c.sound
    found = next(f for f in c.errors if f.name == "mask_replaces_sliding_window")
    assert "a window of 4,096 tokens" in found.detail and "54 quer(ies)" in found.detail
    assert "mask_replaces_sliding_window" not in check_hf_batch(batch, "sdpa", model_type="llama").names


@pytest.mark.parametrize("how", ["windowed mask", "short documents", "flash_attention_2"])
def test_no_error_where_the_window_is_kept(how):
    if how == "windowed mask":
        batch, impl = _batch([WINDOW + 54, 50], window=WINDOW), "sdpa"
    elif how == "short documents":
        batch, impl = _batch([WINDOW - 10, 200]), "sdpa"
    else:
        batch, impl = _batch([WINDOW + 54, 50]), "flash_attention_2"     # the window is a kernel argument there
    assert "mask_replaces_sliding_window" not in check_hf_batch(batch, impl, model_type="mistral").names


@pytest.mark.parametrize("impl", ["sdpa"])
def test_transformers_drops_the_window_for_a_4d_mask_and_keeps_it_when_the_mask_has_it(impl):
    """The claim the rule rests on, on the installed transformers: a tiny Mistral with a window of 4."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, sliding_window=4, max_position_embeddings=64, attn_implementation=impl)
    model = MistralForCausalLM(cfg).eval()
    lengths = [7, 6]
    ids = torch.randint(1, 64, (1, sum(lengths)))
    position_ids = torch.cat([torch.arange(n) for n in lengths])[None]
    with torch.no_grad():
        alone = torch.cat([model(input_ids=d, use_cache=False).logits for d in ids.split(lengths, dim=1)], dim=1)

        def packed(window):
            mask = torch.from_numpy(_batch(lengths, window=window)["attention_mask"])
            return model(input_ids=ids, position_ids=position_ids, attention_mask=mask, use_cache=False).logits

        assert (packed(None) - alone).abs().max() > 1e-2              # the block mask: the window is gone
        assert (packed(4) - alone).abs().max() < 1e-5                  # the window in the mask: each document alone
