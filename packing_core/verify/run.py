"""Model name -> runner -> one :class:`VerifyReport`, for every model of ``models.registry`` and a local folder.

``backend`` is the lab's own attention (``attention.BACKENDS``: segments, dense, ...);
``attn_implementation`` is transformers' own (``sdpa``, ``eager``), offered by the models that
have it (``ModelSpec.attn_implementations``). A run uses one of them: the model's own when named.

>>> verify_model("tiny-rope", mask="on").equivalent
True
>>> verify_model("tiny-rope", mask="off").equivalent     # document 1 reads document 0
False
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from packing_core._validate import InputError
from packing_core.attention.backends import BACKENDS
from packing_core.models.hybrid import HybridModel
from packing_core.models.registry import PRETRAINED, find_model, is_model_path, load_model, model_names, model_spec
from packing_core.models.tiny import TinyTransformer
from packing_core.verify.causality import causality_runner
from packing_core.verify.equivalence import VerifyReport, default_documents, model_runner, verify_runner
from packing_core.verify.texts import check_texts, tokenise_texts


def attention_of(backend: str = "segments", attn_implementation: str | None = None) -> str:
    """The one attention a run uses: transformers' own when ``attn_implementation`` names it, else our backend.

    An attention implementation given as ``backend`` is refused in one line that says where it goes.

    >>> attention_of("dense"), attention_of(attn_implementation="sdpa")
    ('dense', 'sdpa')
    """
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {str(backend)[:40]!r}: choose one of {', '.join(BACKENDS)} (transformers' own "
                         "attention goes to attn_implementation=)")
    if attn_implementation is not None and backend != "segments":
        raise InputError(f"give a backend ({backend!r}) or an attention implementation ({attn_implementation!r}), "
                         "not both: a run uses one attention")
    return attn_implementation if attn_implementation is not None else backend


def attention_arguments(name: str) -> dict[str, str]:
    """A picker that offers both kinds of attention: ``{"backend": name}`` for the lab's own,
    ``{"attn_implementation": name}`` for transformers' (the inverse of :func:`attention_of`).

    >>> attention_arguments("segments"), attention_arguments("sdpa")
    ({'backend': 'segments'}, {'attn_implementation': 'sdpa'})
    """
    return {"backend": name} if name in BACKENDS else {"attn_implementation": name}


def verify_hf(model, documents, *, mask: str = "on", positions: str = "reset",
              attn: str = "packing_lab_segments", use_cache: bool = False,
              dtype: torch.dtype | None = None, tolerance: float | None = None,
              model_name: str | None = None, decode=None, texts: Sequence[str] = (),
              causality: bool = True) -> VerifyReport:
    """Packed-vs-alone report for any transformers causal LM, through ``hf_attention.runner``.

    ``attn`` is one of our backends or transformers' own implementation; ``dtype`` (default:
    the model's) picks the default tolerance; ``decode`` adds the top-1 changes, read from the
    same logits; ``causality`` adds the second check on the same row (:mod:`packing_core.verify.causality`).
    """
    from packing_core.models.hf_attention import ATTN_PREFIX, attn_name, hf_runner

    param = next(model.parameters())
    name = model_name if model_name is not None else getattr(model.config, "_name_or_path", "")
    path = attn_name(attn).removeprefix(ATTN_PREFIX)
    own = path not in BACKENDS
    runner = hf_runner(model, attn, use_cache)
    report = verify_runner(runner, documents, mask=mask, positions=positions,
                           dtype=dtype or param.dtype, tolerance=tolerance, backend_name="" if own else path,
                           attn_implementation=path if own else "", device=param.device, model_name=name,
                           decode=decode, texts=texts)
    return _with_causality(report, runner, documents, param.device) if causality else report


def _with_causality(report: VerifyReport, runner, documents, device) -> VerifyReport:
    """``report`` with the causality check of the same runner, row, dtype and tolerance attached."""
    check = causality_runner(runner, documents, mask=report.mask, positions=report.positions,
                             backend_name=report.backend or report.attn_implementation, tolerance=report.tolerance,
                             device=device)
    return replace(report, causality=check)


def load_causal_lm(model: str, dtype: torch.dtype = torch.float32, attn_implementation: str | None = None):
    """``(model, tokenizer or None)`` for a registered model with a tokenizer (``"smollm2"``) or a local
    HF causal-LM folder: what ``check --model`` runs a trainer's batch on."""
    spec = find_model(model)
    if (spec is not None and not spec.tokenizer) or (spec is None and not is_model_path(model)):
        raise InputError(f"unknown model {model!r}: use {' or '.join(model_names(tokenizer=True))} or the path of a "
                         "local Hugging Face model folder")
    return load_model(model, dtype, attn_implementation=attn_implementation)


def verify_model(model="tiny-rope", *, mask: str = "on", positions: str = "reset", backend: str = "segments",
                 attn_implementation: str | None = None, documents=None, texts=None, seed: int | None = None,
                 dtype: torch.dtype | None = None, device=None, use_cache: bool = False,
                 loaded: tuple | None = None, causal: bool = True, causality: bool = True) -> VerifyReport:
    """Verify a registered model (``"tiny-rope"``, ``"tiny-abs"``: random init, for speed; ``"smollm2"``),
    a ``TinyTransformer``, or a local Hugging Face model folder.

    ``loaded`` is ``(model, tokenizer or None)`` already loaded for ``model`` (a page keeps one per
    server); else it loads here. ``documents`` (token-id lists) replace the defaults for every
    model; ``texts`` need a model with a tokenizer. ``seed`` draws the random documents of a model
    without one. ``use_cache`` matters only with transformers' own attention
    (``attn_implementation="sdpa"`` or ``"eager"``): transformers then skips its packing detection.
    ``causal=False`` runs the lab's own models without the causal flag (what a varlen kernel does
    by default): alone vs packed still agree, and the causality check (``causality``, on by
    default, in ``report.causality``) sees the future read.
    """
    attn = attention_of(backend, attn_implementation)
    spec = find_model(model)
    if isinstance(model, TinyTransformer):
        name, loaded = ("tiny-rope" if model.cfg.positions == "rope" else "tiny-abs"), (model, None)
    elif isinstance(model, HybridModel):    # a page passes the loaded teaching model itself
        name, loaded = "tiny-hybrid", (model, None)
    else:
        name = model if spec is not None else str(model)
        if spec is None and not is_model_path(model):
            model_spec(model)   # one line naming the registered models
    tiny = isinstance(model, (TinyTransformer, HybridModel)) or (spec is not None and not spec.tokenizer)
    # what the arguments allow is refused before a model loads
    if tiny and texts is not None:
        raise InputError(f"texts need a tokenizer, and {name!r} has none: pass documents= (token ids) or use "
                         f"--model {PRETRAINED}")
    if not causal and not tiny:
        raise InputError("causal=False runs the lab's own models (tiny-rope, tiny-abs, tiny-hybrid) on the lab's "
                         f"backends; {name} runs with its own causal mask")
    if tiny and attn not in BACKENDS:
        raise InputError(f"{name} is the lab's tiny model: it runs the lab's backends ({', '.join(BACKENDS)}), "
                         f"not transformers' {attn}")
    if spec is not None and spec.tokenizer and seed is not None:
        raise InputError(f"seed draws the tiny models' random documents; {name} runs real "
                         "texts: pass texts= or documents= instead")
    if texts is not None and documents is None:
        texts = check_texts(texts)
    if not tiny and attn not in BACKENDS:
        from packing_core.models.hf_attention import attn_name

        attn_name(attn)   # an attention that cannot run here is named before the model loads
    net, tokenizer = loaded if loaded is not None else load_model(model, dtype or torch.float32, device)
    if isinstance(net, (TinyTransformer, HybridModel)):
        param = next(net.parameters())
        docs = default_documents(vocab_size=net.cfg.vocab_size, seed=seed or 0) if documents is None else documents
        runner = model_runner(net, attn, causal)
        report = verify_runner(runner, docs, mask=mask, positions=positions, dtype=param.dtype,
                               backend_name=attn, device=param.device, model_name=name)
        return _with_causality(report, runner, docs, param.device) if causality else report
    if documents is None and tokenizer is not None:
        if seed is not None:
            raise InputError(f"{name} has a tokenizer, so it runs texts: pass texts= instead of seed=")
        texts = check_texts(texts)
        documents = tokenise_texts(tokenizer, texts)
    elif documents is None:
        if texts is not None:
            raise InputError(f"{name} has no tokenizer files, so texts cannot be tokenised: pass documents= "
                             "(token ids), or save the tokenizer into its folder")
        documents = default_documents(vocab_size=min(net.config.vocab_size, 1000), seed=seed or 0)
        texts = ()
    else:
        texts = tuple(tokenizer.decode(d) for d in documents) if tokenizer is not None else ()
    return verify_hf(net, documents, mask=mask, positions=positions, attn=attn, use_cache=use_cache,
                     model_name=name, decode=tokenizer.decode if tokenizer is not None else None, texts=texts,
                     causality=causality)


def verify_pretrained(mask: str = "on", positions: str = "reset", backend: str = "segments",
                      texts=None, *, attn_implementation: str | None = None, documents=None, pretrained=None,
                      use_cache: bool = False, dtype: torch.dtype | None = None, device=None,
                      model_name: str = PRETRAINED) -> VerifyReport:
    """Verify SmolLM2 (or ``pretrained``, a loaded ``(model, tokenizer)`` pair) on real text:
    :func:`verify_model` for a model with a tokenizer.

    With ``mask="off"`` the second text reads the first, and its top-1 predictions change:
    the report lists them, decoded, in ``changes``.
    """
    if pretrained is not None and pretrained[1] is None:
        raise InputError(f"{model_name} has no tokenizer files, so texts cannot be tokenised: save the tokenizer "
                         "into its folder, or verify it from the command line on token ids")
    return verify_model(model_name, mask=mask, positions=positions, backend=backend,
                        attn_implementation=attn_implementation, documents=documents,
                        texts=texts if documents is None else None, dtype=dtype, device=device,
                        use_cache=use_cache, loaded=pretrained)


def drift_path(attention: str, mask: str, positions: str, use_cache: bool) -> str:
    """The attention path of a verdict's continuations, in words.

    >>> drift_path("sdpa", "on", "reset", True)
    "transformers' own sdpa attention, use_cache=True, position_ids reset, no attention_mask"
    """
    if attention not in BACKENDS:
        return (f"transformers' own {attention} attention, use_cache={use_cache}, position_ids {positions}, "
                "no attention_mask")
    kind = "one per document" if backend_mask(attention, mask) == "on" else "one causal triangle over the row"
    return (f"the mask of the lab's {attention} backend ({kind}), given to the model as 4D masks with a KV cache "
            f"(the lab's backends take no cache), position_ids {positions}")


def backend_mask(backend: str, mask: str) -> str:
    """The mask a backend really applies: ``causal_only`` ignores document boundaries."""
    return "off" if backend == "causal_only" else mask


def drift_verdict(words, logits_changed: bool) -> tuple[str, str]:
    """What a continuation shows beside the logits' verdict: ``(severity, sentence)``, severity
    ``"warning"`` (the words part), ``"success"`` (same words, same logits) or ``"info"``
    (same words although the logits changed: greedy decoding hides a drift).

    >>> from types import SimpleNamespace as W
    >>> drift_verdict(W(same=False, first_difference=3, steps=20, document=1), True)
    ('warning', 'The words part at generated token 3: on this path, packing changed how document 1 goes on.')
    """
    if not words.same:
        return "warning", (f"The words part at generated token {words.first_difference}: on this path, packing "
                           f"changed how document {words.document} goes on.")
    if not logits_changed:
        return "success", f"The same words: on this path document {words.document} computes as it would alone."
    return "info", (f"The same {words.steps} words this time, although the verdict above found document "
                    f"{words.document}'s logits changed: greedy decoding keeps only the top token, so a drift can "
                    "hide in the words. The logits are the evidence.")


def drift_pretrained(texts=None, *, mask: str = "off", positions: str = "reset", backend: str = "segments",
                     attn_implementation: str | None = None, use_cache: bool = False, steps: int = 20,
                     document: int = 1, pretrained=None):
    """SmolLM2's greedy continuations of ``texts[document]``, alone and packed after the texts before it.

    They follow the verdict's own path (``verify.drift``): transformers' own sdpa/eager
    decode exactly as called, with their cache when ``use_cache=True`` (and no mask, so
    they leak as the verdict measured) or through ``hf_runner`` one row per token when
    ``use_cache=False``; the lab's backends, which take no cache, decode with their own
    mask given explicitly. ``pretrained`` is a loaded ``(model, tokenizer)`` pair.
    """
    from packing_core.models.hf_attention import _attn_implementation, attn_name, hf_runner
    from packing_core.verify.drift import cached_continuations, continuations

    attn = attention_of(backend, attn_implementation)
    attn_name(attn)
    model, tokenizer = pretrained if pretrained is not None else model_spec(PRETRAINED).load()
    documents = tokenise_texts(tokenizer, texts)
    common = dict(document=document, positions=positions, steps=steps, path=drift_path(attn, mask, positions, use_cache))
    own = attn not in BACKENDS
    if own and not use_cache:   # no cache may be used: one full row per token
        return continuations(hf_runner(model, attn, use_cache), documents, tokenizer.decode, mask=mask,
                             device=next(model.parameters()).device, **common)
    with _attn_implementation(model, attn if own else "sdpa"):
        return cached_continuations(model, documents, tokenizer.decode, mask=backend_mask(attn, mask),
                                    explicit_mask=not own, **common)
