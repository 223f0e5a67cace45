"""Tokenizers by name: ``auto``, ``smollm2``, ``bytes``, or a local Hugging Face tokenizer folder.

Folders load offline (``local_files_only=True``) and never run code shipped with them
(``trust_remote_code=False``). Each tokenizer carries what a length profile records
about it: a name, a hash of its vocabulary and a hash of its chat template::

    load_tokenizer("bytes")              -> byte_tokenizer (one token per UTF-8 byte)
    load_tokenizer("smollm2")            -> SmolLM2-135M-Instruct's tokenizer (49,152 tokens)
    load_tokenizer("auto")               -> SmolLM2's when it is installed, else bytes
    load_tokenizer("/models/my-tok")     -> the tokenizer saved there with save_pretrained()

Every entry point (``report``, ``scan``, ``check`` and the pages) loads through
:func:`load_tokenizer`, and every Hugging Face tokenizer is wrapped in one class,
:class:`HFTokenizer`.

The app's tokenizer picker lists the built-ins plus the folders of
``$PACKING_LAB_TOKENIZERS`` (see ``_settings.tokenizer_dirs``).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from packing_core._settings import PRETRAINED, SMOLLM2_CACHE_DIRS, cache_dir, tokenizer_dirs, word_counter_enabled
from packing_core._validate import MAX_ADDED_TOKENS, InputError
from packing_core.data.chat_template import render, renders_alone
from packing_core.data.files import TOKENIZER_FILES, vet_tokenizer_folder
from packing_core.data.lengths import byte_tokenizer

BUILTIN_TOKENIZERS = (PRETRAINED, "bytes")
AUTO = "auto"   # the pretrained model's tokenizer when installed, else bytes
TOKENIZER_CHOICES = (AUTO, *BUILTIN_TOKENIZERS)   # what --tokenizer takes, besides a folder
# where models.pretrained caches SmolLM2's converted files (the model folder, or the tokenizer alone)


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


_WS = r"\t\n\x0b\x0c\r "
# GPT-2's pre-tokenizer pattern ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)
# with its classes spelled out for ASCII text, where they mean one thing to every regex engine
_ASCII_WORDS = re.compile(rf"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^{_WS}A-Za-z0-9]+|[{_WS}]+(?![^{_WS}])|[{_WS}]+")
# texts on which the counter must agree with the Rust tokenizer before it is used
PROBES = ("Hello, world!", "  two  spaces\n\n\tand tabs\t", "it's we'll they'd I'M 'S", "x=1+2.5e10; y='a'",
          "\x00\x01\x1f\x7f control", "trailing   ", "   leading", "a\r\nb\x0bc\x0cd", "12345678901234567890",
          "\"\"\" ``` ... --- ___ !!!", "camelCaseWordsAndALLCAPS snake_case_words", "")


MAX_CACHED_WORD = 64   # characters: a longer word is counted every time, never kept


class _WordCounts(dict):
    """word -> its token count, filled on a miss; emptied when full, so its memory stays bounded.

    At most ``limit`` words of at most ``MAX_CACHED_WORD`` characters each: a few tens of MB
    whatever a file holds.
    """

    def __init__(self, count_word, limit: int):
        super().__init__()
        self.count_word, self.limit = count_word, limit

    def __missing__(self, word: str) -> int:
        n = self.count_word(word)
        if len(word) <= MAX_CACHED_WORD:
            if len(self) >= self.limit:
                self.clear()
            self[word] = n
        return n


@dataclass(frozen=True, eq=False)
class ByteLevelCounter:
    """Token counts of a byte-level BPE tokenizer for ASCII texts, without building encodings.

    A byte-level BPE tokenizer (no normalizer, GPT-2's pre-tokenizer) cuts a text into words
    with one regular expression and encodes each word on its own, so a text's length is the
    sum of its words' lengths. This counter cuts with the same expression, written out for
    ASCII, where Python's ``re`` and the tokenizer's Oniguruma agree, and looks each word up
    in a bounded cache that the tokenizer's own model fills. The Rust tokenizer builds a full
    encoding per text (ids, token strings, masks); a count needs none of it.

    ``count`` returns None for a text it must not count: one with a non-ASCII character, or
    one holding an added token's text (``<|im_start|>``), which the tokenizer splits out
    first. ``build`` returns None for any other kind of tokenizer, or for one that disagrees
    with the counter on ``PROBES``.
    """

    words: _WordCounts = field(repr=False)
    added: re.Pattern | None = field(repr=False)
    leads: str = ""    # the first characters of the added tokens: a text without any holds none of them

    @classmethod
    def build(cls, fast, limit: int = 200_000) -> ByteLevelCounter | None:
        from tokenizers import models, pre_tokenizers

        pre, model = fast.pre_tokenizer, fast.model
        if (fast.normalizer is not None or not isinstance(pre, pre_tokenizers.ByteLevel)
                or getattr(pre, "add_prefix_space", True) or not getattr(pre, "use_regex", False)
                or not isinstance(model, models.BPE) or model.dropout not in (None, 0.0)):
            return None
        added = sorted({t.content for t in fast.get_added_tokens_decoder().values() if t.content}, key=len, reverse=True)
        if len(added) > MAX_ADDED_TOKENS:   # one regular expression of 50,000 alternatives: the Rust side counts
            return None
        counter = cls(_WordCounts(lambda w: sum(len(model.tokenize(p)) for p, _ in pre.pre_tokenize_str(w)), limit),
                      re.compile("|".join(map(re.escape, added))) if added else None, "".join({t[0] for t in added}))
        expected = [len(e) for e in fast.encode_batch_fast(list(PROBES), add_special_tokens=False)]
        return counter if [counter.count(t) for t in PROBES] == expected else None

    def count(self, text: str) -> int | None:
        """The text's token count, or None when the Rust tokenizer must count it."""
        if not text.isascii() or (self.added is not None and any(c in text for c in self.leads)
                                  and self.added.search(text)):
            return None
        return sum(map(self.words.__getitem__, _ASCII_WORDS.findall(text)))


@dataclass(frozen=True, eq=False)
class HFTokenizer:
    """A Hugging Face tokenizer as a ``Tokenizer`` (texts -> ids, no special tokens) with its identity.

    From a folder with a ``tokenizer.json`` the counting runs on the ``tokenizers`` library
    alone, so a scan worker starts without importing transformers (and torch); transformers'
    tokenizer (``hf``) loads on first use, when a chat template has to be rendered.
    """

    name: str
    vocab_hash: str
    chat_template: str | None
    chat_template_hash: str | None
    fast: Any = None                    # tokenizers.Tokenizer, when the folder has tokenizer.json
    folder: Path | None = None
    _hf: list = field(default_factory=list, repr=False)
    _counter: list = field(default_factory=list, repr=False)   # [ByteLevelCounter | None], built on first count
    _split: list = field(default_factory=list, repr=False)     # [(added tokens, split tokens)], found on first use

    @property
    def hf(self):
        """transformers' tokenizer for this folder (loaded once, on first use)."""
        if not self._hf:
            self._hf.append(_load_folder(self.folder))
        return self._hf[0]

    def _rust(self):
        """The Rust tokenizer with truncation and padding off (a length must be the whole text's), or None."""
        fast = self.fast if self.fast is not None else getattr(self.hf, "backend_tokenizer", None)
        if fast is None or not hasattr(fast, "encode_batch_fast"):
            return None
        if fast.truncation is not None:
            fast.no_truncation()
        if fast.padding is not None:
            fast.no_padding()
        return fast

    def __call__(self, texts: list[str]) -> list[list[int]]:
        fast = self._rust()
        if fast is not None:
            # the Rust tokenizer without offsets or transformers' wrapping: same ids, faster
            return [e.ids for e in fast.encode_batch_fast(list(texts), add_special_tokens=False)]
        return self.hf(list(texts), add_special_tokens=False)["input_ids"]

    def count(self, texts: list[str]) -> np.ndarray:
        """Token count of each text, the same as ``len`` of ``self(texts)``, without building id lists.

        Byte-level BPE tokenizers (SmolLM2's, GPT-2's) count ASCII texts with ``ByteLevelCounter``
        (unless ``$PACKING_LAB_WORD_COUNTER`` is ``0``); every other text goes through the Rust tokenizer.
        """
        texts = list(texts)
        out = np.zeros(len(texts), np.int64)
        if not texts:
            return out
        fast = self._rust()
        if fast is None:
            out[:] = [len(ids) for ids in self(texts)]
            return out
        if not self._counter:
            self._counter.append(ByteLevelCounter.build(fast))
        counter = self._counter[0] if word_counter_enabled() else None
        rest: list[int] | range = range(len(texts))
        if counter is not None:
            left: list[int] = []
            for i, text in enumerate(texts):
                n = counter.count(text)
                if n is None:
                    left.append(i)
                else:
                    out[i] = n
            rest = left
        if len(rest):
            encodings = fast.encode_batch_fast([texts[i] for i in rest], add_special_tokens=False)
            out[list(rest)] = [len(e) for e in encodings]
        return out

    def decode(self, ids) -> str:
        if self.fast is not None:
            return self.fast.decode(list(ids), skip_special_tokens=False)
        return self.hf.decode(ids)

    def prepare_chat_template(self) -> None:
        """Load transformers' tokenizer now (unless the template renders without it), so that no time
        budget on a rendering pays for the import."""
        if not renders_alone(self.chat_template):
            _ = self.hf

    def apply_chat_template(self, messages, tokenize: bool = False, add_generation_prompt: bool = False):
        """transformers' ``apply_chat_template``; a template that reads only the messages is rendered by
        ``data.chat_template.render`` (the same text, without importing transformers and torch)."""
        template = self.chat_template
        if not tokenize and template is not None and renders_alone(template):
            return render(template, messages, add_generation_prompt)
        return self.hf.apply_chat_template(messages, tokenize=tokenize, add_generation_prompt=add_generation_prompt)

    @property
    def added_tokens(self) -> tuple[str, ...]:
        """The texts of the added tokens (``<|im_start|>`` ...), which the tokenizer matches before anything else."""
        return self._splitting()[0]

    @property
    def split_tokens(self) -> tuple[str, ...]:
        """Added tokens at which a count is additive: ``count(a + t + b) == count(a) + 1 + count(b)``.

        The Rust tokenizer first cuts a text at its added tokens (``tokenizers``' ``AddedVocabulary::
        extract_and_normalize``, leftmost-longest), then normalizes, pre-tokenizes and encodes each
        piece on its own, so the pieces' counts add up. None when a token strips the spaces beside it
        (``lstrip``/``rstrip``) or matches single words only, or a pre-tokenizer treats the first piece
        apart (Metaspace's ``prepend_scheme="first"``); each token is also checked on probe texts.
        """
        return self._splitting()[1]

    def _splitting(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if not self._split:
            self._split.append(_split_tokens(self))
        return self._split[0]

    @classmethod
    def wrap(cls, name: str, hf, folder: Path | None = None) -> HFTokenizer:
        """An already loaded transformers tokenizer."""
        vocab = json.dumps(sorted(hf.get_vocab().items()), ensure_ascii=False)
        template = getattr(hf, "chat_template", None)
        template = template if isinstance(template, str) else None
        return cls(name, _sha(vocab), template, _sha(template) if template else None, folder=folder, _hf=[hf])

    @classmethod
    def from_folder(cls, name: str, folder: Path) -> HFTokenizer:
        """A tokenizer folder: light (``tokenizers`` only) when it holds tokenizer.json and a plain template."""
        check_tokenizer(str(folder))
        vet_tokenizer_folder(folder)
        template = _folder_template(folder)
        if not (folder / "tokenizer.json").is_file() or template is False:
            return cls.wrap(name, _load_folder(folder), folder)
        from tokenizers import Tokenizer

        try:
            fast = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as e:  # noqa: BLE001  (the Rust side raises its own exception type)
            raise InputError(f"could not read {str(folder / 'tokenizer.json')!r} ({e}); save the tokenizer "
                             "again with tokenizer.save_pretrained()") from None
        vocab = json.dumps(sorted(fast.get_vocab(with_added_tokens=True).items()), ensure_ascii=False)
        return cls(name, _sha(vocab), template, _sha(template) if template else None, fast=fast, folder=folder)


def _split_tokens(tok: HFTokenizer) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(added tokens, split tokens)`` of a tokenizer (see ``HFTokenizer.split_tokens``)."""
    fast = tok._rust()
    if fast is None:
        return (), ()
    tokens = list(fast.get_added_tokens_decoder().values())
    added = tuple(sorted({t.content for t in tokens if t.content}, key=len, reverse=True))
    plain = all(not (t.lstrip or t.rstrip or t.single_word) for t in tokens)
    pre = fast.pre_tokenizer.__getstate__() if fast.pre_tokenizer is not None else b""
    if not added or not plain or b"Metaspace" in pre or len(added) > MAX_ADDED_TOKENS:
        return added, ()     # (past MAX_ADDED_TOKENS, finding the safe cuts would cost more than counting whole)
    parts = ["x", " y ", "\n\n", "Hello, world!", "é  ü\t", ""]    # each token joins them all: one text each
    alone = int(tok.count(parts).sum())
    whole = tok.count([t.join(parts) for t in added])
    ok = [t for t, n in zip(added, whole.tolist()) if n == alone + len(parts) - 1]
    return added, tuple(ok)


def _folder_template(folder: Path):
    """The folder's chat template text, None when it has none, False when only transformers can tell."""
    if (folder / "chat_template.jinja").is_file():
        return (folder / "chat_template.jinja").read_text(encoding="utf-8")
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    template = config.get("chat_template")
    return template if template is None or isinstance(template, str) else False


def tokenizer_choices() -> list[str]:
    """What a tokenizer picker offers: the built-ins, then the folders in ``$PACKING_LAB_TOKENIZERS``."""
    return list(BUILTIN_TOKENIZERS) + [str(p) for p in tokenizer_dirs()]


def check_tokenizer(spec: str) -> None:
    """Refuse a spec that names no tokenizer, before any worker starts (cheap: no loading).

    >>> check_tokenizer("no/such/folder")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    packing_core._validate.InputError: tokenizer 'no/such/folder' is neither a built-in (auto, smollm2, bytes) nor ...
    """
    if str(spec) in TOKENIZER_CHOICES:
        return
    folder = Path(spec).expanduser()
    if not folder.is_dir():
        raise InputError(f"tokenizer {str(spec)!r} is neither a built-in ({', '.join(TOKENIZER_CHOICES)}) "
                         "nor an existing folder; pass a folder written by tokenizer.save_pretrained()")
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise InputError(f"the folder {str(spec)!r} holds no tokenizer files (none of {', '.join(TOKENIZER_FILES)}); "
                         "pass a folder written by tokenizer.save_pretrained()")


def _load_folder(folder: Path):
    from transformers import AutoTokenizer

    check_tokenizer(str(folder))
    vet_tokenizer_folder(folder)
    try:
        return AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001  (transformers raises many kinds; one line naming the folder)
        raise InputError(f"could not load a tokenizer from {str(folder)!r} ({type(e).__name__}: {e}); it must be a "
                         "Hugging Face tokenizer folder that loads offline without custom code") from None


def load_tokenizer(spec: str = PRETRAINED):
    """The tokenizer named by ``spec``: ``auto``, ``smollm2``, ``bytes`` or a folder (cached per process).

    ``auto`` is SmolLM2's tokenizer when the model is installed, else one token per UTF-8 byte.

    >>> load_tokenizer("bytes") is byte_tokenizer
    True
    """
    spec = str(spec)
    if spec == AUTO:
        tok = _pretrained_tokenizer()
        return byte_tokenizer if tok is None else tok
    return _load(spec)


def _pretrained_tokenizer():
    """SmolLM2's tokenizer, or None when the model is not installed."""
    saved = [cache_dir() / d for d in SMOLLM2_CACHE_DIRS if (cache_dir() / d / "tokenizer.json").is_file()]
    if saved:   # the converted copy: no transformers import until a chat template is rendered
        return _load_folder_tokenizer(PRETRAINED, str(saved[0]))
    return real_tokenizer()   # the first time: converts the GGUF's tokenizer into the cache


@lru_cache(maxsize=1)
def real_tokenizer() -> HFTokenizer | None:
    """The SmolLM2 tokenizer (49,152 tokens), or None when the model is not installed.

    ``["Hello world"] -> [[19556, 905]]``, no special tokens; ``.hf`` is transformers' tokenizer.
    """
    from packing_core.models.pretrained import cached_tokenizer, tokenizer_folder

    folder = tokenizer_folder()
    return None if folder is None else HFTokenizer.wrap(PRETRAINED, cached_tokenizer(folder), folder)


def default_tokenizer():
    """``(tokenizer, reason)``: SmolLM2's tokenizer, else one token per UTF-8 byte (``load_tokenizer("auto")``
    with the reason a page shows)."""
    tok = real_tokenizer()
    if tok is not None:
        return tok, "SmolLM2 tokenizer (49,152-token vocabulary)"
    from packing_core.models.pretrained import missing_message

    return byte_tokenizer, f"byte tokenizer (one token per UTF-8 byte): {missing_message()}"


@lru_cache(maxsize=8)
def _load_folder_tokenizer(name: str, folder: str) -> HFTokenizer:
    return HFTokenizer.from_folder(name, Path(folder))


def _load(spec: str):
    if spec == "bytes":
        return byte_tokenizer
    if spec == PRETRAINED:
        tok = _pretrained_tokenizer()
        if tok is None:
            from packing_core.models.pretrained import INSTALL_PRETRAINED

            raise InputError(f"--tokenizer {PRETRAINED} needs the pretrained model: {INSTALL_PRETRAINED} "
                             "(or use --tokenizer bytes)")
        return tok
    folder = Path(spec).expanduser()
    return _load_folder_tokenizer(folder.name or spec, str(folder))
