"""What each model family's layers read to keep packed documents apart: data, measured from the real library.

Attention is not the only layer that moves information between tokens. A **mixer** is any layer
that mixes tokens: softmax attention, a short causal **convolution** (kernel 4 in Mamba, Gated
DeltaNet and LFM2 layers), or a **recurrence** (a state carried token to token: Mamba's scan,
Gated DeltaNet, RWKV, RG-LRU). Each reads its own **boundary signal**, or none:

- attention reads the mask transformers builds (``masking_utils.create_causal_mask``): position
  resets isolate documents only when the model's code passes ``position_ids`` to it, and only with
  no cache; a 4D mask is used as given;
- a convolution or a recurrence reads ``seq_idx`` or ``cu_seqlens`` passed to its kernel, and only a
  fast kernel (causal-conv1d, mamba-ssm, flash-linear-attention: CUDA) honours them; transformers'
  reference torch code refuses them (``integrations.hub_kernels.use_kernel_func_from_hub_with_fallback``
  raises "can't keep packed sequences apart") or never receives them, and then leaks.

The table (``families_table.json``, written by ``python -m tools.families_table --write``)
holds, for every causal-LM family of the installed transformers that builds tiny on a CPU, its
mixers (class or kernel function, the code that calls it, the signals that reach it) and the
measured outcome per **setup** (which signals the packed batch carries, ``SETUPS``) and layer kind:
a float, the largest |difference| against each document alone (a leak above ``TOLERANCE``), or
the library's refusal. ``tests/attention/test_families.py`` rebuilds every row from the library.

>>> fam = family("lfm2")
>>> fam.kinds, fam.outcome("position_ids", "convolution").status
(('attention', 'convolution'), 'leaks')
>>> [v.status for v in layer_verdicts("lfm2", ["position_ids"])]
['sound', 'leaks']
>>> family("no_such_model")  # doctest: +ELLIPSIS
Traceback (most recent call last):
packing_core._validate.InputError: unknown model type 'no_such_model': give the model_type of a config.json; ...
"""
from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from packing_core._validate import InputError

KINDS = ("attention", "convolution", "recurrence")
# The boundary signals a batch can carry; "use_cache" removes one (a cache turns off transformers' packed detection).
SIGNALS = ("position_ids", "cu_seq_lens", "seq_idx", "mask_4d", "use_cache")
# What the packed row carries in each measured setup (each document alone carries the same kinds).
SETUP_SIGNALS = {
    "none": (),                                              # continuous positions: naive packing
    "position_ids": ("position_ids",),                       # what TRL and DataCollatorWithFlattening emit
    "cu_seq_lens": ("position_ids", "cu_seq_lens"),          # + cu_seq_lens_q/_k, max_length_q/_k
    "seq_idx": ("position_ids", "cu_seq_lens", "seq_idx"),   # + seq_idx (the document of each token)
    "mask_4d": ("position_ids", "mask_4d"),                  # a 4D block-causal attention_mask
    "use_cache": ("position_ids", "use_cache"),              # use_cache left at the config's default
}
SETUPS = tuple(SETUP_SIGNALS)
STATUSES = ("sound", "leaks", "refused", "unreached", "unmeasured")
# A leak: a difference above TOLERANCE x the largest |value| alone (float32 sound cells: near 1e-7 of it, docs/checker-guide.md).
TOLERANCE = 1e-5
# kernel-function names in transformers' modeling modules -> the layer kind they compute
FUNCTION_KINDS = {
    "causal_conv1d_fn": "convolution",
    "mamba2_chunk_scan": "recurrence", "mamba_selective_scan": "recurrence",
    "torch_chunk_gated_delta_rule": "recurrence", "chunk_kimi_delta_attention": "recurrence",
    "rwkv_linear_attention": "recurrence",
}
# batch signal -> the kwarg names it arrives under at a kernel call
_ARRIVES_AS = {"cu_seq_lens": ("cu_seqlens", "cu_seq_lens_q"), "seq_idx": ("seq_idx",)}
_REFUSED_BY_REFERENCE = ("cu_seqlens", "seq_idx")   # hub_kernels' fallback raises on these


@dataclass(frozen=True)
class Kernel:
    """A fast kernel transformers calls when its package is installed (CUDA): what it reads, from its code.

    Derived from the kernel's source, not measured here (no GPU); ``scripts/gpu_check.sh`` measures them.
    """

    name: str            # the name transformers asks for (use_kernel_func_from_hub_with_fallback)
    package: str         # the pip distribution
    reads: tuple[str, ...]   # the kwargs it keeps sequences apart with
    cites: str

    def to_dict(self) -> dict:
        return asdict(self)


KERNELS = {k.name: k for k in (
    Kernel("causal_conv1d_fn", "causal-conv1d", ("seq_idx",),
           "causal_conv1d/causal_conv1d_interface.py causal_conv1d_fn(x, weight, bias, seq_idx, ...) -> "
           "causal_conv1d_cuda.causal_conv1d_fwd(..., seq_idx, ...): no cu_seqlens"),
    Kernel("mamba_chunk_scan_combined", "mamba-ssm", ("seq_idx",),
           "mamba_ssm/ops/triton/ssd_combined.py mamba_chunk_scan_combined(..., seq_idx=None, cu_seqlens=None): "
           "seq_idx resets the state; cu_seqlens only returns per-sequence final states"),
    Kernel("mamba_split_conv1d_scan_combined", "mamba-ssm", ("seq_idx",),
           "mamba_ssm/ops/triton/ssd_combined.py mamba_split_conv1d_scan_combined(..., seq_idx=None): "
           "conv and scan both reset at seq_idx changes"),
    Kernel("selective_scan_fn", "mamba-ssm", (),
           "mamba_ssm/ops/selective_scan_interface.py selective_scan_fn(u, delta, A, B, C, D, z, ...): "
           "no seq_idx, no cu_seqlens (Mamba-1 has no varlen scan)"),
    Kernel("chunk_gated_delta_rule", "flash-linear-attention", ("cu_seqlens",),
           "fla/ops/gated_delta_rule/chunk.py chunk_gated_delta_rule(..., cu_seqlens=None): batch size 1, "
           "the state restarts at each offset"),
    Kernel("chunk_kda", "flash-linear-attention", ("cu_seqlens",),
           "fla/ops/kda/chunk.py chunk_kda(..., cu_seqlens=None): batch size 1, the state restarts at each offset"),
)}


@dataclass(frozen=True)
class Outcome:
    """One measured cell: ``status`` (one of STATUSES), the largest |difference| against each document alone
    (None when refused), and the library's own error, shortened, when refused."""

    status: str
    max_diff: float | None = None
    error: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Mixer:
    """A token-mixing layer of a family: its kind, its class or kernel function, and where it is called.

    ``receives``: the boundary kwargs that reach it when the batch carries all of them (measured);
    ``kernel``: the fast kernel transformers swaps in when its package is installed ("" none).
    """

    kind: str
    name: str
    called_from: str = ""     # "Lfm2ShortConv.forward" in the family's modeling module
    kernel: str = ""
    receives: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Family:
    """One model family (a transformers ``model_type``): its mixers, its mask, and what was measured."""

    model_type: str
    causal_lm: str = ""
    modeling: str = ""                  # the modeling module, e.g. "modeling_lfm2"
    attn_implementation: str = ""       # the one measured: sdpa, or eager where sdpa is not offered
    aliases: tuple[str, ...] = ()       # other model types that build the same class
    mask_call: str = ""                 # where create_causal_mask is called ("" when the model builds its own)
    mask_sees_resets: bool = False      # whether that call passes position_ids (read from the code)
    mixers: tuple[Mixer, ...] = ()
    outcomes: tuple[tuple[str, str, Outcome], ...] = ()    # (setup, kind or "logits", outcome)
    not_built: str = ""                 # why it could not be built or run here ("" when it ran)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for k in KINDS if any(m.kind == k for m in self.mixers))

    def outcome(self, setup: str, kind: str) -> Outcome | None:
        return next((o for s, k, o in self.outcomes if s == setup and k == kind), None)

    def unexplained(self, setup: str) -> bool:
        """Whether the logits leak in ``setup`` while every mixer is sound: another layer reads the row
        (BART's decoder counts its learned positions itself, past every reset)."""
        o = self.outcome(setup, "logits")
        kinds = [self.outcome(setup, k) for k in self.kinds]
        return bool(o and o.status == "leaks" and kinds and all(k and k.status == "sound" for k in kinds))

    def cite(self, mixer: Mixer) -> str:
        if mixer.kind == "attention":
            how = "passes position_ids" if self.mask_sees_resets else "passes no position_ids"
            call = f"{self.modeling}.{self.mask_call}: create_causal_mask {how}" if self.mask_call else \
                f"{self.modeling}: builds its own mask (no create_causal_mask)"
            return call
        where = f"{self.modeling}.{mixer.called_from}" if mixer.called_from else self.modeling
        return f"{where} -> {mixer.name}" if mixer.name != mixer.called_from.split(".")[0] else where

    def to_dict(self) -> dict:
        return {"model_type": self.model_type, "causal_lm": self.causal_lm, "modeling": self.modeling,
                "attn_implementation": self.attn_implementation, "aliases": list(self.aliases),
                "mask_call": self.mask_call, "mask_sees_resets": self.mask_sees_resets,
                "mixers": [m.to_dict() for m in self.mixers], "not_built": self.not_built,
                "outcomes": [{"setup": s, "kind": k, **o.to_dict()} for s, k, o in self.outcomes]}


@dataclass(frozen=True)
class LayerVerdict:
    """What one layer kind of a family does with a batch's signals: the sentence a check turns into a finding.

    ``status``: sound | leaks | refused | unreached (the forward stops at another layer first).
    ``needs``: the signal(s) that would keep documents apart in this layer; ``kernel``: the package
    they need; ``measured``: the measured cell when the batch's signals are a measured setup;
    ``derived``: True when the verdict rests on a kernel's code, not on a run here.
    """

    model_type: str
    kind: str
    status: str
    mixers: tuple[str, ...]
    needs: tuple[str, ...]
    kernel: str
    why: str
    measured: Outcome | None = None
    derived: bool = False

    def to_dict(self) -> dict:
        d = asdict(self)
        d["measured"] = self.measured.to_dict() if self.measured else None
        return d


def _parse_cell(cell: str, errors) -> Outcome:
    """``S1.2e-08`` sound, ``L6.6e-04`` leaks, ``R3`` refused with ``errors[3]``, ``-`` not reached,
    ``U3`` not measurable here (``errors[3]`` says why)."""
    if cell == "-":
        return Outcome("unreached")
    if cell[0] in "RU":
        return Outcome("refused" if cell[0] == "R" else "unmeasured", None, errors[int(cell[1:])])
    return Outcome("sound" if cell[0] == "S" else "leaks", float(cell[1:]))


FAMILY_FIELDS = ("causal_lm", "modeling", "attn_implementation", "aliases", "mask_call", "mask_sees_resets",
                 "not_built")
MIXER_FIELDS = ("model_type", "kind", "name", "called_from", "kernel", "receives")
TABLE_FILE = Path(__file__).with_name("families_table.json")   # data, written by tools.families_table --write


@cache
def _stored() -> dict:
    data = json.loads(TABLE_FILE.read_text(encoding="utf-8"))
    if tuple(data["setups"]) != SETUPS or tuple(data["family_fields"]) != FAMILY_FIELDS \
            or tuple(data["mixer_fields"]) != MIXER_FIELDS:
        raise RuntimeError(f"{TABLE_FILE.name} was written for other setups or fields: rewrite it with "
                           "python -m tools.families_table --write")
    return data


@cache
def _table() -> dict[str, Family]:
    t = _stored()
    out = {}
    for mt, (causal_lm, modeling, attn, aliases, mask_call, sees, not_built) in t["families"].items():
        mixers = tuple(Mixer(m[1], m[2], m[3], m[4], tuple(m[5])) for m in t["mixers"] if m[0] == mt)
        outcomes = tuple((s, key.split("|")[1], _parse_cell(c, t["errors"])) for key, cells in t["cells"].items()
                         if key.split("|")[0] == mt for s, c in zip(SETUPS, cells))
        out[mt] = Family(mt, causal_lm, modeling, attn, tuple(aliases), mask_call, sees, mixers, outcomes, not_built)
    return out


def table_version() -> str:
    """The transformers version the stored table was measured with."""
    return _stored()["transformers"]


def known_families(*, built: bool | None = None) -> tuple[Family, ...]:
    """Every family in the table; ``built=True`` only those measured here, ``False`` only the others."""
    return tuple(f for f in _table().values() if built is None or (not f.not_built) == built)


def family(model_type: str) -> Family:
    """The family of a transformers ``model_type`` (an alias such as ``exaone`` gives ``llama``'s row).

    An unknown type is refused with one line naming the families the lab knows.
    """
    table = _table()
    if isinstance(model_type, str):
        if model_type in table:
            return table[model_type]
        for f in table.values():
            if model_type in f.aliases:
                return f
    known, short = [f.model_type for f in table.values() if not f.not_built], len(repr(model_type)) <= 80
    near = difflib.get_close_matches(str(model_type).lower().replace("-", "_"), known, 3, 0.6) if short else []
    shown = repr(model_type) if short else f"{repr(model_type)[:60]}... ({len(str(model_type)):,} chars)"
    raise InputError(f"unknown model type {shown}: {'the nearest it knows: ' + ', '.join(near) + '; ' if near else ''}give "
                     f"the model_type of a config.json; the lab knows the {len(known)} families measured on "
                     f"transformers {table_version()} (list them: python -m packing_core check --list-model-types)")


def nearest_setup(signals) -> str:
    """The measured setup that decides a batch carrying ``signals`` (names from SIGNALS).

    >>> nearest_setup(["position_ids"]), nearest_setup(["position_ids", "seq_idx"]), nearest_setup([])
    ('position_ids', 'seq_idx', 'none')
    """
    given = set(signals)
    if "mask_4d" in given:
        return "mask_4d"
    if "use_cache" in given and "position_ids" in given:
        return "use_cache"
    for setup in ("seq_idx", "cu_seq_lens", "position_ids"):
        if setup in given:
            return setup
    return "none"


def _kernel_verdict(m: Mixer, given: set[str], kernels: set[str]) -> tuple[str, bool, str]:
    """(status, derived, needs) for one kernel-function mixer, from the kwargs that reach it."""
    arriving = {name for sig in given for name in _ARRIVES_AS.get(sig, ()) if name in m.receives}
    kernel = KERNELS.get(m.kernel)
    needs = tuple(s for s, names in _ARRIVES_AS.items() if kernel and set(names) & set(kernel.reads) & set(m.receives))
    if kernel and kernel.package in kernels:
        return ("sound" if arriving & set(kernel.reads) else "leaks"), True, needs
    if arriving & set(_REFUSED_BY_REFERENCE):
        return "refused", False, needs
    return "leaks", False, needs


def layer_verdicts(model_type: str, signals, *, kernels=()) -> tuple[LayerVerdict, ...]:
    """Per layer kind of ``model_type``: does a batch carrying ``signals`` keep documents apart there?

    ``signals``: names from ``SIGNALS`` the batch carries (``use_cache`` when the forward uses a
    cache); ``kernels``: fast-kernel packages installed where it runs (``Kernel.package``; none on a
    CPU). Attention and any module-level mixer follow the measured setup nearest the signals;
    a kernel function follows the kwargs that reach it (measured) and what its kernel reads.

    >>> v = layer_verdicts("qwen3_next", ["position_ids"])
    >>> [(x.kind, x.status) for x in v]
    [('attention', 'sound'), ('convolution', 'leaks'), ('recurrence', 'leaks')]
    >>> [x.status for x in layer_verdicts("qwen3_next", ["position_ids", "cu_seq_lens", "seq_idx"],
    ...     kernels=["causal-conv1d", "flash-linear-attention"])]
    ['sound', 'sound', 'sound']
    """
    fam = family(model_type)
    given = set(signals)
    unknown = sorted(given - set(SIGNALS))
    if unknown:
        raise InputError(f"unknown boundary signal(s) {unknown}: choose from {', '.join(SIGNALS)}")
    if fam.not_built:
        raise InputError(f"{fam.model_type} could not be measured here ({fam.not_built}); its layers are "
                         "not in the table")
    kernels = set(kernels)
    setup = nearest_setup(given)
    whole = fam.outcome(setup, "logits")
    # the forward itself refuses these signals (a 4D mask a Mamba cannot take): every layer kind shares it
    model_refuses = whole is not None and whole.status == "refused" and all(
        (o := fam.outcome(setup, k)) is not None and o.error == whole.error for k in fam.kinds)
    out = []
    for kind in fam.kinds:
        mine = [m for m in fam.mixers if m.kind == kind]
        measured = fam.outcome(setup, kind)
        funcs = [m for m in mine if m.name in FUNCTION_KINDS]
        if model_refuses:
            status, derived, kernel, needs = "refused", False, "", ()
        elif funcs:
            verdicts = [_kernel_verdict(m, given, kernels) for m in funcs]
            order = {"refused": 0, "leaks": 1, "sound": 2}
            status, derived, needs = min(verdicts, key=lambda v: order[v[0]])
            kernel = next((KERNELS[m.kernel].package for m in funcs if m.kernel in KERNELS and KERNELS[m.kernel].reads),
                          "") if needs else ""
        else:
            measured = _module_outcome(fam, kind, setup)
            status, derived, kernel = (measured.status if measured else "unmeasured"), False, ""
            needs = tuple(s for s in ("position_ids", "mask_4d") if (kind == "attention" or s == "position_ids")
                          and (o := fam.outcome(s, kind)) and o.status == "sound")
        received = sorted({r for m in funcs for r in m.receives}) if funcs and not needs else []
        out.append(LayerVerdict(fam.model_type, kind, status, tuple(m.name for m in mine), needs, kernel,
                                _why(fam, kind, status, needs, kernel, given, received), measured, derived))
    return tuple(out)


# Where a setup's cell is not reached (a kernel function refused first), the signals it adds beyond the
# next setup are kernel kwargs a module-level mixer does not read: its verdict is that setup's.
_FALLBACK = {"seq_idx": "cu_seq_lens", "cu_seq_lens": "position_ids"}


def _module_outcome(fam: Family, kind: str, setup: str) -> Outcome | None:
    o = fam.outcome(setup, kind)
    while o is not None and o.status == "unreached" and setup in _FALLBACK:
        setup = _FALLBACK[setup]
        o = fam.outcome(setup, kind)
    return o


def _why(fam: Family, kind: str, status: str, needs, kernel: str, given: set[str], received=()) -> str:
    names = ", ".join(f"`{m.name}`" for m in fam.mixers if m.kind == kind)
    carries = " + ".join(s for s in SIGNALS if s in given) or "no boundary signal"
    need = f"read {' or '.join(f'`{n}`' for n in needs)}" if needs else "receive no boundary signal from the model's code"
    if received:
        reads = sorted({r for m in fam.mixers if m.kind == kind and m.kernel in KERNELS for r in KERNELS[m.kernel].reads})
        need = (f"receive only {', '.join(f'`{r}`' for r in received)}, which their fast kernel does not read"
                + (f" (it reads {', '.join(f'`{r}`' for r in reads)})" if reads else ""))
    with_kernel = f" (honoured only with {kernel} installed)" if kernel else ""
    if status == "sound":
        return f"{fam.model_type} {kind} layers ({names}) keep documents apart with {carries}"
    if status == "refused" and not kernel:
        error = (fam.outcome(nearest_setup(given), "logits") or Outcome("refused")).error
        return f"{fam.model_type} refuses a batch with {carries}: {error}"
    if status == "refused":
        return (f"{fam.model_type} {kind} layers ({names}) {need}{with_kernel}: without the kernel "
                f"transformers refuses the batch")
    if status == "unreached":
        return f"{fam.model_type} {kind} layers ({names}): the forward stops at another layer first"
    if kind == "attention" and fam.mask_sees_resets and "position_ids" in given and "use_cache" not in given:
        return (f"{fam.model_type} attention layers ({names}) mix documents beyond their mask (measured), although "
                f"{fam.modeling}.{fam.mask_call} passes position_ids to create_causal_mask")
    if status == "unmeasured":
        return f"{fam.model_type} {kind} layers ({names}): not measurable on this tiny model here"
    what = {"attention": "the attention mask lets each document read the previous one",
            "convolution": "the convolution reads the last tokens of the previous document",
            "recurrence": "the recurrent state runs from each document into the next"}[kind]
    return f"{fam.model_type} {kind} layers ({names}) {need}{with_kernel}; this batch gives {carries}: {what}"
