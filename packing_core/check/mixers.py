"""The verdict for every layer of a model that mixes tokens, not only its attention.

A check given ``model_type`` (a transformers ``model_type``: ``qwen3_next``, ``lfm2``, ``llama``,
``roberta``, ...) reads what that family's code really does with the batch's boundary signals,
from the measured table of :mod:`packing_core.attention.families` (no family name is written
here):

- a **convolution** or a **recurrence** keeps documents apart only where its kernel receives the
  signal it reads (``seq_idx``, ``cu_seq_lens``) and that signal marks the batch's documents;
  transformers' reference torch code refuses those signals, so without the fast kernel the
  model refuses the batch (:func:`installed_kernels` says which kernels a process would call);
- **attention** under sdpa, eager and flex reads the mask ``create_causal_mask`` builds: where the
  family's code calls it without ``position_ids`` (``Family.mask_sees_resets``: RoBERTa, OPT,
  BERT, MPT, BLOOM, ...), position resets never reach the mask.

Each finding names the layer and the signal it needs; a row holding one document cannot leak
through any of them. Without a model type the verdict covers attention only (:data:`SCOPE_NOTE`).

    >>> from packing_core.check import check_hf_batch
    >>> flat = {"input_ids": [[5, 6, 7, 8, 9, 10]], "position_ids": [[0, 1, 2, 0, 1, 2]]}
    >>> check_hf_batch(flat).verdict.split("; judged")[0]
    'sdpa: SOUND'
    >>> check_hf_batch(flat, model_type="lfm2").verdict.split("; judged")[0]
    'sdpa: 1 ERROR(S): convolution_reads_previous_document (lfm2: attention SOUND, convolution LEAKS)'
    >>> check_hf_batch(flat, model_type="opt").errors[0].name
    'mask_ignores_position_resets'
"""
from __future__ import annotations

import importlib.util
from dataclasses import replace
from functools import cache

import numpy as np

from packing_core._validate import InputError
from packing_core.attention.documents import IntendedDocuments
from packing_core.attention.families import (
    Family,
    LayerVerdict,
    family,
    known_families,
    layer_verdicts,
    nearest_setup,
)
from packing_core.attention.releases import (
    ReaderRules,
    family_mask_call,
    family_position_start,
    family_since,
    release_rules,
)
from packing_core.attention.semantics import EffectiveAttention, effective_attention
from packing_core.attention.sharing import reached, shared_attention
from packing_core.attention.tensors import BatchTensors
from packing_core.check.labels import first_hit, marks_of
from packing_core.check.rules import Finding

# the pip distribution of each fast kernel (attention.families.KERNELS) -> the package transformers imports
# (integrations.hub_kernels.use_kernel_func_from_hub_with_fallback: the kernel is used when the import succeeds)
KERNEL_MODULES = {"causal-conv1d": "causal_conv1d", "mamba-ssm": "mamba_ssm", "flash-linear-attention": "fla"}
# the attention implementations that read the mask masking_utils.create_causal_mask builds
MASK_READERS = ("sdpa", "eager", "flex_attention")
# layer kind -> the finding of a leak there
LEAK_FINDING = {"convolution": "convolution_reads_previous_document", "recurrence": "state_crosses_documents"}
SCOPE_NOTE = ("note: the verdict covers attention layers only; give --model or --model-type for the layers beyond "
              "attention (short convolutions, recurrent state) and for the model's own mask call")
_SIGNAL_KEYS = {"cu_seq_lens": "cu_seq_lens_q/_k", "seq_idx": "seq_idx"}


def installed_kernels() -> tuple[str, ...]:
    """The fast-kernel distributions this process would call: those whose package imports.

    transformers takes a kernel when ``importlib.import_module(package)`` succeeds
    (``integrations.hub_kernels.use_kernel_func_from_hub_with_fallback``); none installs on a CPU-only machine.
    """
    return tuple(dist for dist, module in KERNEL_MODULES.items() if importlib.util.find_spec(module) is not None)


def model_family(model_type: str, rules: ReaderRules | None = None) -> Family:
    """The measured family of ``model_type``; unknown or unmeasured types, or a family the release judged for
    does not have (``rules``; None: any), are refused in one line."""
    fam = family(model_type)
    if fam.not_built:
        known = len(known_families(built=True))
        raise InputError(f"model type {model_type!r} could not be measured here ({fam.not_built}): check the batch "
                         f"without a model type (attention only), or give one of the {known} measured families "
                         "(python -m packing_core check --list-model-types)")
    if rules is not None and family_mask_call(fam.model_type, rules) == "absent":
        since = family_since(fam.model_type)
        raise InputError(f"model type {fam.model_type!r} is not in {rules.label}"
                         + (f" (its modeling code is first in {since})" if since else "")
                         + ": a model of that family cannot run there; check for the release the trainer has "
                           "(--transformers VERSION)")
    return fam


def check_kernels(kernels) -> tuple[str, ...]:
    """``kernels`` as distribution names of :data:`KERNEL_MODULES`; None means those installed here."""
    if kernels is None:
        return installed_kernels()
    names = (kernels,) if isinstance(kernels, str) else tuple(kernels)
    unknown = [k for k in names if k not in KERNEL_MODULES]
    if unknown:
        raise InputError(f"unknown kernel {unknown[0]!r}: choose from {', '.join(KERNEL_MODULES)}")
    return names


def batch_signals(t: BatchTensors, use_cache: bool) -> tuple[str, ...]:
    """The boundary signals (``attention.families.SIGNALS``) a batch carries to the model's layers."""
    present = {"position_ids": t.position_ids is not None or t.rope_position_ids is not None,
               "cu_seq_lens": t.cu_seq_lens_q is not None, "seq_idx": t.seq_idx is not None,
               "mask_4d": t.mask_4d_info is not None, "use_cache": bool(use_cache)}
    return tuple(s for s, on in present.items() if on)


def _inner_starts(docs: IntendedDocuments) -> np.ndarray:
    """bool [B, T]: the first token of every document that follows another in its row."""
    d = docs.document_ids
    prev = np.concatenate([np.full((d.shape[0], 1), -1), d[:, :-1]], 1)
    return docs.real & (d != prev) & (prev >= 0)


def _marks_documents(signal: str, t: BatchTensors, docs: IntendedDocuments) -> bool:
    """Whether ``signal`` starts a new sequence at every document start inside a row."""
    inner = _inner_starts(docs)
    if signal == "position_ids":     # a reset: the step into each inner document start is not +1
        pos = t.positions
        if pos is None:
            return False
        step = np.diff(pos, axis=-1, prepend=pos[..., :1] - 1)
        return bool((step != 1)[inner].all())
    if signal == "seq_idx":
        s = np.asarray(t.seq_idx).reshape(-1, np.asarray(t.seq_idx).shape[-1])
        if s.shape[1] != inner.shape[1] or s.shape[0] not in (1, inner.shape[0]):
            return False
        s = np.broadcast_to(s, inner.shape)
        starts = np.concatenate([np.ones((s.shape[0], 1), bool), s[:, 1:] != s[:, :-1]], 1)
        return bool((starts | ~inner).all())
    if t.cu_seq_lens_q is None:
        return False
    offsets = set(np.asarray(t.cu_seq_lens_q).tolist())
    return all(int(i) in offsets for i in np.flatnonzero(inner.reshape(-1)))


def _later_documents(docs: IntendedDocuments) -> np.ndarray:
    """bool [B, T]: tokens of a document that follows another in its row (what a mixer can carry a leak into)."""
    started = np.maximum.accumulate(_inner_starts(docs), axis=1)
    return started & docs.real


def _where(hit: np.ndarray) -> str:
    r, s = first_hit(hit)
    return f"{int(hit.sum())} trained position(s) read through it, first row {r} token {s}"


def _mixer_finding(fam: Family, v: LayerVerdict, wrong: list[str], docs: IntendedDocuments, trained: np.ndarray,
                   allow_cross_document: bool) -> Finding | None:
    later = _later_documents(docs)
    hit = later & trained
    if not hit.any():
        return None
    owners = sorted({m.called_from.split(".")[0] for m in fam.mixers if m.kind == v.kind and m.called_from})
    where = f" (in {', '.join(f'`{o}`' for o in owners)})" if owners else ""
    why = v.why
    if wrong:     # the signal arrives and the kernel reads it, but it does not mark the documents
        why = (f"{fam.model_type} {v.kind} layers ({', '.join(f'`{m}`' for m in v.mixers)}) read "
               f"{' and '.join(f'`{_SIGNAL_KEYS[s]}`' for s in wrong)}, but this batch's "
               f"{' and '.join(_SIGNAL_KEYS[s] for s in wrong)} do not start a sequence at every document (built "
               "from an all-ones attention_mask?): the layer runs across the documents")
    reach = "the first k - 1 tokens of each later document directly (a kernel of width k: 3 tokens in Mamba and " \
            "Gated DeltaNet, 2 in LFM2), every later token through the layers after it" if v.kind == "convolution" \
        else "every token of each later document"
    return Finding(LEAK_FINDING[v.kind], f"{why}{where}; it reaches {reach}: {_where(hit)}",
                   severity="note" if allow_cross_document else "", marks=marks_of(later))


def sees_resets(fam: Family, rules: ReaderRules) -> bool:
    """Whether position resets reach the family's mask in that release: packed detection there, and a mask call
    that passes position_ids (read from that release's code; the families table's own reading where not read)."""
    call = family_mask_call(fam.model_type, rules)
    return rules.packed_detection and (call == "sees" if call else fam.mask_sees_resets)


def _blind_mask(fam: Family, t: BatchTensors, eff: EffectiveAttention, docs: IntendedDocuments,
                trained: np.ndarray, use_cache: bool, rules: ReaderRules) -> Finding | None:
    """Where this family's mask call, which never sees position_ids, lets documents meet under sdpa/eager/flex."""
    if eff.attn_implementation not in MASK_READERS or sees_resets(fam, rules) or "attention" not in fam.kinds \
            or t.mask_4d_info is not None or t.positions is None:
        return None
    blind = effective_attention(replace(t, position_ids=None, rope_position_ids=None), eff.attn_implementation,
                                use_cache=use_cache, rules=rules)
    shared = shared_attention(blind, docs.document_ids)
    hit = reached(blind, shared.queries) & trained if shared.count else np.zeros_like(trained)
    if not hit.any():
        return None
    call = f"{fam.modeling}.{fam.mask_call}" if fam.mask_call else fam.modeling
    return Finding("mask_ignores_position_resets",
                   f"{fam.model_type}: {call} builds the mask without position_ids, so under "
                   f"{eff.attn_implementation} it reads the batch as {blind.path}: {shared.count} quer(ies) read "
                   f"another document; {_where(hit)}", marks=marks_of(shared.queries))


def mixer_findings(model_type: str, t: BatchTensors, eff: EffectiveAttention, docs: IntendedDocuments,
                   trained: np.ndarray, *, use_cache: bool = False, kernels=(), allow_cross_document: bool = False,
                   rules: ReaderRules | None = None) -> tuple[list[Finding], tuple[tuple[str, str], ...]]:
    """The findings of ``model_type``'s own layers on this batch, and each layer kind's status.

    Returns ``(findings, layers)``: ``layers`` holds ``(kind, status)`` for every layer kind of
    the family beyond attention (``sound``, ``leaks``, ``refused``, ``unreached``); the
    attention's status follows the findings (:class:`packing_core.check.result.BatchCheck`).
    """
    rules = rules or release_rules()
    fam = model_family(model_type, rules)
    signals = batch_signals(t, use_cache)
    verdicts = layer_verdicts(fam.model_type, signals, kernels=kernels)
    findings: list[Finding] = []
    layers = []
    refused = [v for v in verdicts if v.status == "refused"]
    if refused:
        kinds = ", ".join(f"{v.kind} ({v.why})" for v in refused)
        findings.append(Finding("model_refuses_batch", f"{fam.model_type} here: {kinds}"))
    for v in verdicts:
        if v.kind == "attention":
            if v.status == "refused":
                layers.append(("attention", "refused"))
            continue
        status = v.status
        wrong = [s for s in v.needs if s in signals and not _marks_documents(s, t, docs)]
        if status == "sound" and wrong:
            status = "leaks"
        if status == "leaks":
            found = _mixer_finding(fam, v, wrong, docs, trained, allow_cross_document)
            status = "leaks" if found is not None and found.severity == "error" else "sound"
            if found is not None:
                findings.append(found)
        layers.append((v.kind, status))
    if (blind := _blind_mask(fam, t, eff, docs, trained, use_cache, rules)) is not None:
        findings.append(replace(blind, severity="note") if allow_cross_document else blind)
    findings += _beyond_mixers(fam, signals, docs, trained, allow_cross_document)
    findings += _position_start(fam, t, docs, trained, rules)
    if (window := _sliding_window(fam, eff, trained)) is not None:
        findings.append(window)
    if eff.attn_implementation in ("sdpa", "flex_attention") and fam.attn_implementation == "eager":
        findings.append(Finding("implementation_not_offered", f"{fam.model_type}: transformers builds {fam.causal_lm} "
                                f"with eager attention only, so it never runs {eff.attn_implementation}; its layers "
                                "are measured under eager"))
    return findings, tuple(layers)


@cache         # the installed release's config classes: read once per model type
def family_sliding_window(model_type: str) -> int | None:
    """The sliding window of ``model_type``'s default config in the installed transformers; None without one.

    Read from the config class (``AutoConfig.for_model``): ``sliding_window`` unless ``use_sliding_window`` is off,
    or ``layer_types`` holds no ``"sliding_attention"`` layer. A model's own config may set another window.

    >>> family_sliding_window("mistral"), family_sliding_window("llama"), family_sliding_window("qwen2")
    (4096, None, None)
    """
    try:
        from transformers import AutoConfig

        cfg = AutoConfig.for_model(model_type)
    except (ImportError, ValueError, KeyError):       # a family this release lacks: no window to read
        return None
    cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    window = getattr(cfg, "sliding_window", None)
    types = getattr(cfg, "layer_types", None)
    if not window or getattr(cfg, "use_sliding_window", True) is False or \
            (types is not None and "sliding_attention" not in types):
        return None
    return int(window)


def _sliding_window(fam: Family, eff: EffectiveAttention, trained: np.ndarray) -> Finding | None:
    """A 4D mask under sdpa, eager or flex replaces the family's sliding window.

    transformers returns a 4D mask as given before any window is applied: 5.24's
    ``masking_utils._preprocess_mask_arguments`` ("If the mask is already 4D, simply return as-is")
    and the early exit of ``create_sliding_window_causal_mask``; 4.46's
    ``MistralModel._prepare_4d_causal_attention_mask_with_cache_position`` takes a 4D mask as the
    causal mask and applies ``config.sliding_window`` only when it builds one from 2D. So a query
    whose mask lets it read a key ``window`` or more tokens back does so in every sliding layer,
    where the same document alone would not. flash_attention_2/3 take the window as a kernel argument
    and never read a 4D mask.
    """
    if eff.attn_implementation not in MASK_READERS or eff.dense is None:
        return None
    window = family_sliding_window(fam.model_type)
    if window is None or eff.dense.shape[-1] <= window:
        return None
    T = eff.dense.shape[-1]
    queries = np.arange(T)
    # per query, the earliest key its mask lets it read (T: none): past the window when window or more tokens back
    earliest = np.stack([np.where(row.any(axis=1), row.argmax(axis=1), T) for row in eff.dense])      # [B, T]
    far = earliest <= queries - window
    hit = far & trained
    if not hit.any():
        return None
    return Finding("mask_replaces_sliding_window",
                   f"{fam.model_type}: its default config slides a window of {window:,} tokens, and transformers uses "
                   f"this 4D mask as given, so {int(far.sum()):,} quer(ies) read keys {window:,} or more tokens back "
                   f"in every sliding layer; {_where(hit)}", marks=marks_of(far))


def _position_start(fam: Family, t: BatchTensors, docs: IntendedDocuments, trained: np.ndarray,
                    rules: ReaderRules) -> list[Finding]:
    """A family that numbers its own positions from padding_idx + 1, given a batch whose positions start at 0."""
    pos = t.positions
    if pos is None or family_position_start(fam.model_type, rules) != "padding_idx" or not docs.real.any():
        return []
    if int(pos[docs.real].min()) != 0:
        return []
    hit = docs.real & trained
    return [Finding("logits_differ_beyond_mixers", f"{fam.model_type}: {fam.modeling}.create_position_ids_from_input_ids "
                    "numbers positions from padding_idx + 1, this batch's position_ids from 0; "
                    f"{int(hit.sum())} trained position(s) read shifted position embeddings",
                    marks=marks_of(docs.starts & docs.real))]


def _beyond_mixers(fam: Family, signals, docs: IntendedDocuments, trained: np.ndarray,
                   allow_cross_document: bool) -> list[Finding]:
    """Where the measured logits leak although every mixer keeps documents apart (``Family.unexplained``)."""
    setup = nearest_setup(signals)
    hit = _later_documents(docs) & trained
    if not fam.unexplained(setup) or not hit.any():
        return []
    o = fam.outcome(setup, "logits")
    if o is None:              # not measured for this setup: nothing to say beyond the mixers
        return []
    return [Finding("logits_differ_beyond_mixers",
                    f"{fam.model_type} with {setup.replace('_', ' ')}: each mixer keeps the documents apart, yet its "
                    f"logits differ from each document alone by {o.max_diff:.2g} (measured on the tiny model): "
                    f"{fam.modeling} reads the whole row elsewhere (its positions); {_where(hit)}",
                    severity="note" if allow_cross_document else "", marks=marks_of(_later_documents(docs)))]
