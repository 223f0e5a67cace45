"""Check a context-parallel rank's batch, or every rank's, for its CP size and scheme.

A rank's batch file holds what a trainer's rank holds (:meth:`packing_core.parallel.rank.RankBatch.to_file`
writes one): ``input_ids``, ``position_ids``, Megatron's shifted ``labels``, NeMo Automodel's
``padding_mask`` (True on a pad), the batch's ``cu_seqlens`` and ``cu_seqlens_padded`` (every rank
carries the global ones), its own ``cu_seqlens_rank`` and ``cu_seqlens_padded_rank``, and the
``pad_between_seqs`` flag given to the kernel; any may be missing, and each finding needs only what it
reads. What is wrong is named from the one table (:mod:`.rules`):

- ``cp_document_not_padded``: a document (zigzag-document) or row is no multiple of 2·CP (N under contiguous);
- ``cp_unpadded_offsets``: the kernel reads real offsets where padded ones are needed;
- ``cp_interior_padding_as_tail``: a rank's offsets take its first n_real slots as its real tokens while
  pads sit between them;
- ``cp_chunks_not_the_scheme``: the positions a rank holds are not the chunks its scheme gives it;
- over every rank's files, put back together: ``target_is_not_the_next_token`` and ``cu_seq_lens_malformed``.

>>> from packing_core.batch.packed import PackedBatch
>>> from packing_core.parallel.split import split_batch
>>> s = split_batch(PackedBatch.from_documents([[5] * 7, [6] * 5], 16, "next-fit"), 2)
>>> check_cp_ranks([r.to_file() for r in s.ranks], 2, "zigzag-document").verdict
'CP 2, zigzag-document, 2 rank(s): SOUND'
>>> unpadded = {**s.ranks[1].to_file(), "cu_seqlens_padded": [0, 7, 12], "cu_seqlens_padded_rank": None}
>>> print(check_rank_batch(unpadded, 2, "zigzag-document").findings[0].detail)  # doctest: +NORMALIZE_WHITESPACE
document 0 has 7 slots, no multiple of 2·CP = 4: the partition divides its offsets by CP (7 // 2 = 3 per rank)
and computes it as 6 tokens (2 document(s) so)
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from packing_core._validate import InputError
from packing_core.check.result import by_severity
from packing_core.check.rules import Finding
from packing_core.parallel.layout import as_cp, as_scheme, chunks_per_unit, pad_multiple, unit_indices


@dataclass(frozen=True)
class CPCheck:
    """What a check of CP rank batches found: the findings, for which CP size, scheme and ranks."""

    cp: int
    scheme: str
    ranks: tuple[int, ...]
    findings: tuple[Finding, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.name for f in self.findings))

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "warning")

    @property
    def sound(self) -> bool:
        return not self.errors

    def exit_code(self, strict: bool = False) -> int:
        return 1 if self.errors or (strict and self.warnings) else 0

    @property
    def verdict(self) -> str:
        head = f"CP {self.cp}, {self.scheme}, {len(self.ranks)} rank(s)"
        if self.sound:
            return f"{head}: SOUND"
        return f"{head}: {len(self.errors)} ERROR(S): {', '.join(dict.fromkeys(f.name for f in self.errors))}"

    def format_table(self) -> str:
        lines = [f"context-parallel batch, ranks {list(self.ranks)} of {self.cp}, scheme {self.scheme}", self.verdict]
        for f in self.findings:
            lines.append(f"  {f.severity.upper():<7} {f.name}: {f.title}\n    {f.detail}\n    fix: {f.fix}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"cp": self.cp, "scheme": self.scheme, "ranks": list(self.ranks), "sound": self.sound,
                "verdict": self.verdict, "findings": [f.to_dict() for f in self.findings]}


def _ints(batch: Mapping, key: str, *, rows: bool = False) -> np.ndarray | None:
    value = batch.get(key)
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.dtype == bool:
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu" or arr.dtype == object:
        raise InputError(f"{key} must hold whole numbers, got dtype {arr.dtype}: save token ids, positions, labels "
                         "and offsets as int64")
    arr = arr.astype(np.int64)
    if rows:
        arr = arr[None] if arr.ndim == 1 else arr
        if arr.ndim != 2:
            raise InputError(f"{key} has shape {tuple(arr.shape)}: a rank's tensors are [batch, tokens]")
    elif arr.ndim > 1:
        if arr.shape[0] != 1:
            raise InputError(f"{key} has shape {tuple(arr.shape)}: offsets are one list")
        arr = arr[0]
    return arr


@dataclass(frozen=True)
class _Rank:
    """One rank's arrays, read and shape-checked."""

    rank: int
    input_ids: np.ndarray
    position_ids: np.ndarray | None
    labels: np.ndarray | None
    pad: np.ndarray | None
    cu: np.ndarray | None
    cu_padded: np.ndarray | None
    cu_rank: np.ndarray | None
    cu_padded_rank: np.ndarray | None
    pad_between_seqs: int | None
    cp_size: int | None


def read_rank(batch: Mapping, rank: int | None = None, name: str = "the rank's batch") -> _Rank:
    if not isinstance(batch, Mapping):
        raise InputError(f"{name} is a mapping of names to arrays, got {type(batch).__name__}")
    ids = _ints(batch, "input_ids", rows=True)
    if ids is None:
        ids = _ints(batch, "tokens", rows=True)
    if ids is None:
        raise InputError(f"{name} has no input_ids (or Megatron's tokens): write it with RankBatch.to_file()")
    grids = {}
    for key in ("position_ids", "labels", "padding_mask"):
        arr = _ints(batch, key, rows=True)
        if arr is not None and arr.shape != ids.shape:
            raise InputError(f"{name}: {key} has shape {tuple(arr.shape)} but input_ids {tuple(ids.shape)}")
        grids[key] = arr
    scalars = {}
    for key in ("cp_rank", "cp_size", "pad_between_seqs"):
        v = batch.get(key)
        arr = None if v is None else np.asarray(v).reshape(-1)
        if arr is not None and (arr.size != 1 or arr.dtype.kind not in "iub"):
            raise InputError(f"{name}: {key} must be one whole number, got {arr.tolist()[:4]}")
        scalars[key] = None if arr is None else int(arr[0])
    file_rank = scalars["cp_rank"]
    if rank is not None and file_rank is not None and rank != file_rank:
        raise InputError(f"{name} says cp_rank {file_rank}, but rank {rank} was given: drop --cp-rank, the file says it")
    rank = file_rank if rank is None else rank
    if rank is None:
        raise InputError(f"{name} does not say its rank: give --cp-rank (or a cp_rank entry)")
    return _Rank(rank, ids, grids["position_ids"], grids["labels"],
                 None if grids["padding_mask"] is None else grids["padding_mask"] != 0,
                 _ints(batch, "cu_seqlens"), _ints(batch, "cu_seqlens_padded"), _ints(batch, "cu_seqlens_rank"),
                 _ints(batch, "cu_seqlens_padded_rank"), scalars["pad_between_seqs"], scalars["cp_size"])


def _list(a, limit: int = 6) -> str:
    a = list(map(int, a))
    return str(a[:limit])[:-1] + (", ...]" if len(a) > limit else "]")


def _unit_findings(r: _Rank, cp: int, scheme: str, m: int) -> list[Finding]:
    """Offsets: the padded lengths, the flag the kernel reads, this rank's own offsets."""
    out = []
    laid = r.cu_padded if r.cu_padded is not None else r.cu
    if scheme == "zigzag-document" and laid is not None:
        real_part = laid[: np.argmax(laid < 0)] if (laid < 0).any() else laid
        if (laid < 0).any():
            out.append(Finding("cu_seq_lens_malformed", f"cu_seqlens_padded hold sentinel entries "
                               f"{_list(laid[len(real_part):])} after the real offsets {_list(real_part)}: trim them "
                               "before the partition reads them"))
        n = np.diff(real_part)
        bad = np.flatnonzero(n % m)
        if len(bad):
            i = int(bad[0])
            out.append(Finding("cp_document_not_padded", f"document {i} has {int(n[i])} slots, no multiple of "
                               f"{'2·CP = ' if m == 2 * cp else ''}{m}: the partition divides its offsets by CP "
                               f"({int(n[i])} // {cp} = "
                               f"{int(n[i]) // cp} per rank) and computes it as {int(n[i]) // cp * cp} "
                               f"tokens ({len(bad)} document(s) so)"))
        if r.cu is not None and r.cu_padded is None and int(r.input_ids.size) * cp > int(r.cu[-1]) and not len(bad):
            out.append(Finding("cp_unpadded_offsets", f"the ranks hold {int(r.input_ids.size) * cp} slots but "
                               f"cu_seqlens end at {int(r.cu[-1])} and no cu_seqlens_padded say where the pads are"))
        if r.cu is not None and r.cu_padded is not None and r.pad_between_seqs == 0 and (
                len(r.cu) != len(real_part) or (r.cu != real_part).any()):
            i = int(np.argmax(np.diff(r.cu) != n)) if len(r.cu) == len(real_part) else 0
            out.append(Finding("cp_unpadded_offsets", f"pad_between_seqs is 0, yet document {i} holds "
                               f"{int(np.diff(r.cu)[i])} real tokens in {int(n[i])} slots: the False path takes "
                               f"each rank's documents as cu_seqlens // CP = {_list(r.cu // cp)}, not this rank's "
                               "real tokens"))
        if r.cu_padded_rank is not None and (len(r.cu_padded_rank) != len(real_part) or
                                             (r.cu_padded_rank * cp != real_part).any()):
            out.append(Finding("cp_unpadded_offsets", f"this rank's padded offsets {_list(r.cu_padded_rank)} are not "
                               f"cu_seqlens_padded / CP = {_list(real_part // cp)}"))
    elif scheme != "zigzag-document" and r.input_ids.shape[1] * cp % m:
        out.append(Finding("cp_document_not_padded", f"a row of {r.input_ids.shape[1] * cp} slots is no multiple of "
                           f"{m}: the cut gives the ranks unequal shares"))
    return out


def _real_runs(r: _Rank) -> list[Finding]:
    """This rank's real offsets against the pads its padding mask marks."""
    if r.pad is None or r.cu_rank is None or r.cu_padded_rank is None:
        return []
    real = ~r.pad.reshape(-1)
    n = len(real)
    cu = r.cu_padded_rank
    if cu[0] != 0 or cu[-1] != n or (np.diff(cu) < 0).any():
        return [Finding("cp_unpadded_offsets", f"cu_seqlens_padded_rank {_list(cu)} do not lay out this rank's {n} "
                                               "slots")]
    expected = np.r_[0, np.cumsum(np.add.reduceat(real.astype(np.int64), cu[:-1]) * (np.diff(cu) > 0))]
    if len(r.cu_rank) == len(expected) and (r.cu_rank == expected).all():
        return []
    pads_inside = np.flatnonzero(~real[: int(real.nonzero()[0].max()) + 1]) if real.any() else np.zeros(0, int)
    n_real = int(real.sum())
    if len(pads_inside) and int(r.cu_rank[-1]) == n_real and (np.diff(r.cu_rank) >= 0).all():
        dropped = np.flatnonzero(real[n_real:]) + n_real
        return [Finding("cp_interior_padding_as_tail", f"pads at slots {_list(pads_inside)} sit between this rank's "
                        f"real tokens, but its offsets {_list(r.cu_rank)} take the first {n_real} slots as real: pad "
                        f"slot(s) {_list(pads_inside[pads_inside < n_real])} read as tokens, real slot(s) "
                        f"{_list(dropped)} dropped")]
    return [Finding("cp_unpadded_offsets", f"this rank's real offsets {_list(r.cu_rank)} are not the real tokens its "
                                           f"padding mask marks in each run ({_list(expected)})")]


def expected_positions(r: _Rank, cp: int, scheme: str) -> np.ndarray | None:
    """int64 [B, L]: the position in its document the scheme gives each slot (zigzag-document, from its offsets)."""
    if scheme != "zigzag-document":
        return None
    cu = r.cu_padded_rank if r.cu_padded_rank is not None else (
        None if r.cu_padded is None or (r.cu_padded < 0).any() or (r.cu_padded % cp).any() else r.cu_padded // cp)
    if cu is None or cu[-1] != r.input_ids.size or (np.diff(cu) < 0).any() or \
            (np.diff(cu) * cp % chunks_per_unit(cp, scheme)).any():
        return None
    slots = unit_indices(cu[:-1] * cp, np.diff(cu) * cp, cp, scheme, r.rank)
    start = np.repeat(cu[:-1] * cp, np.diff(cu))
    return (slots - start).reshape(r.input_ids.shape)


def _chunk_findings(r: _Rank, cp: int, scheme: str) -> list[Finding]:
    want = expected_positions(r, cp, scheme)
    if want is None or r.position_ids is None:
        return []
    real = np.ones_like(want, bool) if r.pad is None else ~r.pad
    wrong = np.flatnonzero((r.position_ids != want)[real].reshape(-1))
    if not len(wrong):
        return []
    return [Finding("cp_chunks_not_the_scheme", f"rank {r.rank} holds positions {_list(r.position_ids[real][wrong])} "
                    f"where chunks {r.rank} and {2 * cp - 1 - r.rank} of each document put "
                    f"{_list(want[real][wrong])} ({len(wrong)} real slot(s) so)")]


def check_rank_batch(batch: Mapping, cp: int, scheme: str = "zigzag-document", *, rank: int | None = None,
                     tp: int = 1, sequence_parallel: bool = False) -> CPCheck:
    """Every finding one rank's batch shows by itself, for CP ``cp`` under ``scheme``."""
    cp, scheme = as_cp(cp), as_scheme(scheme)
    r = read_rank(batch, rank)
    return _checked([r], cp, scheme, pad_multiple(cp, scheme, tp=tp, sequence_parallel=sequence_parallel))


def _one(r: _Rank, cp: int, scheme: str, m: int) -> list[Finding]:
    if r.cp_size is not None and r.cp_size != cp:
        raise InputError(f"rank {r.rank}'s file says cp_size {r.cp_size}, but CP {cp} was given: check it with "
                         f"--cp {r.cp_size}, or give the files of the split it belongs to")
    if not 0 <= r.rank < cp:
        raise InputError(f"rank {r.rank} is outside CP {cp} (ranks 0 to {cp - 1})")
    return _unit_findings(r, cp, scheme, m) + _real_runs(r) + _chunk_findings(r, cp, scheme)


_SHARED = ("cp_document_not_padded", "cu_seq_lens_malformed")   # about the batch's offsets: every rank says the same


def _checked(ranks: list[_Rank], cp: int, scheme: str, m: int, extra=()) -> CPCheck:
    """Each rank's findings; what several ranks say alike is said once, naming them."""
    said: dict[tuple[str, str], tuple[str, list[int]]] = {}
    for r in ranks:
        for f in _one(r, cp, scheme, m):
            detail, who = said.setdefault((f.name, f.name if f.name in _SHARED else f.detail), (f.detail, []))
            who.append(r.rank)
    findings = []
    for (name, _), (detail, who) in said.items():
        if len(ranks) > 1 and name not in _SHARED:
            detail = f"rank{'s' if len(who) > 1 else ''} {', '.join(map(str, who))}: {detail}"
        findings.append(Finding(name, detail))
    return CPCheck(cp, scheme, tuple(r.rank for r in ranks), by_severity([*findings, *extra]))


def check_cp_ranks(batches: Sequence[Mapping], cp: int, scheme: str = "zigzag-document", *, tp: int = 1,
                   sequence_parallel: bool = False, names: Sequence[str] | None = None) -> CPCheck:
    """Every rank's batch, checked alone and put back together; files that disagree are refused in one line."""
    from packing_core.check.ranks_whole import whole_findings

    cp, scheme = as_cp(cp), as_scheme(scheme)
    names = list(names) if names is not None else [f"batch {i}" for i in range(len(batches))]
    ranks = [read_rank(b, None, n) for b, n in zip(batches, names)]
    got = sorted(r.rank for r in ranks)
    if got != list(range(cp)):
        missing = sorted(set(range(cp)) - set(got))
        twice = sorted({x for x in got if got.count(x) > 1})
        raise InputError(f"CP {cp} needs one file per rank 0 to {cp - 1}; got ranks {got}"
                         + (f", missing {missing}" if missing else "") + (f", rank(s) {twice} twice" if twice else ""))
    pairs = sorted(zip(ranks, names), key=lambda p: p[0].rank)
    ranks = [r for r, _ in pairs]
    by_rank = {r.rank: n for r, n in pairs}
    first = ranks[0]
    for r in ranks[1:]:
        for what, a, b in (("input_ids shape", first.input_ids.shape, r.input_ids.shape),
                           ("cu_seqlens", first.cu, r.cu), ("cu_seqlens_padded", first.cu_padded, r.cu_padded),
                           ("cp_size", first.cp_size, r.cp_size)):
            same = (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
            if not same:
                raise InputError(f"{by_rank[r.rank]} (rank {r.rank}) disagrees with {by_rank[first.rank]} (rank "
                                 f"{first.rank}) on {what}: give the files of one split")
    m = pad_multiple(cp, scheme, tp=tp, sequence_parallel=sequence_parallel)
    return _checked(ranks, cp, scheme, m, extra=whole_findings(ranks, cp, scheme))
