"""Document lengths: the only thing a packing plan needs to know about a dataset.

Every source ends as a 1-D ``np.int64`` array, one entry per document, each >= 1::

    >>> as_lengths([120, 90, 300]).tolist()
    [120, 90, 300]
    >>> parse_lengths("120, 90\\n300").tolist()
    [120, 90, 300]
    >>> x = synthetic_lengths("support-tickets")
    >>> len(x), round(float(x.mean()))
    (200000, 114)

Here: lengths typed by a person, seeded synthetic sets, and token counts. A text becomes a
length through a ``Tokenizer``: any callable ``list[str] -> list[list[int]]``; ``byte_tokenizer``
(UTF-8 bytes) is the dependency-free default. Files are read by :mod:`packing_core.data.columns`.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from packing_core._lengths import length_values
from packing_core._validate import MAX_DOCUMENTS, MAX_WORD_CHARS, InputError, as_lengths, limit_hint, whole_number

__all__ = ["SYNTHETIC", "TOKENIZER_BATCH", "Tokenizer", "as_lengths", "byte_tokenizer", "count_tokens", "parse_lengths",
           "synthetic_lengths", "token_lengths"]

Tokenizer = Callable[[list[str]], list[list[int]]]
TOKENIZER_BATCH = 1024  # texts per tokenizer call: bounds the memory of the id lists

SYNTHETIC: dict[str, str] = {
    "support-tickets": "200,000 support tickets, mean ~114 tokens, long right tail",
    "bimodal": "100,000 docs: short chat turns (~40 tokens) and long documents (~400)",
    "long-tailed": "100,000 docs, Pareto: many short (median ~27), a few very long (>512, up to 8192)",
}
_DEFAULT_N = {"support-tickets": 200_000, "bimodal": 100_000, "long-tailed": 100_000}
_SEPARATORS = re.compile(r"[\s,;]+")
_TYPED_FIX = "type whole numbers >= 1 separated by commas, spaces or new lines, e.g. '120, 90, 300'"


# --- lists of numbers ----------------------------------------------------------------

def parse_lengths(text: str) -> np.ndarray:
    """Lengths typed by a person: numbers separated by commas, semicolons, spaces or new lines.

    Each number follows the one rule for lengths (``_lengths.length_values``), as in a file.

    >>> parse_lengths("120, 90,300\\n +7").tolist()
    [120, 90, 300, 7]
    """
    tokens = [t for t in _SEPARATORS.split(str(text)) if t]
    if not tokens:
        raise InputError("no lengths given; type whole numbers separated by commas, e.g. '120, 90, 300'")
    return as_lengths(length_values(tokens, lambda i: f"item {i + 1}", _TYPED_FIX))


# --- synthetic datasets --------------------------------------------------------------

def _lognormal(rng: np.random.Generator, n: int, means, sigmas, component=None) -> np.ndarray:
    """Lognormal (mixture) draws: draw ``i`` has mean ``means[component[i]]`` (mean, not median).

    float32 keeps 10 million draws fast.
    """
    means, sigmas = np.float32(means), np.float32(sigmas)
    mus = np.log(means) - sigmas * sigmas / 2
    pick = 0 if component is None else component
    z = rng.standard_normal(n, dtype=np.float32)
    z *= sigmas[pick]
    z += mus[pick]
    return np.exp(z, out=z)


def synthetic_lengths(name: str, n: int | None = None, seed: int = 0) -> np.ndarray:
    """Seeded synthetic lengths; ``SYNTHETIC`` describes each name.

    >>> x = synthetic_lengths("support-tickets", n=100_000)
    >>> round(float(x.mean())), int(x.min()) >= 1, float((x > 512).mean()) < 0.01
    (114, True, True)

    Padding every support ticket to 512 leaves about three quarters of the slots as pads
    (1 - 114/512 = 0.78): the waste that packing removes.
    """
    if name not in SYNTHETIC:
        raise InputError(f"unknown synthetic dataset {name!r}; choose one of {sorted(SYNTHETIC)}")
    n = _DEFAULT_N[name] if n is None else n
    n = whole_number(n, "n", maximum=MAX_DOCUMENTS, hint="e.g. n=10_000")
    rng = np.random.default_rng(seed)
    if name == "support-tickets":
        x = _lognormal(rng, n, [114.0], [0.7])  # sigma 0.7: ~0.6 % of tickets exceed 512
    elif name == "bimodal":
        is_doc = (rng.random(n, dtype=np.float32) < 0.3).view(np.int8)  # 70 % chat, 30 % documents
        x = _lognormal(rng, n, [40.0, 400.0], [0.5, 0.12], component=is_doc)
    else:  # long-tailed: Pareto(alpha 1.3) above 16 tokens = 16 * exp(Exp(1) / 1.3), capped at 8192
        x = rng.standard_exponential(n, dtype=np.float32)
        x /= np.float32(1.3)
        np.exp(x, out=x)
        x *= np.float32(16.0)
        np.minimum(x, np.float32(8192.0), out=x)
    np.rint(x, out=x)
    np.maximum(x, 1.0, out=x)
    return x.astype(np.int64)


# --- tokenizers ----------------------------------------------------------------------

def byte_tokenizer(texts: list[str]) -> list[list[int]]:
    """UTF-8 bytes as token ids: a tokenizer without a vocabulary file.

    >>> byte_tokenizer(["hé", "ok"])
    [[104, 195, 169], [111, 107]]
    """
    return [list(t.encode("utf-8")) for t in texts]


# a tokenizer's pre-tokens: a run of letters, of digits or of other non-space characters (GPT-2's split, roughly)
_RUNS = re.compile(r"[^\W\d_]+|\d+|[^\w\s]+")


def check_runs(texts: list[str]) -> None:
    """Refuse a text holding an unbroken run of letters, digits or punctuation past ``MAX_WORD_CHARS``
    before a tokenizer sees it. No word of any language is near that long; a file of such runs is a
    file of degenerate records, and SmolLM2's tokenizer spends about 1 s on each MiB of one (4-6x its
    time on ordinary text, whose words repeat): a 9 MB upload of 2 GiB of them held a server's core
    for the whole read budget.

    Only texts longer than the limit are scanned (a shorter one cannot hold such a run).

    >>> check_runs(["a b " * 10_000])
    >>> try:
    ...     check_runs(["x" * 20_000])
    ... except InputError as e:
    ...     print(str(e)[:60])
    a text holds an unbroken run of 20,000 characters ('xxxxxxxx
    """
    for text in texts:
        if len(text) <= MAX_WORD_CHARS:
            continue
        longest = max((m for m in _RUNS.finditer(text)), key=lambda m: m.end() - m.start(), default=None)
        if longest is not None and longest.end() - longest.start() > MAX_WORD_CHARS:
            n = longest.end() - longest.start()
            raise InputError(f"a text holds an unbroken run of {n:,} characters ({text[longest.start():][:20]!r}...): "
                             "no word is that long, and a tokenizer spends about 1 s a MiB on such runs; break the run or drop "
                             f"the record ({limit_hint('MAX_WORD_CHARS')})")


def count_tokens(tokenizer: Tokenizer, texts: list[str]) -> np.ndarray:
    """Token count of each text (no special tokens added by the wrapper).

    A tokenizer with a ``count`` method (``HFTokenizer``) counts without building id lists. A text
    with an unbroken run past ``MAX_WORD_CHARS`` is refused first (:func:`check_runs`).

    >>> count_tokens(byte_tokenizer, ["hé", "ok"]).tolist()
    [3, 2]
    """
    if tokenizer is byte_tokenizer:
        return np.fromiter((len(t.encode("utf-8")) for t in texts), dtype=np.int64, count=len(texts))
    if not texts:
        return np.zeros(0, np.int64)
    check_runs(texts)
    count = getattr(tokenizer, "count", None)
    if callable(count):
        return np.asarray(count(texts), dtype=np.int64)
    ids: Any = tokenizer(texts)
    if isinstance(ids, Mapping) and "input_ids" in ids:  # a Hugging Face BatchEncoding
        ids = ids["input_ids"]
    if len(ids) != len(texts):
        raise InputError(f"the tokenizer returned {len(ids)} id lists for {len(texts)} texts; a "
                         "Tokenizer must map list[str] -> one list of token ids per text")
    return np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(texts))


def token_lengths(texts, tokenizer: Tokenizer, where: Callable[[int], str] | None = None) -> np.ndarray:
    """Token counts of a column of texts (an Arrow array, or a list of str), ``TOKENIZER_BATCH`` texts per call.

    With ``where`` (naming text ``i``), a text the tokenizer turns into no tokens is refused.

    >>> token_lengths(["hé", "ok"], byte_tokenizer).tolist()
    [3, 2]
    """
    plain = isinstance(texts, (list, tuple))
    if tokenizer is byte_tokenizer and not plain:  # same numbers, computed in C without building id lists
        import pyarrow.compute as pc

        lengths = pc.binary_length(texts).to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        def batch(start: int) -> list:
            return list(texts[start:start + TOKENIZER_BATCH]) if plain else \
                texts.slice(start, TOKENIZER_BATCH).to_pylist()

        parts = [count_tokens(tokenizer, batch(start)) for start in range(0, len(texts), TOKENIZER_BATCH)]
        lengths = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if where is not None and (lengths == 0).any():
        raise InputError(f"the tokenizer returned no tokens for the document at "
                         f"{where(int(np.argmin(lengths)))}; make it return at least one id per "
                         "non-blank text (e.g. add a BOS token)")
    return lengths
