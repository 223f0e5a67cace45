"""A tiny causal transformer that reads packed rows.

It takes the packed format only: one flat row of token ids plus the document layout::

    input_ids    [ 7  3  9  4  1]     two documents, lengths [3, 2]
    position_ids [ 0  1  2  0  1]     reset at each document start
    cu_seqlens   [ 0  3  5]           where the documents start and end

and returns logits ``[T, vocab_size]``. Attention goes through
:func:`packing_core.attention.attend`, so the same weights run under every backend.

The weights are random (seeded, so two constructions are identical). That is enough
here: the lab asks whether packing changes the computation, not whether the model is
good, and a random model is instant on a CPU. The init is deliberately not the usual
tiny-std one: attention must be peaky enough that a leak across documents moves the
logits by a visible amount instead of hiding in the noise floor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn

from packing_core._validate import InputError
from packing_core.attention.backends import attend

MODELS = ("tiny-rope", "tiny-abs")


@dataclass(frozen=True)
class TinyConfig:
    vocab_size: int = 256          # bytes
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    max_positions: int = 2048      # size of the learned position table (absolute only)
    positions: str = "rope"        # "rope" | "absolute"
    seed: int = 0

    def __post_init__(self):
        if self.positions not in ("rope", "absolute"):
            raise InputError(f"positions must be 'rope' or 'absolute', got {self.positions!r}")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise InputError(f"d_model={self.d_model} must split into n_heads={self.n_heads} "
                             "heads of even size: pick d_model = n_heads * an even number")


def rope(x: torch.Tensor, position_ids: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate ``x [T, H, D]`` by angles ``position * base**(-2i/D)`` (rotate-half form).

    The score q_m . k_n then depends only on m - n, which is why a uniform shift of the
    positions inside an isolated document changes nothing.
    """
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float64) / d)
    angles = position_ids.to(torch.float64)[:, None] * inv_freq[None, :]   # [T, D/2]
    # float64 angles: at position 2000 float32 would already lose the low bits.
    cos = torch.cat([angles.cos(), angles.cos()], -1)[:, None, :].to(torch.float32)
    sin = torch.cat([angles.sin(), angles.sin()], -1)[:, None, :].to(torch.float32)
    xf = x.float()
    x1, x2 = xf[..., : d // 2], xf[..., d // 2:]
    rotated = torch.cat([-x2, x1], -1)
    return (xf * cos + rotated * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x, position_ids, cu_seqlens, max_seqlen, backend, row_offsets, causal=True):
        T, C = x.shape
        h = self.cfg.n_heads
        q, k, v = self.qkv(x).view(T, 3, h, C // h).unbind(1)
        if self.cfg.positions == "rope":
            q, k = rope(q, position_ids), rope(k, position_ids)
        if callable(backend):      # a function of its own, (q, k, v) -> out: e.g. packing_core.parallel.ring's ring
            y = backend(q, k, v)
        else:
            y = attend(q, k, v, cu_seqlens, max_seqlen, backend, row_offsets=row_offsets, causal=causal)
        return self.proj(y.reshape(T, C))


class Block(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(),
                                 nn.Linear(4 * cfg.d_model, cfg.d_model))

    def forward(self, x, position_ids, cu_seqlens, max_seqlen, backend, row_offsets, causal=True):
        x = x + self.attn(self.ln1(x), position_ids, cu_seqlens, max_seqlen, backend,
                          row_offsets, causal)
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    """Embeddings -> n_layers x (attention, MLP) -> logits, over one packed row."""

    def __init__(self, cfg: TinyConfig = TinyConfig()):
        super().__init__()
        self.cfg = cfg
        # nn.Linear draws its default init from the global RNG: fork it so that building
        # a model never shifts the caller's random stream. _init_weights overwrites it all.
        with torch.random.fork_rng(devices=[]):
            self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
            self.pos_emb = (nn.Embedding(cfg.max_positions, cfg.d_model)
                            if cfg.positions == "absolute" else None)
            self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
            self.ln_f = nn.LayerNorm(cfg.d_model)
            self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self._init_weights()

    @torch.no_grad()
    def _init_weights(self):
        # A private generator: seeded weights without touching the global RNG.
        g = torch.Generator().manual_seed(self.cfg.seed)
        for name, p in self.named_parameters():
            if name.startswith("ln") or ".ln" in name:
                continue                                   # LayerNorm stays 1 / 0
            if p.dim() == 1:
                p.zero_()                                  # biases
            elif "emb" in name:
                p.normal_(0.0, 1.0, generator=g)
            else:
                std = 1.0 / math.sqrt(p.shape[1])
                if "qkv" in name:
                    std *= 2.0                             # peaky attention: leaks show
                p.normal_(0.0, std, generator=g)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cu_seqlens,
                max_seqlen: int, backend: str = "segments", row_offsets=None, *, causal: bool = True
                ) -> torch.Tensor:
        """Logits ``[T, vocab]`` of one packed row; ``causal=False`` lets each document read its future
        (the varlen kernels' default: :func:`packing_core.attention.attend`). ``backend`` names one of
        ``attend``'s, or is a function ``(q, k, v) -> out`` over the row's ``[T, H, D]`` tensors that
        replaces attention in every layer (the context-parallel ring of :mod:`packing_core.parallel.ring`)."""
        if input_ids.dim() != 1 or position_ids.shape != input_ids.shape:
            raise InputError(f"input_ids and position_ids must be one packed row [T], got "
                             f"{tuple(input_ids.shape)} and {tuple(position_ids.shape)}: "
                             "concatenate the documents and pass cu_seqlens")
        x = self.tok_emb(input_ids)
        if self.pos_emb is not None:
            top = int(position_ids.max()) if len(position_ids) else 0
            if top >= self.cfg.max_positions:
                raise InputError(f"position id {top} >= max_positions={self.cfg.max_positions}: "
                                 "reset positions per document or raise max_positions")
            x = x + self.pos_emb(position_ids)
        for block in self.blocks:
            x = block(x, position_ids, cu_seqlens, max_seqlen, backend, row_offsets, causal)
        return self.lm_head(self.ln_f(x))


def tiny_model(name: str = "tiny-rope", *, seed: int = 0,
               dtype: torch.dtype = torch.float32, device="cpu") -> TinyTransformer:
    """The seeded tiny model: ``"tiny-rope"`` (RoPE) or ``"tiny-abs"`` (learned absolute)."""
    if name not in MODELS:
        raise InputError(f"unknown tiny model {name!r}: choose one of {', '.join(MODELS)}")
    positions = "rope" if name == "tiny-rope" else "absolute"
    model = TinyTransformer(TinyConfig(positions=positions, seed=seed))
    return model.to(device=device, dtype=dtype).eval()
