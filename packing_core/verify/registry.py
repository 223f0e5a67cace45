"""Model name -> runner -> one :class:`VerifyReport`: the only place that knows ``"smollm2"``.

>>> verify_model("tiny-rope", mask="on").equivalent
True
>>> verify_model("tiny-rope", mask="off").equivalent     # document 1 reads document 0
False
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from packing_core.models.tiny import MODELS, TinyTransformer, tiny_model
from packing_core.verify.equivalence import VerifyReport, default_documents, model_runner, verify_runner

PRETRAINED_MODELS = ("smollm2",)

# Two short unrelated English texts (a GSM8K test question and a plain fact).
DEFAULT_TEXTS = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and "
    "bakes muffins for her friends every day with four. How many eggs are left?",
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was finished in 1889 "
    "and is named after the engineer Gustave Eiffel.",
)


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


def _texts(texts) -> tuple[str, ...]:
    if isinstance(texts, str):
        texts = [texts]
    texts = tuple(DEFAULT_TEXTS if texts is None else texts)
    if not texts or not all(isinstance(t, str) and t.strip() for t in texts):
        raise ValueError(f"texts must be a list of non-blank strings, got {texts!r}: "
                         "pass e.g. two sentences")
    return texts


def verify_pretrained(mask: str = "on", positions: str = "reset", backend: str = "segments",
                      texts=None, *, documents=None, pretrained=None, use_cache: bool = False,
                      dtype: torch.dtype | None = None, device=None) -> VerifyReport:
    """Verify SmolLM2 on real text: the texts (or token-id ``documents``) packed in one row vs alone.

    ``pretrained`` is a ``(model, tokenizer)`` pair already loaded (else loads it in
    ``dtype``, on ``device``). With ``mask="off"`` the second text reads the first, and
    its top-1 predictions change: the report lists them, decoded, in ``changes``.
    """
    from packing_core.models.pretrained import PRETRAINED, load_pretrained

    if pretrained is None:
        model, tokenizer = load_pretrained(dtype=dtype or torch.float32)
        if device is not None:
            model = model.to(device)
    else:
        model, tokenizer = pretrained
    if documents is None:
        texts = _texts(texts)
        documents = [list(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]
    else:
        texts = tuple(tokenizer.decode(d) for d in documents)
    return verify_hf(model, documents, mask=mask, positions=positions, attn=backend,
                     use_cache=use_cache, model_name=PRETRAINED, decode=tokenizer.decode, texts=texts)


def verify_model(model="tiny-rope", *, mask: str = "on", positions: str = "reset",
                 backend: str = "segments", documents=None, texts=None, seed: int | None = None,
                 dtype: torch.dtype | None = None, device=None, use_cache: bool = False) -> VerifyReport:
    """Verify a named model: ``"tiny-rope"``, ``"tiny-abs"`` (random init, for speed) or ``"smollm2"``.

    ``documents`` (token-id lists) replace the defaults for every model; ``texts`` only
    make sense for a model with a tokenizer. ``seed`` draws the tiny models' random
    documents. ``use_cache`` matters only for the pretrained model
    with its own attention (``backend="sdpa"`` or ``"eager"``): transformers then skips
    its packing detection.
    """
    if model in PRETRAINED_MODELS:
        if seed is not None:
            raise ValueError("seed draws the tiny models' random documents; smollm2 runs real "
                             "texts: pass texts= or documents= instead")
        return verify_pretrained(mask=mask, positions=positions, backend=backend, texts=texts,
                                 documents=documents, use_cache=use_cache, dtype=dtype, device=device)
    if texts is not None:
        raise ValueError(f"texts need a tokenizer, and {model!r} has none: pass documents= "
                         "(token ids) or use --model smollm2")
    seed = 0 if seed is None else seed
    if isinstance(model, TinyTransformer):
        net, name = model, "tiny-rope" if model.cfg.positions == "rope" else "tiny-abs"
    elif model in MODELS:
        net, name = tiny_model(model, dtype=dtype or torch.float32, device=device or "cpu"), model
    else:
        raise ValueError(f"unknown model {model!r}: choose one of "
                         f"{', '.join(MODELS + PRETRAINED_MODELS)}")
    param = next(net.parameters())
    docs = default_documents(vocab_size=net.cfg.vocab_size, seed=seed) if documents is None \
        else documents
    return verify_runner(model_runner(net, backend), docs, mask=mask, positions=positions,
                  dtype=param.dtype, backend_name=backend, device=param.device, model_name=name)
