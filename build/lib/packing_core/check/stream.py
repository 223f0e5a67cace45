"""A stream of batches: is packing really on, and how full are the rows?

One batch cannot say whether packing is on at all: "packing was never enabled", a custom
collator that silently turns padding-free off, or a starved packer that leaves most slots
empty all look like ordinary batches one at a time. Across a stream they show: no batch holds
a document boundary, or the rows are mostly pads. :func:`check_stream` reads many batch files
(or a folder) one at a time and keeps a few numbers per batch (:class:`BatchStats`), so ten
thousand files cost ten thousand small records, never ten thousand batches; past
``MAX_STREAM_BATCHES`` files it refuses before reading any. :func:`summarize_checks` does the
same for checks already made (the guard's first batches).

    >>> padded = {"input_ids": [[5, 6, 0, 0], [7, 8, 9, 0]], "attention_mask": [[1, 1, 0, 0], [1, 1, 1, 0]]}
    >>> print(summarize_checks([check_hf_batch(padded)]).line)
    packing is off: no document boundary in any of 1 batch(es) (1.0 document per row); rows are 62.5% real tokens, 62.5% trained
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from packing_core._validate import MAX_STREAM_BATCHES, InputError, limit_hint
from packing_core.check.batch import check_hf_batch
from packing_core.check.files import load_batch_file
from packing_core.check.result import BatchCheck

BATCH_SUFFIXES = (".safetensors", ".npz", ".json")


@dataclass(frozen=True)
class BatchStats:
    """The few numbers a stream keeps of one batch."""

    name: str
    rows: int
    width: int
    real: int            # slots holding real tokens
    trained: int         # positions the loss trains
    documents: int
    boundaries: int      # document starts inside a row (not at its first token)
    most_per_row: int    # the most documents in one row
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def slots(self) -> int:
        return self.rows * self.width

    @property
    def fill(self) -> float:
        return self.real / self.slots if self.slots else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "slots": self.slots, "fill": self.fill}


def batch_stats(check: BatchCheck, name: str = "") -> BatchStats:
    """The numbers of one checked batch."""
    docs = check.documents
    real = docs.real
    rows, width = check.shape
    trained = check.trained if check.trained is not None else real
    starts = docs.starts
    first = np.zeros_like(real)
    first[np.arange(rows), np.argmax(real, 1)] = real.any(1)
    per_row = starts.sum(1)
    return BatchStats(name, rows, width, int(real.sum()), int(trained.sum()), docs.count,
                      int((starts & ~first).sum()), int(per_row.max()) if rows else 0,
                      tuple(f.name for f in check.errors), tuple(f.name for f in check.warnings))


@dataclass(frozen=True)
class StreamSummary:
    """A stream of batches: fill, trained share, whether packing is on, documents per row, the worst batch."""

    batches: tuple[BatchStats, ...]
    eos_known: bool = False          # whether EOS ids were given (without them a wrapped stream shows no boundary)
    refused: tuple[tuple[str, str], ...] = ()   # (file, why) of the files refused as input; the rest summarised

    def refusal(self) -> str:
        """One line naming the refused files (the first with its reason), or "" when none was."""
        if not self.refused:
            return ""
        name, why = self.refused[0]
        more = f" (and {len(self.refused) - 1:,} more)" if len(self.refused) > 1 else ""
        return (f"{len(self.refused):,} of {len(self.refused) + len(self.batches):,} batch files refused{more}; "
                f"first {name}: {why}")

    @property
    def slots(self) -> int:
        return sum(b.slots for b in self.batches)

    @property
    def fill(self) -> float:
        """Share of slots holding real tokens, over the whole stream."""
        return sum(b.real for b in self.batches) / self.slots if self.slots else 0.0

    @property
    def trained_share(self) -> float:
        return sum(b.trained for b in self.batches) / self.slots if self.slots else 0.0

    @property
    def with_boundaries(self) -> int:
        """Batches with at least one document boundary inside a row."""
        return sum(1 for b in self.batches if b.boundaries)

    @property
    def packing_on(self) -> bool:
        return self.with_boundaries > 0

    @property
    def documents_per_row(self) -> float:
        rows = sum(b.rows for b in self.batches)
        return sum(b.documents for b in self.batches) / rows if rows else 0.0

    @property
    def worst(self) -> BatchStats | None:
        """The batch with the most errors, then the emptiest."""
        return min(self.batches, key=lambda b: (-len(b.errors), b.fill), default=None)

    @property
    def line(self) -> str:
        """One line: whether packing is really on, and how full the rows are."""
        n = len(self.batches)
        full = f"rows are {self.fill:.1%} real tokens, {self.trained_share:.1%} trained"
        per_row = f"{self.documents_per_row:.1f} document{'s' if self.documents_per_row != 1 else ''} per row"
        if not n:
            return "no batches"
        if self.packing_on:
            return f"packing is on: {self.with_boundaries} of {n} batch(es) hold document boundaries ({per_row}); {full}"
        hint = "" if self.eos_known or self.fill < 0.999 else \
            " (or documents are separated only by EOS ids: give the tokenizer or --eos-id to see them)"
        return f"packing is off: no document boundary in any of {n} batch(es) ({per_row}){hint}; {full}"

    def to_dict(self) -> dict:
        worst = self.worst
        return {"line": self.line, "batches": len(self.batches), "slots": self.slots, "fill": self.fill,
                "trained_share": self.trained_share, "packing_on": self.packing_on,
                "with_boundaries": self.with_boundaries, "documents_per_row": self.documents_per_row,
                "worst": worst and worst.to_dict(), "per_batch": [b.to_dict() for b in self.batches],
                "refused": [{"file": n, "why": w} for n, w in self.refused]}

    def format_table(self, limit: int = 20) -> str:
        lines = [self.line, f"{'batch':<28} {'rows x width':>13} {'fill':>7} {'trained':>8} {'docs/row':>8}  errors"]
        for b in self.batches[:limit]:
            lines.append(f"{b.name[:28]:<28} {f'{b.rows} x {b.width}':>13} {b.fill:>7.1%} "
                         f"{b.trained / b.slots if b.slots else 0:>8.1%} {b.documents / max(b.rows, 1):>8.1f}  "
                         f"{', '.join(b.errors) or '-'}")
        if len(self.batches) > limit:
            lines.append(f"... {len(self.batches) - limit} more")
        if (w := self.worst) is not None:
            lines.append(f"worst: {w.name} ({len(w.errors)} error(s), {w.fill:.1%} real tokens)")
        if self.refused:
            lines.append(f"refused: {', '.join(n for n, _ in self.refused[:limit])}"
                         + (f" ... {len(self.refused) - limit:,} more" if len(self.refused) > limit else ""))
        return "\n".join(lines)


def summarize_checks(checks: Iterable[BatchCheck], names: Iterable[str] | None = None, *,
                     eos_known: bool = False) -> StreamSummary:
    """The stream summary of checks already made (one per batch)."""
    checks = list(checks)
    names = list(names) if names is not None else [f"batch {i + 1}" for i in range(len(checks))]
    return StreamSummary(tuple(batch_stats(c, n) for c, n in zip(checks, names)), eos_known)


def stream_files(paths) -> list[Path]:
    """Batch files named by ``paths`` (files, or folders read for .safetensors / .npz / .json), sorted per folder.

    Refuses more than ``MAX_STREAM_BATCHES`` before any is read.
    """
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = []
            for f in p.iterdir():          # counted while listed: a folder of millions stops at the limit
                if f.suffix.lower() in BATCH_SUFFIXES and f.is_file():
                    found.append(f)
                    if len(out) + len(found) > MAX_STREAM_BATCHES:
                        break
            found.sort()
            if not found:
                raise InputError(f"no batch files (.safetensors, .npz, .json) in the folder {p.name}")
            out += found
        else:
            out.append(p)
        if len(out) > MAX_STREAM_BATCHES:
            raise InputError(f"more than {MAX_STREAM_BATCHES:,} batch files: a stream check reads at most that many; "
                             "give a sample (every 10th file says as much about fill and packing) "
                             f"({limit_hint('MAX_STREAM_BATCHES')})")
    if not out:
        raise InputError("no batch files given")
    return out


def check_stream(paths, attn_implementation: str = "sdpa", **check) -> StreamSummary:
    """Check every batch file of ``paths`` (files or folders), one at a time, and summarise the stream.

    A file refused as input (a pickle, a JSON bomb) is named in ``refused`` and the others are
    still summarised. ``check`` takes :func:`packing_core.check.batch.check_hf_batch`'s keywords (``eos_ids``,
    ``tokenizer``, ``labels``, ...). Only each batch's numbers are kept.
    """
    files = stream_files(paths)
    stats, refused = [], []
    for f in files:                 # files of a stream: read, checked and dropped one at a time
        try:
            result = check_hf_batch(load_batch_file(f), attn_implementation, compare=False, **check)
        except InputError as e:     # one hostile file among thousands: named, and the rest still summarised
            refused.append((f.name, str(e)))
            continue
        stats.append(batch_stats(result, f.name))
    known = bool(check.get("eos_ids") or check.get("tokenizer"))
    return StreamSummary(tuple(stats), known, tuple(refused))
