"""Model name -> runner -> one :class:`VerifyReport`, for every model of ``models.registry``.

>>> verify_model("tiny-rope", mask="on").equivalent
True
>>> verify_model("tiny-rope", mask="off").equivalent     # document 1 reads document 0
False
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch

from packing_core._validate import InputError
from packing_core.models.hybrid import HybridModel
from packing_core.models.registry import DEFAULT_TEXTS, PRETRAINED, find_model, model_names
from packing_core.models.tiny import TinyTransformer
from packing_core.verify.equivalence import VerifyReport, default_documents, model_runner, verify_runner

PRETRAINED_MODELS = model_names(tokenizer=True)   # the registered models that run texts


def verify_hf(model, documents, *, mask: str = "on", positions: str = "reset",
              attn: str = "packing_lab_segments", use_cache: bool = False,
              dtype: torch.dtype | None = None, tolerance: float | None = None,
              model_name: str | None = None, decode=None, texts: Sequence[str] = ()) -> VerifyReport:
    """Packed-vs-alone report for any transformers causal LM, through ``hf_attention.runner``.

    ``dtype`` (default: the model's) picks the default tolerance; ``decode`` adds the
    top-1 changes, read from the same logits.
    """
    from packing_core.models.hf_attention import ATTN_PREFIX, attn_name, hf_runner

    param = next(model.parameters())
    name = model_name if model_name is not None else getattr(model.config, "_name_or_path", "")
    return verify_runner(hf_runner(model, attn, use_cache), documents, mask=mask, positions=positions,
                  dtype=dtype or param.dtype, tolerance=tolerance,
                  backend_name=attn_name(attn).removeprefix(ATTN_PREFIX), device=param.device,
                  model_name=name, decode=decode, texts=texts)


MIN_TEXTS, MAX_TEXTS = 2, 4   # one document to leak from, one to leak into; a row a class can read
MAX_TEXT_TOKENS = 512         # per text: keeps a CPU verification of SmolLM2 within seconds


def _texts(texts) -> tuple[str, ...]:
    """The one place the limits on user texts are enforced (the token limit: :func:`tokenise_texts`)."""
    if isinstance(texts, str):
        texts = [texts]
    texts = tuple(DEFAULT_TEXTS if texts is None else texts)
    if not MIN_TEXTS <= len(texts) <= MAX_TEXTS:
        raise InputError(f"give {MIN_TEXTS} to {MAX_TEXTS} texts, got {len(texts)}: one to leak from and at "
                         "least one to leak into")
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise InputError(f"text {i} is empty ({t!r}): every text needs at least one word")
    return texts


def tokenise_texts(tokenizer, texts=None) -> list[list[int]]:
    """Token ids of ``texts`` (default :data:`DEFAULT_TEXTS`), within the limits.

    >>> tokenise_texts(lambda ts: {"input_ids": [[1] * len(t) for t in ts]}, ["ab", "cde"])
    [[1, 1], [1, 1, 1]]
    >>> tokenise_texts(lambda ts: {"input_ids": [[1] * len(t) for t in ts]}, ["ab"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core._validate.InputError: give 2 to 4 texts, got 1: ...
    """
    texts = _texts(texts)
    try:
        ids = tokenizer(list(texts), add_special_tokens=False)
    except TypeError:   # a plain callable tokenizer (lengths.Tokenizer): no special tokens to add
        ids = tokenizer(list(texts))
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    for i, doc in enumerate(ids):
        if len(doc) > MAX_TEXT_TOKENS:
            raise InputError(f"text {i} is {len(doc):,} tokens long; the limit is {MAX_TEXT_TOKENS} tokens per "
                             "text: shorten it")
        if not doc:
            raise InputError(f"text {i} tokenises to nothing: give it at least one word")
    return [list(d) for d in ids]


MAX_TEXTS_FILE_BYTES = 1 << 20   # 4 texts of 512 tokens fit many times over


def read_texts_file(path) -> list[str]:
    """One text per non-blank line of a UTF-8 file (a regular file of at most ``MAX_TEXTS_FILE_BYTES``).

    Read through ``data.sources.open_source`` as a file read whole: a FIFO or ``/dev/zero`` is
    refused before it is opened, the name is escaped, at most the limit is read.
    """
    from packing_core.data.sources import WHOLE, display, open_source

    raw = open_source(path, WHOLE).read_all(MAX_TEXTS_FILE_BYTES, "the texts file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{display(str(path))} is not UTF-8 text (byte {e.start} is {raw[e.start]:#04x}): save it "
                         "as UTF-8, one text per line") from None
    return [line for line in text.splitlines() if line.strip()]


def is_model_path(model) -> bool:
    """A local folder rather than one of the lab's model names."""
    return isinstance(model, os.PathLike) or (isinstance(model, str) and find_model(model) is None
                                                and (os.sep in model or Path(model).exists()))


def load_causal_lm(model: str, dtype: torch.dtype = torch.float32):
    """``(model, tokenizer or None)`` for a registered model with a tokenizer (``"smollm2"``) or a local
    HF causal-LM folder."""
    from packing_core.models.pretrained import load_local_model

    spec = find_model(model)
    if spec is not None and spec.tokenizer:
        return spec.load(dtype=dtype)
    if is_model_path(model):
        return load_local_model(model, dtype=dtype)
    raise InputError(f"unknown model {model!r}: use {' or '.join(model_names(tokenizer=True))} or the path of a "
                     "local Hugging Face model folder")


def verify_pretrained(mask: str = "on", positions: str = "reset", backend: str = "segments",
                      texts=None, *, documents=None, pretrained=None, use_cache: bool = False,
                      dtype: torch.dtype | None = None, device=None, model_name: str = PRETRAINED
                      ) -> VerifyReport:
    """Verify SmolLM2 on real text: the texts (or token-id ``documents``) packed in one row vs alone.

    ``pretrained`` is a ``(model, tokenizer)`` pair already loaded (else loads it in
    ``dtype``, on ``device``): SmolLM2, or any local model from ``load_local_model``.
    With ``mask="off"`` the second text reads the first, and its top-1 predictions change:
    the report lists them, decoded, in ``changes``.
    """
    from packing_core.models.hf_attention import attn_name

    attn_name(backend)  # a backend that cannot run is named before the model loads
    if documents is None:
        texts = _texts(texts)   # so are texts outside the limits
    if pretrained is None:
        spec = find_model(model_name)
        if spec is None or not spec.tokenizer:
            raise InputError(f"{model_name!r} is not a registered model with a tokenizer: pass pretrained=(model, "
                             "tokenizer) from load_local_model()")
        model, tokenizer = spec.load(dtype=dtype or torch.float32, device=device)
    else:
        model, tokenizer = pretrained
    if tokenizer is None:
        raise InputError(f"{model_name} has no tokenizer files, so texts cannot be tokenised: save the tokenizer "
                         "into its folder, or verify it from the command line on token ids")
    if documents is None:
        documents = tokenise_texts(tokenizer, texts)
    else:
        texts = tuple(tokenizer.decode(d) for d in documents)
    return verify_hf(model, documents, mask=mask, positions=positions, attn=backend,
                     use_cache=use_cache, model_name=model_name, decode=tokenizer.decode, texts=texts)


def verify_model(model="tiny-rope", *, mask: str = "on", positions: str = "reset",
                 backend: str = "segments", documents=None, texts=None, seed: int | None = None,
                 dtype: torch.dtype | None = None, device=None, use_cache: bool = False) -> VerifyReport:
    """Verify a registered model (``"tiny-rope"``, ``"tiny-abs"``: random init, for speed; ``"smollm2"``),
    a ``TinyTransformer``, or a local Hugging Face model folder.

    ``documents`` (token-id lists) replace the defaults for every model; ``texts`` only
    make sense for a model with a tokenizer. ``seed`` draws the tiny models' random
    documents. ``use_cache`` matters only for the pretrained model
    with its own attention (``backend="sdpa"`` or ``"eager"``): transformers then skips
    its packing detection.
    """
    spec = find_model(model)
    if spec is not None and spec.tokenizer:
        if seed is not None:
            raise InputError(f"seed draws the tiny models' random documents; {spec.name} runs real "
                             "texts: pass texts= or documents= instead")
        return verify_pretrained(mask=mask, positions=positions, backend=backend, texts=texts,
                                 documents=documents, use_cache=use_cache, dtype=dtype, device=device,
                                 model_name=spec.name)
    if texts is not None and not is_model_path(model):
        raise InputError(f"texts need a tokenizer, and {model!r} has none: pass documents= "
                         f"(token ids) or use --model {PRETRAINED}")
    if is_model_path(model):
        return _verify_local(model, mask=mask, positions=positions, backend=backend, documents=documents,
                             texts=texts, seed=seed, dtype=dtype, device=device, use_cache=use_cache)
    seed = 0 if seed is None else seed
    if isinstance(model, TinyTransformer):
        net, name = model, "tiny-rope" if model.cfg.positions == "rope" else "tiny-abs"
    elif isinstance(model, HybridModel):    # the Leakage lab passes the loaded model itself
        net, name = model, "tiny-hybrid"
    elif spec is not None:
        net, name = spec.load(dtype=dtype or torch.float32, device=device or "cpu")[0], model
    else:
        raise InputError(f"unknown model {model!r}: choose one of {', '.join(model_names())}")
    param = next(net.parameters())
    docs = default_documents(vocab_size=net.cfg.vocab_size, seed=seed) if documents is None \
        else documents
    return verify_runner(model_runner(net, backend), docs, mask=mask, positions=positions,
                  dtype=param.dtype, backend_name=backend, device=param.device, model_name=name)


def _verify_local(path, *, mask, positions, backend, documents, texts, seed, dtype, device, use_cache) -> VerifyReport:
    """A local HF folder: its texts (default :data:`DEFAULT_TEXTS`) if it has a tokenizer, else random ids."""
    from packing_core.models.pretrained import load_local_model

    net, tokenizer = load_local_model(path, dtype=dtype or torch.float32)
    if device is not None:
        net = net.to(device)
    decode = tokenizer.decode if tokenizer is not None else None
    if documents is None and tokenizer is not None:
        if seed is not None:
            raise InputError(f"{path} has a tokenizer, so it runs texts: pass texts= instead of seed=")
        texts = _texts(texts)
        documents = tokenise_texts(tokenizer, texts)
    elif documents is None:
        if texts is not None:
            raise InputError(f"{path} has no tokenizer files, so texts cannot be tokenised: pass documents= "
                             "(token ids), or save the tokenizer into the folder")
        documents = default_documents(vocab_size=min(net.config.vocab_size, 1000), seed=seed or 0)
        texts = ()
    else:
        texts = tuple(tokenizer.decode(d) for d in documents) if tokenizer is not None else ()
    return verify_hf(net, documents, mask=mask, positions=positions, attn=backend, use_cache=use_cache,
                     model_name=str(path), decode=decode, texts=texts or ())


def drift_path(backend: str, mask: str, positions: str, use_cache: bool) -> str:
    """The attention path of a verdict's continuations, in words.

    >>> drift_path("sdpa", "on", "reset", True)
    "transformers' own sdpa attention, use_cache=True, position_ids reset, no attention_mask"
    """
    from packing_core.models.hf_attention import HF_IMPLEMENTATIONS

    if backend in HF_IMPLEMENTATIONS:
        return (f"transformers' own {backend} attention, use_cache={use_cache}, position_ids {positions}, "
                "no attention_mask")
    kind = "one per document" if backend_mask(backend, mask) == "on" else "one causal triangle over the row"
    return (f"the mask of the lab's {backend} backend ({kind}), given to the model as 4D masks with a KV cache "
            f"(the lab's backends take no cache), position_ids {positions}")


def backend_mask(backend: str, mask: str) -> str:
    """The mask a backend really applies: ``causal_only`` ignores document boundaries."""
    return "off" if backend == "causal_only" else mask


def drift_pretrained(texts=None, *, mask: str = "off", positions: str = "reset", backend: str = "segments",
                     use_cache: bool = False, steps: int = 20, document: int = 1, pretrained=None):
    """SmolLM2's greedy continuations of ``texts[document]``, alone and packed after the texts before it.

    They follow the verdict's own path (``verify.drift``): transformers' own sdpa/eager
    decode exactly as called, with their cache when ``use_cache=True`` (and no mask, so
    they leak as the verdict measured) or through ``hf_runner`` one row per token when
    ``use_cache=False``; the lab's backends, which take no cache, decode with their own
    mask given explicitly. ``pretrained`` is a loaded ``(model, tokenizer)`` pair.
    """
    from packing_core.models.hf_attention import HF_IMPLEMENTATIONS, attn_name, hf_runner
    from packing_core.models.registry import model_spec
    from packing_core.verify.drift import cached_continuations, continuations

    attn_name(backend)
    model, tokenizer = pretrained if pretrained is not None else model_spec(PRETRAINED).load()
    documents = tokenise_texts(tokenizer, texts)
    common = dict(document=document, positions=positions, steps=steps,
                  path=drift_path(backend, mask, positions, use_cache))
    if backend in HF_IMPLEMENTATIONS and not use_cache:   # no cache may be used: one full row per token
        return continuations(hf_runner(model, backend, use_cache), documents, tokenizer.decode, mask=mask,
                             device=next(model.parameters()).device, **common)
    from packing_core.models.hf_attention import _attn_implementation

    own = backend in HF_IMPLEMENTATIONS
    with _attn_implementation(model, backend if own else "sdpa"):
        return cached_continuations(model, documents, tokenizer.decode, mask=backend_mask(backend, mask),
                                    explicit_mask=not own, **common)
