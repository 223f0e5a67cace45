"""A tiny hybrid teaching model: attention, a short causal convolution and a gated linear recurrence.

This is a **teaching model**: pure torch, random init (seeded), three layers, instant on a CPU.
It shows, in a model small enough to read in one sitting, why a perfect attention mask is not
enough for hybrid models. The real families (Qwen3-Next, LFM2, Mamba, ...) are measured from the
real transformers classes in :mod:`packing_core.attention.families`; this model only teaches.

Each layer kind reads its own boundary signal, and each can be told to ignore it (``honour``):

- **attention** reads ``cu_seqlens`` (through :func:`packing_core.attention.attend`); ignoring it,
  it runs one causal triangle over the row (backend ``causal_only``);
- **convolution** (depthwise, causal, kernel 4, as in Mamba and LFM2) reads ``seq_idx``, the
  document of each token, as causal-conv1d does: a tap that reaches into another document reads 0.
  Ignoring it, the first ``kernel - 1 = 3`` tokens of each document read the previous one;
- **recurrence** (``h_t = a_t * h_{t-1} + (1 - a_t) * x_t``, a gate per channel and token) reads
  ``cu_seqlens``: the state restarts at each document. Ignoring it, the state carries the previous
  document into every token of the next.

>>> m = hybrid_model()
>>> lk = layer_leaks(m, lengths=(6, 5))
>>> [int((d > 0).sum()) for d in lk.without_signal.values()]   # positions of document 2 that differ
[5, 3, 5]
>>> [float(d.max()) for d in lk.with_signal.values()]
[0.0, 0.0, 0.0]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn

from packing_core._validate import InputError
from packing_core.attention.backends import attend
from packing_core.attention.masks import causal, materialise

KINDS = ("attention", "convolution", "recurrence")


@dataclass(frozen=True)
class HybridConfig:
    vocab_size: int = 256
    d_model: int = 64
    n_heads: int = 4
    kernel: int = 4                           # the convolution's width: it reads kernel - 1 earlier tokens
    honour: tuple[str, ...] = KINDS           # the layer kinds that read their boundary signal
    seed: int = 0

    def __post_init__(self):
        unknown = set(self.honour) - set(KINDS)
        if unknown:
            raise InputError(f"honour names layer kinds {sorted(unknown)}; choose from {', '.join(KINDS)}")
        if self.d_model % self.n_heads:
            raise InputError(f"d_model={self.d_model} must split into n_heads={self.n_heads} heads")
        if self.kernel < 1:
            raise InputError(f"kernel must be >= 1, got {self.kernel}")


def seq_idx_from_cu(cu_seqlens, total: int) -> torch.Tensor:
    """The document of each token from its offsets: ``[0, 3, 5] -> [0, 0, 0, 1, 1]``.

    >>> seq_idx_from_cu(torch.tensor([0, 3, 5]), 5).tolist()
    [0, 0, 0, 1, 1]
    """
    cu = torch.as_tensor(cu_seqlens, dtype=torch.long)
    return torch.searchsorted(cu[1:], torch.arange(total), right=True)


class RowLinear(nn.Module):
    """``x @ W.T (+ b)`` as an explicit product and sum, so each row's result never depends on how many rows
    share the call (a BLAS matmul may round a row differently at another batch size): the differences the
    teaching model shows are then its mixers' alone, exactly 0 where a layer keeps documents apart."""

    def __init__(self, d_in: int, d_out: int, bias: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))
        self.bias = nn.Parameter(torch.zeros(d_out)) if bias else None

    def forward(self, x):
        y = (x[..., :, None] * self.weight.t()).sum(-2)
        return y if self.bias is None else y + self.bias


class SelfAttention(nn.Module):
    def __init__(self, cfg: HybridConfig):
        super().__init__()
        self.cfg = cfg
        self.qkv = RowLinear(cfg.d_model, 3 * cfg.d_model)
        self.proj = RowLinear(cfg.d_model, cfg.d_model)

    def forward(self, x, cu_seqlens, max_seqlen, backend="segments", honour=True, causal=True):
        T, C = x.shape
        q, k, v = self.qkv(x).view(T, 3, self.cfg.n_heads, C // self.cfg.n_heads).unbind(1)
        if not honour:
            backend, cu_seqlens, max_seqlen = "causal_only", torch.tensor([0, T], dtype=torch.int32), T
        return self.proj(attend(q, k, v, cu_seqlens, max_seqlen, backend, causal=causal).reshape(T, C))


class ShortConv(nn.Module):
    """Depthwise causal convolution: ``y_t = sum_j w_j * x_{t-j}``, j < kernel; reads ``seq_idx``."""

    def __init__(self, cfg: HybridConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(cfg.kernel, cfg.d_model))
        self.proj = RowLinear(cfg.d_model, cfg.d_model)

    def forward(self, x, seq_idx=None):
        T = x.shape[0]
        out = torch.zeros_like(x)
        for j in range(min(self.weight.shape[0], T)):      # kernel taps, not tokens
            tap = torch.zeros_like(x)
            tap[j:] = x[: T - j]
            if seq_idx is not None and j:
                same = torch.zeros(T, dtype=torch.bool)
                same[j:] = seq_idx[j:] == seq_idx[: T - j]
                tap = tap * same[:, None]
            out = out + self.weight[j] * tap
        return self.proj(out)


class GatedRecurrence(nn.Module):
    """``h_t = a_t * h_{t-1} + (1 - a_t) * x_t``, ``a_t = sigmoid(W x_t)``; restarts at each ``cu_seqlens`` offset.

    Computed in closed form per segment: ``h_t = sum_{s<=t} exp(L_t - L_s) (1 - a_s) x_s`` with
    ``L = cumsum(log a)``, one [n, n] matrix per segment (like attention), no loop per token.
    """

    def __init__(self, cfg: HybridConfig):
        super().__init__()
        self.gate = RowLinear(cfg.d_model, cfg.d_model, bias=True)
        self.proj = RowLinear(cfg.d_model, cfg.d_model)

    @staticmethod
    def _scan(x, log_a):
        n = x.shape[0]
        L = torch.cumsum(log_a, 0)                                   # [n, C]
        decay = (L[:, None, :] - L[None, :, :]).clamp(max=0.0).exp()  # [t, s, C]
        decay = decay * materialise(causal, n)[:, :, None]                # the one causal rule (attention.masks)
        return torch.einsum("tsc,sc->tc", decay, (1 - log_a.exp()) * x)

    def forward(self, x, cu_seqlens=None):
        log_a = nn.functional.logsigmoid(self.gate(x))
        if cu_seqlens is None:
            return self.proj(self._scan(x, log_a))
        cu = [int(c) for c in torch.as_tensor(cu_seqlens).tolist()]
        parts = [self._scan(x[a:b], log_a[a:b]) for a, b in zip(cu, cu[1:]) if b > a]   # documents, not tokens
        return self.proj(torch.cat(parts) if parts else x[:0])


class HybridModel(nn.Module):
    """Embeddings -> attention -> convolution -> recurrence (each residual, LayerNorm first) -> logits."""

    def __init__(self, cfg: HybridConfig = HybridConfig()):
        super().__init__()
        self.cfg = cfg
        with torch.random.fork_rng(devices=[]):
            self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
            self.norms = nn.ModuleList(nn.LayerNorm(cfg.d_model) for _ in range(4))
            self.attention = SelfAttention(cfg)
            self.convolution = ShortConv(cfg)
            self.recurrence = GatedRecurrence(cfg)
            self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self._init_weights()

    @torch.no_grad()
    def _init_weights(self):
        g = torch.Generator().manual_seed(self.cfg.seed)
        for name, p in self.named_parameters():
            if name.startswith("norms"):
                continue
            if p.dim() == 1:
                # a gate near 0.9: the state keeps most of itself, so a leak reaches far into the next document
                p.normal_(2.0, 0.5, generator=g) if name.startswith("recurrence.gate") else p.zero_()
            elif "emb" in name:
                p.normal_(0.0, 1.0, generator=g)
            else:
                # a convolution tap is one weight per channel; a matrix is scaled to its fan-in
                std = 0.5 if name == "convolution.weight" else 2.0 / math.sqrt(p.shape[1])
                p.normal_(0.0, std, generator=g)

    def layer(self, kind: str, x, cu_seqlens, max_seqlen, backend="segments", seq_idx=None, honour=None,
              causal=True):
        """One layer kind's output for its (normed) input ``x``; ``honour`` overrides the config's switch."""
        honour = kind in self.cfg.honour if honour is None else honour
        if kind == "attention":
            return self.attention(x, cu_seqlens, max_seqlen, backend, honour, causal)
        if kind == "convolution":
            if seq_idx is None:
                seq_idx = seq_idx_from_cu(cu_seqlens, x.shape[0])
            return self.convolution(x, seq_idx if honour else None)
        return self.recurrence(x, cu_seqlens if honour else None)

    def forward(self, input_ids, position_ids, cu_seqlens, max_seqlen, backend="segments", row_offsets=None,
                *, seq_idx=None, trace: dict | None = None, causal: bool = True):
        """Logits ``[T, vocab]`` for one packed row (the runner convention of ``models.tiny``).

        ``position_ids`` are accepted for the convention and unused: no layer here reads positions.
        ``trace``, when given, receives each layer's input by kind (what :func:`layer_leaks` replays).
        """
        if input_ids.dim() != 1:
            raise InputError(f"input_ids must be one packed row [T], got {tuple(input_ids.shape)}: concatenate "
                             "the documents and pass cu_seqlens")
        x = self.tok_emb(input_ids)
        for norm, kind in zip(self.norms, KINDS):
            h = norm(x)
            if trace is not None:
                trace[kind] = h
            x = x + self.layer(kind, h, cu_seqlens, max_seqlen, backend, seq_idx, causal=causal)
        return self.lm_head(self.norms[3](x))


def hybrid_model(*, honour=KINDS, seed: int = 0, dtype: torch.dtype = torch.float32, device="cpu") -> HybridModel:
    """The seeded teaching model; ``honour`` lists the layer kinds that read their boundary signal."""
    model = HybridModel(HybridConfig(honour=tuple(honour), seed=seed))
    return model.to(device=device, dtype=dtype).eval()


@dataclass(frozen=True)
class HybridLeak:
    """Per layer kind, the |difference| at each position of the last document: packed after the others vs alone.

    Each layer is fed the exact inputs the documents have alone, so each array is that layer's own
    leak (max over channels), not one carried from a layer before it. ``without_signal``: the layers
    ignore their boundary signal; ``with_signal``: they read it.
    """

    lengths: tuple[int, ...]
    without_signal: dict[str, np.ndarray] = field(repr=False)
    with_signal: dict[str, np.ndarray] = field(repr=False)

    def first_clean(self, kind: str) -> int | None:
        """The first position of the last document that no longer differs without the signal (None: none)."""
        d = self.without_signal[kind]
        clean = np.flatnonzero(d == 0)
        return int(clean[0]) if len(clean) and (d[clean[0]:] == 0).all() else None

    def to_dict(self) -> dict:
        return {"lengths": list(self.lengths),
                "without_signal": {k: v.tolist() for k, v in self.without_signal.items()},
                "with_signal": {k: v.tolist() for k, v in self.with_signal.items()}}


@torch.no_grad()
def layer_leaks(model: HybridModel | None = None, lengths=(8, 8), *, seed: int = 0) -> HybridLeak:
    """How each layer kind of the teaching model leaks the earlier documents into the last one, per position.

    Each document runs alone and each layer's input is recorded; then each layer reads the
    concatenation of those inputs as one packed row, with its boundary signal (``cu_seqlens``,
    ``seq_idx``) and without it, and its output on the last document is compared with that
    document's alone output.
    """
    model = model or hybrid_model()
    lengths = tuple(int(n) for n in lengths)
    if len(lengths) < 2 or min(lengths) < 1:
        raise InputError(f"lengths must name at least two documents of >= 1 token, got {lengths}")
    g = torch.Generator().manual_seed(seed)
    docs = [torch.randint(0, model.cfg.vocab_size, (n,), generator=g) for n in lengths]
    alone_in, alone_out = [], []
    for doc in docs:
        trace: dict = {}
        cu = torch.tensor([0, len(doc)], dtype=torch.int32)
        model(doc, torch.arange(len(doc)), cu, len(doc), trace=trace)
        alone_in.append(trace)
        alone_out.append({k: model.layer(k, trace[k], cu, len(doc)) for k in KINDS})
    cu = torch.tensor([0, *np.cumsum(lengths)], dtype=torch.int32)
    T, last = int(cu[-1]), lengths[-1]
    out = {}
    for honour in (False, True):
        diffs = {}
        for kind in KINDS:
            x = torch.cat([a[kind] for a in alone_in])
            y = model.layer(kind, x, cu, max(lengths), honour=honour)[T - last:]
            diffs[kind] = (y - alone_out[-1][kind]).abs().amax(-1).float().numpy()
        out[honour] = diffs
    return HybridLeak(lengths, out[False], out[True])
