"""Tiny random-init models of every causal-LM family in the installed transformers.

The families table (:mod:`packing_core.attention.families`) is measured on the real classes:
``transformers.AutoConfig.for_model(model_type, **small)`` then the family's ``...ForCausalLM``
built from that config with the library's own random init, float32, on the CPU. Only the sizes
change (2 to 4 layers, hidden 64, vocabulary 256, 4 experts): the code path a trainer's batch
takes through each layer is the family's own.

>>> tiny_config("llama").num_hidden_layers, tiny_config("llama").hidden_size
(2, 64)

A family whose config cannot be made small here, or whose model cannot run on a CPU, is
refused with one line (``NotBuilt``) that the table keeps as its reason. :func:`setup_inputs`
writes what each measured setup hands the model: the packed row, or one document alone.
"""
from __future__ import annotations

import warnings

import torch
import transformers
from transformers import AutoConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from packing_core.attention.families import SETUP_SIGNALS
from packing_core.attention.masks import block_causal_mask
from packing_core.models.api import dtype_kwargs

MAX_TINY_PARAMETERS = 3_000_000     # counted on the meta device, before any weight is allocated
VOCAB = 256
# Sizes set on every config that has the field. None of them is 5, 7, 9 or 21 (the document
# lengths and the packed row), so a tensor's time axis is never mistaken for a width.
SMALL = {
    "vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 256, "n_embd": 64, "n_head": 4,
    "n_positions": 256, "n_ctx": 256, "d_model": 64, "ffn_dim": 128, "n_inner": 128, "d_ff": 128,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "n_shared_experts": 1,
    "decoder_layers": 2, "decoder_attention_heads": 4, "decoder_ffn_dim": 128, "num_layers": 2,
    "num_hidden_layers": 2, "n_layer": 2, "word_embed_proj_dim": 64, "pad_token_id": 0, "bos_token_id": 1,
    "eos_token_id": 2, "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
    "v_head_dim": 16, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "rotary_dim": 8,
    # the library's init at 0.02 leaves a state-space scan's leak below float32 rounding (Bamba's moves
    # 5e-8); Mamba's own configs default to 0.1, so every family is built at 0.1
    "initializer_range": 0.1,
    # state-space and linear-attention layers
    "state_size": 16, "mamba_d_state": 16, "mamba_n_heads": 4, "mamba_d_head": 32, "mamba_n_groups": 1,
    "mamba_expand": 2, "mamba_d_conv": 4, "mamba_chunk_size": 16, "conv_kernel": 4, "time_step_rank": 8,
    "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "chunk_size": 16, "lru_width": 64,
    "attention_window_size": 64, "sliding_window": 64, "block_size": 64, "context_length": 64,
    "attention_hidden_size": 64, "num_experts_per_token": 2, "linear_head_dim": 16, "linear_num_heads": 4,
    "num_expert_group": 1, "num_shared_experts": 1, "moe_shared_expert_intermediate_size": 32, "ssm_state_size": 16,
    "mamba_num_heads": 4, "mamba_head_dim": 32, "n_groups": 1, "n_mamba_heads": 4, "mamba_headdim": 32,
    "mamba_ngroups": 1, "attention_head_dim": 16, "kv_channels": 16, "adapter_rank": 8, "mamba_dt_rank": 8,
    "mamba_d_ssm": 128, "num_dense_layers": 1, "vocab_size_per_layer_input": VOCAB, "hidden_size_per_layer_input": 0,
}
# What a family needs beyond SMALL: its own layer pattern (one of each kind in at most 4 layers),
# or a size its config ties to another. Each was found by building the family here.
OVERRIDES: dict[str, dict] = {
    "mamba": {"expand": 2},
    "mamba2": {"num_heads": 4, "head_dim": 32, "expand": 2, "n_groups": 1},
    "falcon_mamba": {"expand": 2},
    "bamba": {"num_hidden_layers": 2, "attn_layer_indices": [1]},
    "falcon_h1": {"num_hidden_layers": 2},
    "zamba": {"layer_types": ["linear_attention", "hybrid"] * 2, "num_hidden_layers": 4, "attention_hidden_size": 128,
              "attention_head_dim": 32},
    "zamba2": {"layer_types": ["linear_attention", "hybrid"] * 2, "num_hidden_layers": 4, "hybrid_layer_ids": [1, 3],
               "attention_hidden_size": 128, "attention_head_dim": 32},
    "qwen4_exp_text": {"layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2,
                       "indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 64,
                       "indexer_compress_ratio": 4, "ngram_vocab_size_base": 256, "split_ngram_parts": 1,
                       "hc_lowrank": 16},
    "nemotron_h": {"layers_block_type": ["linear_attention", "full_attention", "mlp"], "num_hidden_layers": 3},
    "lfm2": {"layer_types": ["conv", "full_attention"], "num_hidden_layers": 2},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_hidden_layers": 2},
    "lfm3": {"layer_types": ["conv", "full_attention"], "num_hidden_layers": 2},
    "gpt_neo": {"attention_types": [[["global", "local"], 1]], "num_layers": 2, "window_size": 64},
    "gemma3n_text": {"num_kv_shared_layers": 0},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2},
    "xmod": {"default_language": "en_XX"},
    "jamba": {"num_hidden_layers": 2, "attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
              "expert_layer_offset": 1, "mamba_dt_rank": 8, "use_mamba_kernels": False},
    "recurrent_gemma": {"block_types": ["recurrent", "attention"], "num_hidden_layers": 2},
    "zaya": {"num_experts_per_tok": 1},
    # sizes under their own names (each found by building the family here)
    "dbrx": {"d_model": 64, "n_heads": 4, "n_layers": 2, "max_seq_len": 256,
             "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
             "ffn_config": {"ffn_hidden_size": 128, "moe_num_experts": 4, "moe_top_k": 2, "hidden_size": 64}},
    "xlm": {"emb_dim": 64, "n_layers": 2, "n_heads": 4, "causal": True},
    "roc_bert": {"pronunciation_embed_dim": 16, "pronunciation_vocab_size": 64, "shape_embed_dim": 16,
                 "shape_vocab_size": 64, "is_decoder": True},
    "reformer": {"attn_layers": ["local", "local"], "num_hidden_layers": 2, "attention_head_size": 16,
                 "axial_pos_shape": [16, 16], "axial_pos_embds_dim": [32, 32], "feed_forward_size": 128,
                 "local_attn_chunk_length": 64, "is_decoder": True},
    "xlstm": {"num_heads": 4, "embedding_dim": 64, "num_blocks": 2, "qk_dim_factor": 0.5, "v_dim_factor": 1.0,
              "mode": "inference", "chunkwise_kernel": "chunkwise--native_autograd",
              "sequence_kernel": "native_sequence__native", "step_kernel": "native"},
}
# families that build tiny but whose layers return outputs the per-layer measurement cannot substitute into
NOT_MEASURABLE = {
    "reformer": "it builds tiny (117,376 parameters, is_decoder=True), but its layers return outputs the per-layer "
                "measurement cannot substitute into: measure it end to end with check --model",
}
# model types whose causal LM is a multimodal wrapper of a text family measured under its own name
_NOT_TEXT = ("ConditionalGeneration",)


class NotBuilt(Exception):
    """A family that cannot be built small or run on a CPU here; the message says why, in one line."""


def causal_lm_classes() -> dict[str, str]:
    """``model_type -> causal-LM class name``, every entry of transformers' auto mapping."""
    return dict(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def canonical_types() -> dict[str, tuple[str, ...]]:
    """One model type per causal-LM class (the one it is measured under) -> every model type that maps to it.

    ``exaone`` and ``internlm3`` build ``LlamaForCausalLM``: they are aliases of ``llama``.
    A ``..._text`` type is preferred to its multimodal parent (``qwen3_5_text`` for ``qwen3_5``).
    """
    by_class: dict[str, list[str]] = {}
    for mt, cls in sorted(causal_lm_classes().items()):
        by_class.setdefault(cls, []).append(mt)
    out = {}
    for cls, types in by_class.items():
        stem = _squash(cls.replace("ForCausalLM", "").replace("LMHeadModel", ""))
        best = min(types, key=lambda t: (not t.endswith("_text"), _squash(t).replace("text", "") != stem, t))
        out[best] = tuple(types)
    return dict(sorted(out.items()))


def _squash(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def _layer_types(default) -> list | None:
    """A short layer pattern holding one of each kind the default has (at most 4 layers)."""
    types = getattr(default, "layer_types", None)
    if not isinstance(types, (list, tuple)) or not types:
        return None
    kinds = list(dict.fromkeys(types))
    for n in range(len(kinds), 5):
        if set(types[:n]) == set(kinds):
            return list(types[:n])
    return kinds


def tiny_config(model_type: str):
    """The family's own config class with SMALL sizes, its OVERRIDES and a short layer pattern."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            default = AutoConfig.for_model(model_type)
    except Exception as e:   # the library's own refusal, kept as the reason
        raise NotBuilt(f"its config does not build: {_one_line(e)}") from None
    keys = set(default.to_dict()) | set(vars(default))
    kwargs = {k: v for k, v in SMALL.items() if k in keys}
    if "qk_rope_head_dim" in keys:
        kwargs["head_dim"] = SMALL["qk_rope_head_dim"]     # multi-head latent attention: rotary width
    if "kv_lora_rank" in keys:
        kwargs["num_key_value_heads"] = SMALL["num_attention_heads"]   # latent attention expands every head
    field = getattr(type(default), "attribute_map", {}).get("layer_types", "layer_types")
    layer_types = None if isinstance(getattr(type(default), field, None), property) else _layer_types(default)
    if layer_types is not None:
        kwargs["layer_types"] = layer_types
        kwargs["num_hidden_layers"] = len(layer_types)
    kwargs.update(OVERRIDES.get(model_type, {}))
    if "text_config" in keys:
        raise NotBuilt(_multimodal(model_type))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return AutoConfig.for_model(model_type, **kwargs)
    except Exception as e:
        raise NotBuilt(f"its config refuses tiny sizes: {_one_line(e)}") from None


def _multimodal(model_type: str) -> str:
    text = f"{model_type}_text"
    if text in causal_lm_classes():
        return f"a multimodal model: its language model is measured as {text!r}"
    return "a multimodal model: the lab measures causal language models only"


def _one_line(e: BaseException, limit: int = 160) -> str:
    text = " ".join(str(e).split())
    text = f"{type(e).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def build_tiny(model_type: str, *, attn_implementation: str = "sdpa", seed: int = 0):
    """The family's causal LM, tiny, random-init (seeded), float32, eval mode, on the CPU.

    Its size is counted on the meta device first, so a config that ignores the small sizes is
    refused before it allocates (a multimodal tower of billions of parameters, say).
    """
    if model_type in NOT_MEASURABLE:
        raise NotBuilt(NOT_MEASURABLE[model_type])
    cls_name = causal_lm_classes().get(model_type)
    if cls_name is None:
        raise NotBuilt(f"{model_type!r} has no causal-LM class in transformers {transformers.__version__}")
    if any(cls_name.endswith(s) for s in _NOT_TEXT):
        raise NotBuilt(_multimodal(model_type))
    config = tiny_config(model_type)
    cls = getattr(transformers, cls_name, None)
    if cls is None:
        raise NotBuilt(f"transformers does not export {cls_name}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.device("meta"):
                shell = cls._from_config(config)
        except Exception as e:
            raise NotBuilt(f"{cls_name} does not build from a tiny config: {_one_line(e)}") from None
        n = sum(p.numel() for p in shell.parameters())
        if n > MAX_TINY_PARAMETERS:
            raise NotBuilt(f"its config keeps {n:,} parameters at tiny sizes (more than {MAX_TINY_PARAMETERS:,})")
        torch.manual_seed(seed)
        for attn in dict.fromkeys((attn_implementation, "eager")):
            try:
                model = cls._from_config(config, attn_implementation=attn, **dtype_kwargs(torch.float32))
                break
            except (ValueError, ImportError) as e:
                error = e
        else:
            raise NotBuilt(f"{cls_name} builds with neither sdpa nor eager attention: {_one_line(error)}")
    return model.eval()


def setup_inputs(setup: str, lengths, input_ids: torch.Tensor) -> dict:
    """The forward kwargs of one packed row (or of one document alone, ``lengths`` of one) for ``setup``.

    >>> kw = setup_inputs("seq_idx", (2, 3), torch.arange(5)[None])
    >>> kw["position_ids"].tolist(), kw["cu_seq_lens_q"].tolist(), kw["seq_idx"].tolist()
    ([[0, 1, 0, 1, 2]], [0, 2, 5], [[0, 0, 1, 1, 1]])
    """
    lengths = [int(n) for n in lengths]
    T = sum(lengths)
    signals = SETUP_SIGNALS[setup]
    kw = {"input_ids": input_ids}
    if "position_ids" in signals:
        kw["position_ids"] = torch.cat([torch.arange(n) for n in lengths])[None]
    if "use_cache" not in signals:
        kw["use_cache"] = False
    if "cu_seq_lens" in signals:
        cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
        kw.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max(lengths), max_length_k=max(lengths))
    if "seq_idx" in signals:
        kw["seq_idx"] = torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32),
                                                torch.tensor(lengths))[None]
    if "mask_4d" in signals:
        allowed = block_causal_mask(torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()]), T)
        additive = torch.zeros(T, T).masked_fill(~allowed, torch.finfo(torch.float32).min)
        kw["attention_mask"] = additive[None, None]
    return kw


def documents(model, lengths, seed):
    """Seeded token ids for one packed row of ``lengths`` (ids from 3 up: no pad, bos or eos), and each document's."""
    g = torch.Generator().manual_seed(seed)
    vocab = model.get_input_embeddings().num_embeddings
    ids = torch.randint(3, vocab, (1, sum(lengths)), generator=g)
    starts = [0, *torch.tensor(lengths).cumsum(0).tolist()]
    return ids, [ids[:, a:b] for a, b in zip(starts, starts[1:])]
