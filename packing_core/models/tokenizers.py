"""Tokenizers by name: ``smollm2``, ``bytes``, or a local Hugging Face tokenizer folder.

Folders load offline (``local_files_only=True``) and never run code shipped with them
(``trust_remote_code=False``). Each tokenizer carries what a length profile records
about it: a name, a hash of its vocabulary and a hash of its chat template::

    load_tokenizer("bytes")              -> byte_tokenizer (one token per UTF-8 byte)
    load_tokenizer("smollm2")            -> SmolLM2-135M-Instruct's tokenizer (49,152 tokens)
    load_tokenizer("/models/my-tok")     -> the tokenizer saved there with save_pretrained()

The app's tokenizer picker lists the built-ins plus the folders of
``$PACKING_LAB_TOKENIZERS`` (see ``_settings.tokenizer_dirs``).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from packing_core._settings import SMOLLM2_CACHE_DIRS, cache_dir, tokenizer_dirs
from packing_core.data.lengths import byte_tokenizer

BUILTIN_TOKENIZERS = ("smollm2", "bytes")
# where models.pretrained caches SmolLM2's converted files (the model folder, or the tokenizer alone)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt")


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


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

    @property
    def hf(self):
        """transformers' tokenizer for this folder (loaded once, on first use)."""
        if not self._hf:
            self._hf.append(_load_folder(self.folder))
        return self._hf[0]

    def __call__(self, texts: list[str]) -> list[list[int]]:
        fast = self.fast if self.fast is not None else getattr(self.hf, "backend_tokenizer", None)
        if fast is not None and hasattr(fast, "encode_batch_fast"):
            # the Rust tokenizer without offsets or transformers' wrapping: same ids, faster
            return [e.ids for e in fast.encode_batch_fast(list(texts), add_special_tokens=False)]
        return self.hf(list(texts), add_special_tokens=False)["input_ids"]

    def apply_chat_template(self, messages, tokenize: bool = False, add_generation_prompt: bool = False):
        return self.hf.apply_chat_template(messages, tokenize=tokenize, add_generation_prompt=add_generation_prompt)

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
        template = _folder_template(folder)
        if not (folder / "tokenizer.json").is_file() or template is False:
            return cls.wrap(name, _load_folder(folder), folder)
        from tokenizers import Tokenizer

        try:
            fast = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as e:  # noqa: BLE001  (the Rust side raises its own exception type)
            raise ValueError(f"could not read {str(folder / 'tokenizer.json')!r} ({e}); save the tokenizer "
                             "again with tokenizer.save_pretrained()") from None
        vocab = json.dumps(sorted(fast.get_vocab(with_added_tokens=True).items()), ensure_ascii=False)
        return cls(name, _sha(vocab), template, _sha(template) if template else None, fast=fast, folder=folder)


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
    ValueError: tokenizer 'no/such/folder' is neither a built-in (smollm2, bytes) nor an existing folder; ...
    """
    if str(spec) in BUILTIN_TOKENIZERS:
        return
    folder = Path(spec).expanduser()
    if not folder.is_dir():
        raise ValueError(f"tokenizer {str(spec)!r} is neither a built-in ({', '.join(BUILTIN_TOKENIZERS)}) "
                         "nor an existing folder; pass a folder written by tokenizer.save_pretrained()")
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise ValueError(f"the folder {str(spec)!r} holds no tokenizer files (none of {', '.join(TOKENIZER_FILES)}); "
                         "pass a folder written by tokenizer.save_pretrained()")


def _load_folder(folder: Path):
    from transformers import AutoTokenizer

    check_tokenizer(str(folder))
    try:
        return AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001  (transformers raises many kinds; one line naming the folder)
        raise ValueError(f"could not load a tokenizer from {str(folder)!r} ({type(e).__name__}: {e}); it must be a "
                         "Hugging Face tokenizer folder that loads offline without custom code") from None


@lru_cache(maxsize=8)
def load_tokenizer(spec: str = "smollm2"):
    """The tokenizer named by ``spec``: ``smollm2``, ``bytes`` or a folder (cached per process).

    >>> load_tokenizer("bytes") is byte_tokenizer
    True
    """
    spec = str(spec)
    if spec == "bytes":
        return byte_tokenizer
    if spec == "smollm2":
        saved = [cache_dir() / d for d in SMOLLM2_CACHE_DIRS if (cache_dir() / d / "tokenizer.json").is_file()]
        if saved:   # the converted copy: no transformers import until a chat template is rendered
            return HFTokenizer.from_folder("smollm2", saved[0])
        from packing_core.models.pretrained import INSTALL_PRETRAINED, real_tokenizer

        tok = real_tokenizer()   # the first time: converts the GGUF's tokenizer into the cache
        if tok is None:
            raise ValueError(f"--tokenizer smollm2 needs the pretrained model: {INSTALL_PRETRAINED} "
                             "(or use --tokenizer bytes)")
        return HFTokenizer.wrap("smollm2", tok.hf)
    folder = Path(spec).expanduser()
    return HFTokenizer.from_folder(folder.name or spec, folder)
