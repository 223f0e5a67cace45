"""Scan a corpus into a LengthProfile: a map over shards to counts, then a merge.

    shards ──> worker (one tokenizer, loaded once) ──> counts per shard ──┐
    shards ──> worker                              ──> counts per shard ──┼──> merge ──> LengthProfile
    shards ──> worker                              ──> counts per shard ──┘

Two engines run the same ``scan_shard``:

- ``local`` (default): worker processes on this machine (``concurrent.futures`` with
  the ``spawn`` start method); ``workers=0`` runs in this process.
- ``ray``: Ray Data, ``map_batches`` over the shard list with an actor class that holds
  the tokenizer once per worker. ``ray_address`` joins a cluster ("auto" or
  "HOST:PORT"); without one a local Ray starts and stops with the scan.

Workers return counts; nothing is mutated across processes. The tokenizer travels as
a *loader*, a picklable zero-argument callable (``functools.partial(load_tokenizer,
"smollm2")``), so that each worker builds its own.

    >>> import functools, pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.txt").write_text("hi\\nhello\\n")
    >>> scan([folder], lambda: byte_tokenizer, workers=0).count_dict()
    {2: 1, 5: 1}
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import importlib.util
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import packing_core.data.sources as sources
from packing_core._settings import ReadBudget, read_budget
from packing_core._validate import InputError, as_workers, whole_number
from packing_core.data.columns import column_batches
from packing_core.data.kinds import COUNTED_KINDS, ONE_COLUMN_KINDS, detect_kind, kind_columns
from packing_core.data.lengths import byte_tokenizer, token_lengths
from packing_core.data.profile import MAX_OVER_CAP_EXAMPLES, LengthProfile, OverCap, SourceCount

ENGINES = ("local", "ray")
BATCH_ROWS = 4096           # records per call of the counter: bounds the memory of one batch
TASKS_PER_WORKER = 4        # tasks per worker when files are few: keeps every worker busy to the end
_worker_tokenizer = None     # one per worker process, set by _init_worker


@dataclass(frozen=True)
class ScanProgress:
    """Where a scan stands: shards and bytes done, documents counted, and the time so far."""

    shards_done: int
    shards_total: int
    documents: int
    bytes_done: int
    bytes_total: int
    seconds: float

    @property
    def docs_per_second(self) -> float:
        return self.documents / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left, from the share of bytes done (None before the first shard ends)."""
        if not self.bytes_done:
            return None
        return self.seconds * (self.bytes_total - self.bytes_done) / self.bytes_done

    def line(self) -> str:
        eta = "?" if self.eta_seconds is None else f"{self.eta_seconds:,.0f} s"
        return (f"scan: {self.shards_done}/{self.shards_total} shards, {self.documents:,} documents, "
                f"{self.docs_per_second:,.{1 if self.docs_per_second < 10 else 0}f} documents/s, ETA {eta}")


def tokenizer_identity(tokenizer) -> dict:
    """What a profile records about a tokenizer: name, vocabulary hash, chat-template hash."""
    if tokenizer is byte_tokenizer:
        return {"tokenizer": "bytes", "vocab_hash": "utf-8 bytes", "chat_template_hash": None}
    return {"tokenizer": str(getattr(tokenizer, "name", type(tokenizer).__name__)),
            "vocab_hash": getattr(tokenizer, "vocab_hash", None),
            "chat_template_hash": getattr(tokenizer, "chat_template_hash", None)}


def plan_scan(inputs, kind: str | None = None, column: str | None = None) -> tuple[list[sources.Source], str, list[str]]:
    """The shards, the record kind and the columns to read; refuses shards of mixed schemas.

    ``column`` reads that one column (as text, lengths or token-id lists, by its name or ``kind``).
    """
    shards = sources.find_shards(inputs)
    first: tuple[sources.Source, list[str]] | None = None
    first_kind, columns = "", []
    for shard in shards:
        cols = sources.columns(shard)
        if column is not None:
            if column not in cols:
                raise InputError(f"{shard.name} has no column {sources.display(column)!r}; available columns: "
                                 f"{cols[:20]}. Pass one of them as --column")
            cols = [column]
        k = detect_kind(cols, kind, name=shard.name)
        if first is None:
            first, first_kind, columns = (shard, cols), k, kind_columns(k, cols)
        elif k != first_kind or not all(c in cols for c in columns):
            raise InputError(f"mixed schemas: {shard.name} has columns {cols} ({k}) but "
                             f"{first[0].name} has {first[1]} ({first_kind}); every shard must hold the same kind of records")
    return shards, first_kind, columns


def _batches(shard: sources.Source, kind: str, columns: list[str], tokenizer, budget: ReadBudget):
    """``(lengths, trained or None, where, kind seen)`` per batch of a shard, read through the one reader.

    One-column kinds go through ``columns.column_batches`` (what ``report FILE`` reads too), so a
    value is a length or a text by one rule; chats and prompt/completion pairs are counted here
    in slices of ``BATCH_ROWS`` records.
    """
    if kind in ONE_COLUMN_KINDS:
        for seen, values, where in column_batches(shard, columns[0], budget=budget):
            lengths = values if seen == "lengths" else token_lengths(values, tokenizer, where)
            yield lengths, None, where, seen
        return
    from packing_core.data.chats import chat_lengths  # records of several columns: Arrow batches
    from packing_core.data.records import prompt_completion_lengths

    for batch, where in sources.read_batches(shard, columns, budget):
        for start in range(0, batch.num_rows, BATCH_ROWS):
            part = batch.slice(start, BATCH_ROWS)
            named = (lambda i, o=start, w=where: f"{shard.name} {w(o + i)}")
            if kind == "messages":
                lengths, loss = chat_lengths(part.column(0), tokenizer, named)
            else:
                lengths, loss = prompt_completion_lengths(part.column("prompt"), part.column("completion"), tokenizer,
                                                          named)
            yield lengths, loss, (lambda i, o=start, w=where: w(o + i)), kind


def scan_shard(shard: sources.Source, kind: str, columns: list[str], tokenizer, cap: int | None = None,
               budget: ReadBudget | None = None) -> LengthProfile:
    """Count one shard within ``budget`` (default: the environment's): its lengths (and loss tokens) as a profile.

    A one-column kind records what its values turned out to be: ``lengths`` (counted, no
    tokenizer) or ``text``.
    """
    start = time.perf_counter()
    parts, losses, seen = [], [], kind
    examples: list[OverCap] = []
    for lengths, loss, where, batch_kind in _batches(shard, kind, columns, tokenizer, budget or read_budget()):
        seen, keep = batch_kind, lengths > 0
        if cap is not None and len(examples) < MAX_OVER_CAP_EXAMPLES:
            for i in np.flatnonzero(keep & (lengths > cap))[: MAX_OVER_CAP_EXAMPLES - len(examples)].tolist():
                examples.append(OverCap(shard.label, f"{shard.name} {where(i)}", int(lengths[i])))
        parts.append(lengths[keep])
        if loss is not None:
            losses.append(loss[keep])
    lengths = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    loss = np.concatenate(losses) if losses else None
    counted = seen in COUNTED_KINDS     # lengths as stored: no tokenizer was involved
    identity = {"tokenizer": "none", "vocab_hash": None, "chat_template_hash": None} if counted \
        else tokenizer_identity(tokenizer)
    profile = LengthProfile.from_lengths(lengths, loss, kind="lengths" if counted else seen, **identity,
                                         sources=(SourceCount(shard.label, int(len(lengths))),), cap=cap,
                                         over_cap_examples=tuple(examples))
    return dataclasses.replace(profile, scan_seconds=time.perf_counter() - start)


def _init_worker(load_tokenizer: Callable) -> None:
    """Load the worker's tokenizer; a failure is kept and raised by the first task, as one line.

    An exception escaping an initializer breaks the whole pool, and the parent then sees
    only ``BrokenProcessPool``, which reads like a crash (or running out of memory).
    """
    global _worker_tokenizer
    os.environ["TOKENIZERS_PARALLELISM"] = "false"   # one thread per worker: the workers are the parallelism
    try:
        _worker_tokenizer = load_tokenizer()
    except Exception as e:  # noqa: BLE001  (whatever the loader raised, the task names it)
        first = (str(e).strip().splitlines() or [""])[0][:300]
        # the user's tokenizer (a folder, a spec) did not load: input to fix, whatever the library raised
        _worker_tokenizer = InputError(first if isinstance(e, ValueError) else
                                       f"could not load the tokenizer ({type(e).__name__}: {first})")


def _scan_task(shard: sources.Source, kind: str, columns: list[str], cap: int | None,
               budget: ReadBudget) -> LengthProfile:
    if isinstance(_worker_tokenizer, InputError):
        raise _worker_tokenizer
    return scan_shard(shard, kind, columns, _worker_tokenizer, cap, budget)


def _no_tokenizer():
    return byte_tokenizer   # counted kinds tokenise nothing: the cheapest stand-in


def scan(inputs, load_tokenizer: Callable, *, kind: str | None = None, column: str | None = None,
         engine: str = "local", workers: int = 2, cap: int | None = None, ray_address: str | None = None,
         progress: Callable[[ScanProgress], None] | None = None, budget: ReadBudget | None = None) -> LengthProfile:
    """Scan files, folders or globs into one profile, shard by shard on ``workers`` processes.

    ``load_tokenizer`` is a picklable zero-argument callable returning the tokenizer.
    ``kind`` overrides the detected record kind, ``column`` picks one column to read.
    ``progress`` is called after each shard. A failed shard raises an ``InputError`` that
    names it, and nothing is returned: a partial profile never looks complete. Each shard
    is read within ``budget`` (default: the ``PACKING_LAB_MAX_*`` settings), on every engine.
    """
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    workers = as_workers(workers)
    if cap is not None:
        whole_number(cap, "cap", hint="e.g. the context, 2048")
    start = time.perf_counter()
    budget = budget or read_budget()   # resolved here, so that every worker and actor reads within the same one
    files, kind, columns = plan_scan(inputs, kind, column)
    if kind in COUNTED_KINDS:
        load_tokenizer = _no_tokenizer
    # fewer files than tasks to go round: a big file becomes ranges (Parquet row groups, lines of JSONL or text)
    pieces = -(-TASKS_PER_WORKER * workers // len(files)) if workers and len(files) < TASKS_PER_WORKER * workers else 1
    split = [sources.split_shard(f, pieces) for f in files]
    shards = [piece for parts in split for piece in parts]
    done: dict[int, LengthProfile] = {}     # task index -> its counts (a file given twice counts twice)
    total_bytes = sum(s.size for s in shards)
    bytes_done = documents = 0

    def finished(index: int, profile: LengthProfile) -> None:
        nonlocal bytes_done, documents
        done[index] = profile
        bytes_done += shards[index].size
        documents += profile.documents
        if progress is not None:
            progress(ScanProgress(len(done), len(shards), documents, bytes_done, total_bytes,
                                  time.perf_counter() - start))

    if engine == "ray":
        from packing_core.data.scan_ray import scan_ray

        scan_ray(shards, kind, columns, load_tokenizer, scan_shard, cap, max(1, workers), ray_address, finished, budget)
    elif workers == 0:
        tokenizer = load_tokenizer()
        for i, shard in enumerate(shards):
            finished(i, scan_shard(shard, kind, columns, tokenizer, cap, budget))
    else:
        _scan_local(shards, kind, columns, load_tokenizer, cap, workers, finished, budget)
    ordered, i = [], 0          # file order, whatever order the tasks finished in
    for f, parts in zip(files, split):
        profile = done[i].merge(*(done[j] for j in range(i + 1, i + len(parts))))
        ordered.append(dataclasses.replace(profile, sources=(SourceCount(f.label, profile.documents),)))
        i += len(parts)
    merged = ordered[0].merge(*ordered[1:])
    if merged.documents == 0:   # blank lines, a header alone, empty files: nothing to plan
        where = files[0].name if len(files) == 1 else f"{len(files)} files ({files[0].name}, ...)"
        raise InputError(f"no documents found in {where} (column {', '.join(map(repr, columns))}); "
                         "check that the file holds records")
    return dataclasses.replace(merged, scan_seconds=time.perf_counter() - start)


def _start_method(load_tokenizer: Callable) -> str:
    """``fork`` where it is safe: Linux, and this process runs one Python thread, so that no lock is
    held mid-flight; the tokenizer is loaded here first (without tokenising anything, so the Rust
    tokenizer has started no threads) and pyarrow imports pandas on its first conversion, so every
    worker starts with both in hand (datasets' ``map(num_proc=...)`` forks too). Elsewhere ``spawn``:
    each worker a fresh interpreter, always safe, and about 1.5 s of start-up each on 2 cores.
    """
    if sys.platform != "linux" or threading.active_count() != 1:
        return "spawn"
    try:
        load_tokenizer()   # cached by load_tokenizer: the workers inherit it
    except Exception:  # noqa: BLE001  (each worker loads again and reports the failure as one line)
        pass
    if importlib.util.find_spec("pyarrow") is not None:
        import pyarrow as pa

        pa.array(np.zeros(1))
    return "fork"


def _scan_local(shards, kind, columns, load_tokenizer, cap, workers, finished, budget) -> None:
    context = multiprocessing.get_context(_start_method(load_tokenizer))
    pool = cf.ProcessPoolExecutor(max_workers=min(workers, len(shards)), mp_context=context,
                                  initializer=_init_worker, initargs=(load_tokenizer,))
    try:
        futures = {pool.submit(_scan_task, s, kind, columns, cap, budget): i for i, s in enumerate(shards)}
        for future in cf.as_completed(futures):
            index = futures[future]
            shard = shards[index]
            try:
                profile = future.result()
            except InputError:
                raise
            except cf.process.BrokenProcessPool as e:
                raise InputError(f"a scan worker died while reading {shard.name} ({e}); the shard may be "
                                 "damaged, or the machine ran out of memory: try fewer workers") from None
            except Exception as e:  # noqa: BLE001  (anything a worker raised: one line that names the shard)
                raise InputError(f"{shard.name} failed ({type(e).__name__}: {sources.display(str(e)[:300])})") from None
            finished(index, profile)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
