"""Measure what each model family's layers read: a packed row against each document alone, per layer kind.

For one family (a tiny random-init model of the real transformers class, :mod:`.families_build`)
and one setup (which boundary signals the batch carries, ``families.SETUPS``):

1. each document runs **alone**, with the same kinds of signals for its one document, and every
   mixer's input and output is recorded (forward hooks on modules, wrappers on the modeling
   module's kernel functions such as ``causal_conv1d_fn``);
2. the **packed** row runs plainly: its logits against the alone logits give the end-to-end
   max |Δlogit|;
3. the packed row runs again with every mixer's input replaced by the concatenation of the
   alone inputs, and its output compared with the concatenation of the alone outputs (then
   replaced by them). Each mixer's difference is then its own leak, independent of the layers
   before it: a convolution that reads 3 tokens of the previous document, a recurrent state
   that carries it all, an attention mask that never saw the position resets.

A setup the library refuses (its own ``ValueError``, or a kwarg the forward does not take) is
recorded with the error, shortened, and the layer kind that raised it.

The documents are 7, 9 and 5 tokens: no width of a tiny model is 5, 7, 9 or 21, so a tensor's
time axis is the one whose size follows the document lengths.
"""
from __future__ import annotations

import importlib
import sys
import warnings
from dataclasses import dataclass, field

import torch

from packing_core.attention.families import (
    FUNCTION_KINDS,
    KINDS,
    SETUPS,
    TOLERANCE,
    Family,
    Mixer,
    Outcome,
)
from packing_core.verify.families_build import (
    NotBuilt,
    _one_line,
    build_tiny,
    canonical_types,
    documents,
    setup_inputs,
)
from tools.families_code import kernel_names, mask_facts, modeling_source

LENGTHS = (7, 9, 5)

# module classes that mix tokens without softmax attention (a class with "Attention" in its name is
# softmax attention unless listed in NOT_ATTENTION)
MODULE_KINDS = {
    "Conv1d": "convolution",             # torch.nn.Conv1d called as a module (RG's conv_1d, ...)
    "ZeroPad2d": "convolution",          # RWKV's token shift: a width-2 causal convolution
    "RecurrentGemmaRglru": "recurrence", "MiniMaxLightningAttention": "recurrence", "xLSTMBackend": "recurrence",
}
NOT_ATTENTION = ("MiniMaxLightningAttention", "KimiLinearDeltaAttention", "BailingHybridDeltaAttention",
                 "RwkvSelfAttention")


@dataclass
class _Point:
    """One place a mixer is measured: a module instance, or a kernel function of the modeling module."""

    name: str          # class name, or the function's name
    kind: str
    called_from: str = ""
    alone: list = field(default_factory=list)    # per document: list of (inputs, outputs) per call
    calls: int = 0
    max_diff: float = 0.0
    scale: float = 0.0     # the largest |output| alone: a leak is a difference above TOLERANCE of it
    compared: int = 0      # outputs compared (0: no output had a time axis to compare on)
    broken: str = ""   # why this point could not be attributed (call counts differ, ...)
    receives: set = field(default_factory=set)


def _time_axis(packed_shape, alone_shapes, lengths) -> tuple[int, int] | None:
    """(axis, extra): the one axis whose size is each document's length (+ a constant extra), else None."""
    T = sum(lengths)
    found = []
    for a in range(len(packed_shape)):
        extra = packed_shape[a] - T
        if extra >= 0 and all(len(s) == len(packed_shape) and s[a] - n == extra for s, n in zip(alone_shapes, lengths)):
            if all(s[b] == packed_shape[b] for s in alone_shapes for b in range(len(s)) if b != a):
                found.append((a, extra))
    return found[0] if len(found) == 1 else None


def _joined(pieces, lengths, axis: int, extra: int, packed: torch.Tensor) -> tuple[torch.Tensor, slice]:
    """The alone tensors joined along ``axis`` in the packed tensor's layout, and the slice of the valid tokens.

    Where a tensor has ``extra`` positions (a padded convolution's tail, a cached state's head),
    the first document (identical alone and packed in any causal layer) tells which side they are on.
    """
    n1 = lengths[0]
    if extra:
        back = (packed.narrow(axis, 0, n1) - pieces[0].narrow(axis, 0, n1)).abs().max()
        front = (packed.narrow(axis, extra, n1) - pieces[0].narrow(axis, extra, n1)).abs().max()
        start = extra if front < back else 0
    else:
        start = 0
    body = torch.cat([p.narrow(axis, start, n) for p, n in zip(pieces, lengths)], axis)
    T = sum(lengths)
    full = torch.cat([packed.narrow(axis, 0, start), body, packed.narrow(axis, start + T, extra - start)], axis)
    return full, slice(start, start + T)


def _floats(obj) -> list[tuple[object, torch.Tensor]]:
    """(key, tensor) of the float tensors at the top level of args (a tuple), kwargs (a dict) or an output."""
    if isinstance(obj, torch.Tensor):
        return [(None, obj)] if obj.is_floating_point() else []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (tuple, list)) else []
    return [(k, v) for k, v in items if isinstance(v, torch.Tensor) and v.is_floating_point()]


_HIDDEN = ("hidden_states", "hidden", "x", "activations", "input_states", "input")


def _data_keys(args, kwargs, only_first: bool) -> list[tuple[str, object]]:
    """Which inputs carry the token stream: every float tensor of a kernel function; a module's first one."""
    keys = [("args", k) for k, _ in _floats(tuple(args))] + [("kwargs", k) for k, _ in _floats(kwargs)]
    if not only_first:
        return keys
    if keys and keys[0][0] == "args":
        return keys[:1]
    return [("kwargs", k) for k in _HIDDEN if isinstance(kwargs.get(k), torch.Tensor)][:1]


def _put(obj, key, value):
    if key is None:
        return value
    if isinstance(obj, dict):
        return {**obj, key: value}
    seq = list(obj)
    seq[key] = value
    return type(obj)(seq) if isinstance(obj, tuple) and not hasattr(obj, "_fields") else seq


class _Meter:
    """Records every point's inputs and outputs alone, then substitutes and compares them packed."""

    def __init__(self, lengths):
        self.lengths = list(lengths)
        self.doc = 0            # the document running alone, or -1 for the packed row
        self.active = False
        self.probe = False      # record which boundary kwargs reach each kernel function, and drop them
        self.raised_in: _Point | None = None
        self.source = ""        # the modeling module's file: the caller of a mixer is the first frame in it

    def reset_calls(self, points):
        for p in points:
            p.calls = 0

    def inputs(self, point: _Point, args, kwargs, only_first: bool):
        if not self.active or self.doc >= 0:
            return args, kwargs
        k = point.calls
        if point.broken or any(len(calls) <= k for calls in point.alone):
            point.broken = point.broken or "more calls packed than alone"
            return args, kwargs
        where = {"args": args, "kwargs": kwargs}
        for part, key in _data_keys(args, kwargs, only_first):
            x = where[part][key]
            alone = [calls[k][0][part] for calls in point.alone]
            alone = [a[key] if (isinstance(a, dict) and key in a) or (isinstance(a, (tuple, list)) and key < len(a))
                     else None for a in alone]
            if any(not isinstance(a, torch.Tensor) for a in alone):
                continue
            axis = _time_axis(x.shape, [a.shape for a in alone], self.lengths)
            if axis is None or axis[1]:
                continue
            joined, _ = _joined(alone, self.lengths, axis[0], 0, x)
            where[part] = _put(where[part], key, joined.to(x.dtype))
        return where["args"], where["kwargs"]

    def outputs(self, point: _Point, args, kwargs, out):
        if not self.active:
            return out
        k = point.calls
        point.calls += 1
        if self.doc >= 0:
            point.alone[self.doc].append(({"args": _detach(args), "kwargs": _detach(kwargs)}, _detach(out)))
            return out
        if point.broken:
            return out
        for key, y in _floats(out):
            alone = [dict(_floats(calls[k][1])).get(key) for calls in point.alone]
            if any(a is None for a in alone):
                continue
            axis = _time_axis(y.shape, [a.shape for a in alone], self.lengths)
            if axis is None:
                continue
            joined, valid = _joined(alone, self.lengths, axis[0], axis[1], y)
            diff = (y - joined).narrow(axis[0], valid.start, valid.stop - valid.start).abs().max()
            point.compared += 1
            point.max_diff = max(point.max_diff, float(diff))
            point.scale = max(point.scale, float(joined.narrow(axis[0], valid.start, valid.stop - valid.start).abs().max()))
            out = _put(out, key, joined.to(y.dtype))
        return out


def _detach(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _detach(v) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(_detach(v) for v in obj) if not hasattr(obj, "_fields") else obj
    return obj


def _caller(meter: _Meter) -> str:
    """``Class.method`` of the innermost frame in the family's modeling file: the code that called the mixer."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename != meter.source:
        f = f.f_back
    return f.f_code.co_qualname if f is not None else ""


_PROBED = ("cu_seqlens", "cu_seq_lens_q", "seq_idx")


def _attach(model, meter: _Meter) -> tuple[list[_Point], callable]:
    """Hook every mixer of ``model``; returns the points and a function that removes every hook."""
    points, handles, patched = [], [], []
    modeling = importlib.import_module(type(model).__module__)
    meter.source = modeling.__file__
    for name, kind in FUNCTION_KINDS.items():
        fn = getattr(modeling, name, None)
        if not callable(fn):
            continue
        point = _Point(name, kind, alone=[[] for _ in meter.lengths])
        points.append(point)

        def wrapper(*args, _fn=fn, _p=point, **kwargs):
            _p.called_from = _p.called_from or _caller(meter)
            if meter.probe:
                _p.receives |= {k for k in _PROBED if kwargs.get(k) is not None}
                kwargs = {k: v for k, v in kwargs.items() if k not in ("cu_seqlens", "seq_idx")}
                return _fn(*args, **kwargs)
            args, kwargs = meter.inputs(_p, args, kwargs, only_first=False)
            try:
                out = _fn(*args, **kwargs)
            except Exception:
                meter.raised_in = meter.raised_in or _p
                raise
            return meter.outputs(_p, args, kwargs, out)

        setattr(modeling, name, wrapper)
        patched.append((name, fn))
    for module in model.modules():
        cls = type(module).__name__
        kind = MODULE_KINDS.get(cls)
        if kind is None and cls not in NOT_ATTENTION and ("Attention" in cls or cls.endswith("Attn")):
            kind = "attention"
        if kind is None:
            continue
        point = _Point(cls, kind, alone=[[] for _ in meter.lengths])
        points.append(point)

        def before(m, a, kw, _p=point):
            _p.called_from = _p.called_from or _caller(meter)
            return meter.inputs(_p, a, kw, only_first=True)

        handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(module.register_forward_hook(
            lambda m, a, kw, out, _p=point: meter.outputs(_p, a, kw, out), with_kwargs=True))

    def detach():
        for h in handles:
            h.remove()
        for name, fn in patched:
            setattr(modeling, name, fn)

    return points, detach


def _forward(model, kwargs) -> torch.Tensor:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model(**kwargs).logits.float()


def measure_setup(model, setup: str, lengths=LENGTHS, *, seed: int = 0) -> tuple[dict[str, Outcome], list[_Point]]:
    """Per layer kind of ``model`` (and ``"logits"``, end to end): its outcome for ``setup``; and the hooked points."""
    ids, docs = documents(model, lengths, seed)
    meter = _Meter(lengths)
    points, detach = _attach(model, meter)
    try:
        alone_logits = []
        meter.active = True
        for d, (n, doc) in enumerate(zip(lengths, docs)):
            meter.doc = d
            meter.reset_calls(points)
            alone_logits.append(_forward(model, setup_inputs(setup, [n], doc)))
        meter.active = False
        packed = setup_inputs(setup, lengths, ids)
        logits = _forward(model, packed)
        meter.active, meter.doc = True, -1
        meter.reset_calls(points)
        _forward(model, packed)
    except Exception as e:   # the library's own refusal of this setup
        by = meter.raised_in.kind if meter.raised_in else "model"
        kinds = sorted({p.kind for p in points if p.called_from or by == "model"}, key=KINDS.index)
        error = _one_line(e)
        return {k: (Outcome("refused", None, error) if by in (k, "model") else Outcome("unreached"))
                for k in [*kinds, "logits"]}, points
    finally:
        meter.active = False
        detach()
    out = {}
    for kind in KINDS:
        mine = [p for p in points if p.kind == kind and any(p.alone)]
        if mine and not any(p.compared for p in mine):
            out[kind] = Outcome("unmeasured", None, f"no output of {mine[0].name} has one time axis to compare on")
        elif mine:
            broken = [p.broken for p in mine if p.broken]
            diff = max(p.max_diff for p in mine)
            leaks = any(p.max_diff > TOLERANCE * p.scale for p in mine)
            out[kind] = Outcome("leaks" if leaks else "sound", diff, broken[0] if broken else "")
    alone = torch.cat(alone_logits, 1)[0]
    e2e = float((logits[0] - alone).abs().max())
    out["logits"] = Outcome("leaks" if e2e > TOLERANCE * float(alone.abs().max()) else "sound", e2e)
    return out, points


def probe_receives(model, lengths=LENGTHS, *, seed: int = 0) -> list[_Point]:
    """The packed row with every signal, each kernel function recording which boundary kwargs reach it.

    The kwargs are dropped before the call, so the reference torch code (which refuses them) runs on.
    """
    ids, _ = documents(model, lengths, seed)
    meter = _Meter(lengths)
    points, detach = _attach(model, meter)
    meter.probe = True
    try:
        _forward(model, setup_inputs("seq_idx", lengths, ids))
    except Exception:   # a model that refuses the kwargs themselves: what reached a kernel is still recorded
        pass
    finally:
        detach()
    return points


def measure_family(model_type: str, setups=SETUPS, lengths=LENGTHS) -> Family:
    """Build the family's tiny model, measure every setup, read its mask call; a family that cannot run says why.

    It runs on one thread: a tiny model's matrices are too small to share, and on a busy machine
    two threads that wait for each other make it 10 to 30 times slower.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _measure_family(model_type, setups, lengths)
    finally:
        torch.set_num_threads(threads)


def _measure_family(model_type: str, setups, lengths) -> Family:
    aliases = tuple(a for a in canonical_types().get(model_type, (model_type,)) if a != model_type)
    try:
        model = build_tiny(model_type)
    except NotBuilt as e:
        return Family(model_type, aliases=aliases, not_built=str(e))
    module = type(model).__module__
    outcomes, seen = [], {}
    for setup in setups:
        result, points = measure_setup(model, setup, lengths)
        outcomes += [(setup, kind, o) for kind, o in result.items()]
        for p in points:
            if p.called_from:
                seen.setdefault((p.kind, p.name, p.called_from), set())
    for p in probe_receives(model, lengths):
        if (p.kind, p.name, p.called_from) in seen:
            seen[(p.kind, p.name, p.called_from)] |= p.receives
    kernels = kernel_names(modeling_source(module))
    mixers = tuple(Mixer(kind, name, caller, kernels.get(name, ""), tuple(sorted(seen[(kind, name, caller)])))
                   for kind, name, caller in sorted(seen, key=lambda k: (KINDS.index(k[0]), k[1], k[2])))
    mask_call, sees = mask_facts(module)
    kinds = [k for k in KINDS if any(m.kind == k for m in mixers)] + ["logits"]
    found = {(s, k): o for s, k, o in outcomes}
    table = []
    for s in setups:
        for k in kinds:
            o = found.get((s, k), Outcome("unreached"))
            control = found.get(("none", k))
            if k != "logits" and o.status == "sound" and control is not None and control.status == "sound":
                o = Outcome("unmeasured", o.max_diff, "moves nothing between documents even with no boundary "
                            "signal at this tiny size: its leak stays below float32 rounding here")
            table.append((s, k, o))
    outcomes = table
    return Family(model_type, type(model).__name__, module.rsplit(".", 1)[-1], model.config._attn_implementation,
                  aliases, mask_call, sees, mixers, tuple(outcomes))
