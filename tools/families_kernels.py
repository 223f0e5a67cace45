"""The fast kernels' boundary signals, measured where they run: a CUDA GPU with their packages installed.

``attention.families.KERNELS`` states, from each kernel's code, which signal keeps packed sequences
apart (``causal_conv1d_fn`` reads ``seq_idx``, flash-linear-attention's ``chunk_gated_delta_rule``
reads ``cu_seqlens``, ...): derived, not measured on the lab's CPU. Here each kernel runs three
documents of 7, 9 and 5 tokens packed in one row, without and with its signal, against each
document alone. ``scripts/gpu_check.sh`` calls :func:`check_kernels`; without CUDA or without a
package the kernel is skipped with one line saying which.

>>> [c.status for c in check_kernels("cpu")]
['skipped', 'skipped', 'skipped', 'skipped']
"""
from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass

import torch

from packing_core.attention.families import KERNELS

LENGTHS = (7, 9, 5)
# (kernel name, import path, dtype): float32 where the kernel takes it, bfloat16 where it asserts otherwise
_CHECKS = (("causal_conv1d_fn", "causal_conv1d", torch.float32),
           ("mamba_chunk_scan_combined", "mamba_ssm.ops.triton.ssd_combined", torch.float32),
           ("chunk_gated_delta_rule", "fla.ops.gated_delta_rule", torch.bfloat16),
           ("chunk_kda", "fla.ops.kda", torch.bfloat16))
_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2}   # of the largest |output| alone


@dataclass(frozen=True)
class KernelCheck:
    """One kernel: ``status`` is ``agrees`` (it honours exactly what KERNELS says), ``disagrees``, ``skipped``
    or ``error`` (the call itself failed: an API change, not a finding); the two differences are the
    largest |packed - alone| without and with the signal, relative to the largest |output| alone."""

    kernel: str
    package: str
    signal: str
    status: str
    without_signal: float | None = None
    with_signal: float | None = None
    why: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _inputs(name: str, T: int, device, dtype, g):
    """Random inputs for one row of T tokens (batch 1), as the kernel takes them."""
    def r(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(device=device, dtype=dtype)

    if name == "causal_conv1d_fn":
        return {"x": r(1, T, 64).transpose(1, 2), "weight": r(64, 4, scale=0.5), "bias": r(64)}
    if name == "mamba_chunk_scan_combined":
        return {"x": r(1, T, 4, 16), "dt": r(1, T, 4, scale=0.1).abs() + 0.05, "A": -r(4).abs() - 0.1,
                "B": r(1, T, 1, 16), "C": r(1, T, 1, 16)}
    q, k = r(1, T, 2, 32), r(1, T, 2, 32)
    q, k = q / q.float().norm(dim=-1, keepdim=True).to(dtype), k / k.float().norm(dim=-1, keepdim=True).to(dtype)
    shape = (1, T, 2, 32) if name == "chunk_kda" else (1, T, 2)
    return {"q": q, "k": k, "v": r(1, T, 2, 32), "g": -(r(*shape, scale=0.1).abs().float() + 0.01).to(device),
            "beta": torch.sigmoid(r(1, T, 2)).float().to(device=device, dtype=dtype)}


def _call(fn, name: str, inputs: dict, signal: dict):
    if name == "causal_conv1d_fn":
        return fn(inputs["x"], inputs["weight"], inputs["bias"], activation="silu", **signal)
    if name == "mamba_chunk_scan_combined":
        return fn(inputs["x"], inputs["dt"], inputs["A"], inputs["B"], inputs["C"], chunk_size=8, **signal)
    out = fn(inputs["q"], inputs["k"], inputs["v"], inputs["g"], inputs["beta"], **signal)
    return out[0] if isinstance(out, tuple) else out


def _time_axis(name: str) -> int:
    return 2 if name == "causal_conv1d_fn" else 1


def _split(name: str, inputs: dict, lengths) -> list[dict]:
    """Each document's slice of the row's inputs (a tensor without a time axis is shared)."""
    out, start = [], 0
    for n in lengths:
        doc = {}
        for key, x in inputs.items():
            axis = 2 if (name == "causal_conv1d_fn" and key == "x") else 1
            doc[key] = x.narrow(axis, start, n) if x.dim() > axis and x.shape[axis] == sum(lengths) else x
        out.append(doc)
        start += n
    return out


def check_kernel(name: str, module: str, dtype, device="cuda", lengths=LENGTHS, seed: int = 0) -> KernelCheck:
    kernel = KERNELS[name]
    signal_name = kernel.reads[0] if kernel.reads else "seq_idx"
    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return KernelCheck(name, kernel.package, signal_name, "skipped", why="needs a CUDA device")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        return KernelCheck(name, kernel.package, signal_name, "skipped", why=f"{kernel.package} is not installed ({e})")
    g = torch.Generator().manual_seed(seed)
    T = sum(lengths)
    inputs = _inputs(name, T, device, dtype, g)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)
    seq_idx = torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32), torch.tensor(lengths))
    signal = {"seq_idx": seq_idx[None].to(device)} if signal_name == "seq_idx" else {"cu_seqlens": cu.long()}
    try:
        alone = torch.cat([_call(fn, name, doc, {}) for doc in _split(name, inputs, lengths)], _time_axis(name))
        without = _call(fn, name, inputs, {})
        with_signal = _call(fn, name, inputs, signal)
    except Exception as e:   # an API change in the package: reported, not judged
        return KernelCheck(name, kernel.package, signal_name, "error", why=f"{type(e).__name__}: {e}"[:200])
    scale = float(alone.float().abs().max()) or 1.0
    d0 = float((without.float() - alone.float()).abs().max()) / scale
    d1 = float((with_signal.float() - alone.float()).abs().max()) / scale
    tol = _TOLERANCE[dtype]
    honours = d0 > tol and d1 <= tol
    expected = bool(kernel.reads)
    status = "agrees" if honours == expected else "disagrees"
    why = (f"without {signal_name} the documents meet ({d0:.1e}); with it each matches its alone run ({d1:.1e})"
           if honours else f"{signal_name} does not keep the documents apart (without {d0:.1e}, with {d1:.1e})")
    return KernelCheck(name, kernel.package, signal_name, status, d0, d1, why)


def check_kernels(device="cuda") -> tuple[KernelCheck, ...]:
    """Every fast kernel the families table names, measured on ``device`` where its package is installed."""
    return tuple(check_kernel(name, module, dtype, device) for name, module, dtype in _CHECKS)
