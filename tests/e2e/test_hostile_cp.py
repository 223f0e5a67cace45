"""Hostile input on the context-parallel entry points: ``cp``, ``check --cp``, and the library's split and check.

The contract of ``test_hostile.py`` and ``test_hostile_round4.py``, on real processes: bad input is one ``error:``
line and exit 2; good input (CP 1, CP 3) gives the right numbers; no traceback, no hang, the process tree within
1 GiB, nothing overwritten. Rank files are written by the CLI itself (``cp --out``), then damaged with safetensors'
own numpy API; library calls run under ``tests._support.LIBRARY_CALL``.

    class          cases   e.g.
    sizes           10   --cp 0, --cp 1000000, --cp -2, --rows 1000, a split padded past the batch bound
    good             3   --cp 1 and --cp 3 give their tables; CP 1 adds no pad
    rank-files       9   a rank file that disagrees with the others, a missing rank, cp_size 4 under --cp 2
    data-destroyed   1   --out naming an existing file: refused, the file unchanged
    library          3   split_batch(batch, 0), check_cp_ranks of files of two splits
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests._support import HOSTILE_LIMIT_MIB, assert_one_error_line, run_cli_tree

CLASSES = ("sizes", "good", "rank-files", "data-destroyed", "library")
CLASS_COUNTS = {"sizes": 10, "good": 3, "rank-files": 9, "data-destroyed": 1, "library": 3}
CP = ["cp", "--lengths", "7,5,12,3", "--context", "32"]


@dataclass(frozen=True)
class Case:
    id: str
    cls: str
    make: Callable[[Path], list[str]]
    error: str | None = None                        # the one line's pattern; None: a good run
    check: Callable | None = None                   # (result, folder) -> bool, for a good run
    rc: int = 0
    keep: tuple[str, ...] = ()                      # files that must be left as they were
    timeout: float = 120.0


def ranks(folder: Path, cp: int = 2, lengths: str = "7,5,12,3", scheme: str = "zigzag-document") -> Path:
    """A split's rank files, written by the CLI under test."""
    out = folder / f"split-{cp}-{lengths.replace(',', '-')}"
    r = run_cli_tree(["cp", "--lengths", lengths, "--context", "32", "--cp", str(cp), "--scheme", scheme, "--out",
                      str(out)], folder, 120)
    assert r.rc == 0, r.stderr[-500:]
    return out


def damaged(folder: Path, rank: int, **change) -> Path:
    """The split's files with rank ``rank``'s entries changed (None drops one)."""
    import shutil

    import safetensors.numpy

    src = ranks(folder)
    dst = folder / "damaged"
    shutil.copytree(src, dst)
    path = dst / f"rank-{rank}.safetensors"
    arrays = safetensors.numpy.load_file(str(path))
    for k, v in change.items():
        if v is None:
            arrays.pop(k)
        else:
            arrays[k] = np.ascontiguousarray(v)
    safetensors.numpy.save_file(arrays, str(path))
    return dst


def rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines()[2:] if line.strip()]


CASES = [
    Case("cp-zero", "sizes", lambda d: [*CP, "--cp", "0"], r"--cp must be at least 1, got 0"),
    Case("cp-a-million", "sizes", lambda d: [*CP, "--cp", "1000000"], r"--cp must be at most 1,024, got 1,000,000"),
    Case("cp-negative", "sizes", lambda d: [*CP, "--cp=-2"], r"--cp size '-2' is not a whole number"),
    Case("cp-text", "sizes", lambda d: [*CP, "--cp", "two"], r"--cp size 'two' is not a whole number"),
    Case("cp-twenty-digits", "sizes", lambda d: [*CP, "--cp", "9" * 20], r"not a whole number"),
    Case("cp-nine-sizes", "sizes", lambda d: [*CP, "--cp", "1,2,3,4,5,6,7,8,9"], r"1 to 8 comma-separated sizes"),
    Case("tp-zero", "sizes", lambda d: [*CP, "--cp", "2", "--tp", "0", "--sequence-parallel"], r"--tp must be at least 1"),
    Case("rows-a-thousand", "sizes", lambda d: [*CP, "--cp", "2", "--scheme", "contiguous", "--rows", "1000", "--out",
                                                str(d / "o")], r"--rows must be at most 64"),
    Case("split-padded-past-the-bound", "sizes",
         lambda d: ["cp", "--lengths", ",".join(["1"] * 600), "--context", "600", "--cp", "1024", "--scheme",
                    "zigzag-document", "--out", str(d / "o")], r"more than a batch the lab splits may hold"),
    Case("a-document-of-a-trillion-tokens", "sizes", lambda d: ["cp", "--lengths", "1000000000000", "--cp", "2"],
         r"(pieces|split)"),
    Case("cp-one-adds-no-pad", "good", lambda d: [*CP, "--cp", "1"],
         check=lambda r, d: [x[:2] + x[-2:] for x in rows(r.stdout)] ==
         [[s, "1", "0", "0.00%"] for s in ("contiguous", "zigzag-row", "zigzag-document")]),
    Case("cp-three-pads-each-document-to-six", "good", lambda d: [*CP, "--cp", "3", "--scheme", "zigzag-document"],
         check=lambda r, d: rows(r.stdout)[0][5] == str(sum(-n % 6 for n in (7, 5, 12, 3)))),
    Case("cp-three-writes-three-sound-rank-files", "good",
         lambda d: ["check", str(ranks(d, 3)), "--cp", "3"], check=lambda r, d: "SOUND" in r.stdout),
    Case("a-rank-file-that-disagrees", "rank-files",
         lambda d: ["check", str(damaged(d, 1, cu_seqlens=np.array([0, 7, 12, 20, 27], np.int32))), "--cp", "2"],
         r"rank-1\.safetensors \(rank 1\) disagrees with rank-0\.safetensors \(rank 0\) on cu_seqlens"),
    Case("a-rank-file-of-another-split", "rank-files",
         lambda d: ["check", str(ranks(d) / "rank-0.safetensors"), str(ranks(d, 2, "9,9,2") / "rank-1.safetensors"),
                    "--cp", "2"], r"disagrees with .* give the files of one split"),
    Case("a-missing-rank", "rank-files", lambda d: ["check", str(ranks(d) / "rank-0.safetensors"),
                                                    str(ranks(d) / "rank-0.safetensors"), "--cp", "2"],
         r"one file per rank 0 to 1; got ranks \[0, 0\], missing \[1\], rank\(s\) \[0\] twice"),
    Case("files-of-cp-two-checked-as-four", "rank-files", lambda d: ["check", str(ranks(d)), "--cp", "4"],
         r"CP 4 needs one file per rank 0 to 3; got ranks \[0, 1\], missing \[2, 3\]"),
    Case("a-file-saying-cp-four", "rank-files",
         lambda d: ["check", str(damaged(d, 0, cp_size=np.array(4)) / "rank-0.safetensors"), "--cp", "2"],
         r"says cp_size 4, but CP 2 was given"),
    Case("a-rank-outside-the-split", "rank-files",
         lambda d: ["check", str(damaged(d, 1, cp_rank=None) / "rank-1.safetensors"), "--cp", "2", "--cp-rank", "5"],
         r"--cp-rank 5 is outside CP 2"),
    Case("float-token-ids", "rank-files",
         lambda d: ["check", str(damaged(d, 1, input_ids=np.zeros((1, 16), np.float32))), "--cp", "2"],
         r"input_ids must hold whole numbers"),
    Case("labels-of-another-shape", "rank-files",
         lambda d: ["check", str(damaged(d, 0, labels=np.zeros((1, 3), np.int64))), "--cp", "2"],
         r"labels has shape \(1, 3\) but input_ids \(1, 16\)"),
    Case("three-files-for-two-ranks", "rank-files",
         lambda d: ["check", *(str(ranks(d) / f"rank-{r}.safetensors") for r in (0, 1, 1)), "--cp", "2"],
         r"CP 2 has 2 ranks, but 3 files were given"),
    Case("out-naming-an-existing-file", "data-destroyed",
         lambda d: [*CP, "--cp", "2", "--scheme", "contiguous", "--out", str(_file(d, "keep.txt"))],
         r"is a file: name a folder", keep=("keep.txt",)),
    Case("library-split-at-cp-zero", "library",
         lambda d: ["-c", "from packing_core.batch.packed import PackedBatch\n"
                          "from packing_core.parallel import split_batch\n"
                          "split_batch(PackedBatch.from_documents([[1, 2, 3]], 4), 0)"], r"cp must be at least 1"),
    Case("library-split-of-no-batch", "library",
         lambda d: ["-c", "from packing_core.parallel import split_batch\nsplit_batch([[1, 2, 3]], 2)"],
         r"split_batch takes a PackedBatch, got list"),
    Case("library-check-of-two-splits", "library",
         lambda d: ["-c", "from packing_core.batch.packed import PackedBatch\n"
                          "from packing_core.check.ranks import check_cp_ranks\n"
                          "from packing_core.parallel import split_batch\n"
                          "a = split_batch(PackedBatch.from_documents([[1] * 7], 8), 2)\n"
                          "b = split_batch(PackedBatch.from_documents([[1] * 5], 8), 2)\n"
                          "check_cp_ranks([a.ranks[0].to_file(), b.ranks[1].to_file()], 2)"],
         r"disagrees with .* on cu_seqlens"),
]


def _file(folder: Path, name: str) -> Path:
    (folder / name).write_text("not a folder\n")
    return folder / name


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_class_table_matches_the_catalogue():
    assert {c.cls for c in CASES} == set(CLASSES) and len({c.id for c in CASES}) == len(CASES)
    assert {cls: sum(c.cls == cls for c in CASES) for cls in CLASSES} == CLASS_COUNTS
    for cls, n in CLASS_COUNTS.items():
        assert f"    {cls:<14} {n:>3}" in __doc__, cls


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_each_case_keeps_the_contract(case, tmp_path):
    argv = case.make(tmp_path)
    before = {k: _sha(tmp_path / k) for k in case.keep}
    r = run_cli_tree(argv, tmp_path, case.timeout)
    assert r.rc not in (-9, 137), f"killed after {case.timeout:.0f} s: a hang"
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.peak_mib <= HOSTILE_LIMIT_MIB, f"peak RSS {r.peak_mib:,.0f} MiB"
    assert not list(tmp_path.rglob(".*.part")), "a temporary file was left behind"
    for name, digest in before.items():
        assert _sha(tmp_path / name) == digest, f"{name} was changed"
    if case.error is None:
        assert r.rc == case.rc, (r.rc, r.stderr[-1000:])
        assert case.check(r, tmp_path), r.stdout[:2000]
    else:
        assert_one_error_line(r, case.error)
