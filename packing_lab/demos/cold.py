"""The waits of a cold server, said while they run: SmolLM2's conversion and its tokenizer's extraction.

With an empty cache (``PACKING_LAB_CACHE``) the first SmolLM2 run converts the packaged GGUF file to
safetensors, and the first run that needs the real tokenizer extracts it from the same file: 30-100 s
and 15-35 s on a busy 2-core machine (docs/classroom.md). Each wait is timed when it runs and kept
beside the caches (``timings.json``), so the next estimate is what this server measured; before any
measurement, the estimate says it is a first-run guess. ``python -m packing_core warm`` does both
before class.

>>> expected_seconds("convert", timings={})[1].startswith("a first-run guess")
True
>>> expected_seconds("convert", timings={"convert": [90.0, 70.0, 80.0]})
(80.0, 'measured on this server: 90 s, 70 s, 80 s')

The estimate a page shows is ``estimate.cold_estimate``; this module reads and writes files only.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from packing_core._settings import SMOLLM2_CACHE_DIRS, cache_dir

# what: (what the bar says, a first-run guess in s, the range that guess comes from)
WAITS = {
    "convert": ("Converting SmolLM2 from its GGUF file to safetensors, once per server", 60.0,
                "30-100 s on a busy 2-core machine"),
    "tokenizer": ("Extracting SmolLM2's tokenizer from its GGUF file, once per server", 25.0,
                  "15-35 s on a busy 2-core machine"),
}
KEPT = 5   # measurements kept per wait


def _timings_path() -> Path:
    return cache_dir() / "timings.json"


def measured(timings: dict | None = None) -> dict[str, list[float]]:
    """The seconds each wait took on this server (latest last), read from the cache; {} when none was timed."""
    if timings is not None:
        return timings
    try:
        data = json.loads(_timings_path().read_text())
    except (OSError, ValueError):
        return {}
    return {k: [float(s) for s in v if isinstance(s, (int, float))] for k, v in data.items()
            if k in WAITS and isinstance(v, list)} if isinstance(data, dict) else {}


def expected_seconds(what: str, timings: dict | None = None) -> tuple[float, str]:
    """How long the wait ``what`` ("convert" or "tokenizer") takes here, and what that rests on: the median of its
    last measured times, or a first-run guess that says so."""
    _, guess, spread = WAITS[what]
    seen = measured(timings).get(what) or []
    if seen:
        shown = ", ".join(f"{s:.0f} s" for s in seen[-3:])
        return statistics.median(seen[-3:]), f"measured on this server: {shown}"
    return guess, f"a first-run guess: this server has not timed it yet ({spread})"


def record_cold(what: str, seconds: float) -> None:
    """Keep how long ``what`` took, for the next estimate (a cache that cannot be written keeps nothing)."""
    times = measured()
    times[what] = [*times.get(what, []), round(float(seconds), 1)][-KEPT:]
    path = _timings_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(times))
        tmp.replace(path)
    except OSError:
        pass


def tokenizer_extracted() -> bool:
    """Is SmolLM2's tokenizer ready to load from the cache (or is there no GGUF file to extract it from)? Files
    only: it never extracts it."""
    from packing_core.models.pretrained import _gguf_folder

    return any((cache_dir() / d).is_dir() for d in SMOLLM2_CACHE_DIRS) or _gguf_folder() is None


def convert_smollm2() -> str:
    """Convert SmolLM2 from its GGUF file into the cache and build no model (a page's cached loader reads the copy):
    what happened, ``"cached"``, ``"converted"``, ``"rebuilt"`` or ``"waited"`` (another process converted it)."""
    from packing_core.models.pretrained import convert_pretrained

    return convert_pretrained()[1]
