"""Print the corpus' table: batch kind x implementation -> (truth from the model, the checker's verdict).

    PYTHONPATH=$PWD python -m tests._trainers.table [--markdown | --grid] [trainer ...]

A row marked ``!=`` is one where the checker disagrees with the model. Flash truths are derived
(transformers' flash path with a reference kernel); ``n/a``: not a reader of that trainer's batches.
The columns are transformers' five implementations (a transformers model given the batch), then
the trainer readers ``megatron`` and ``olmo_core`` (that trainer's own model): see ``tests._trainers``.
``--grid`` prints one markdown row per batch kind, each cell ``truth / checker`` in letters:
S sound, L leak, X a label across a document edge, R the kernel refuses (the model) or cannot
read the batch (the checker), E the checker refuses the input, O another error (e.g.
``cu_seq_lens_malformed``), ``**`` where they disagree.
"""
from __future__ import annotations

import argparse
import os
import time

import pytest

from tests._trainers import MODULES, case, corpus, implementations
from tests._trainers.truth import READERS, agrees, truth, verdict


def rows(names=MODULES):
    for name in names:
        module = corpus(name)
        for kind in module.CASES:
            try:
                c = case(module, kind)
            except pytest.skip.Exception as e:
                yield module.TRAINER, kind, {i: ("skipped", str(e)[:40], None) for i in READERS}
                continue
            cells = {}
            for impl in READERS:
                if impl not in implementations(module):
                    cells[impl] = ("n/a", "", None)
                    continue
                t, v = truth(c, impl), verdict(c, impl, readers=implementations(module))
                cells[impl] = (t.label, v.label, agrees(t, v))
            yield module.TRAINER, kind, cells


def _letters(label: str) -> str:
    label = label.split(" (deliberate")[0]          # targets a deliberate stream allows are no fault
    if label.startswith("SOUND"):
        return "S"
    if label.startswith("INPUT ERROR"):
        return "E"
    out = ("R" if "REFUSED" in label or "kernel_cannot" in label else "") + (
        "L" if any(w in label for w in ("LEAK", "documents_share", "skips", "reads_future", "reads_nothing")) else "") + (
        "X" if "LABELS" in label or "label_crosses" in label else "")
    return out or "O"          # another error (cu_seq_lens_malformed, ...)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trainers", nargs="*")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--grid", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    names = [m for m in MODULES if not args.trainers or any(m.startswith(t) for t in args.trainers)]
    start, total, right = time.time(), 0, 0
    if args.markdown:
        print("| trainer | batch kind | implementation | truth (model) | checker | agree |")
        print("|---|---|---|---|---|---|")
    if args.grid:
        print("| batch kind | " + " | ".join(READERS) + " |")
        print("|---" * (len(READERS) + 1) + "|")
    for trainer, kind, cells in rows(names):
        if args.grid:
            grid = [("n/a" if ok is None else f"{_letters(t)} / {_letters(v)}" + ("" if ok else " **"))
                    for t, v, ok in cells.values()]
            print(f"| {trainer}-{kind} | " + " | ".join(grid) + " |")
        for impl, (t, v, ok) in cells.items():
            if ok is None:
                continue
            total, right = total + 1, right + bool(ok)
            mark = "yes" if ok else "NO"
            if args.grid:
                continue
            if args.markdown:
                print(f"| {trainer} | {kind} | {impl} | {t} | {v} | {mark} |")
            else:
                print(f"{'  ' if ok else '!='} {trainer + '-' + kind:<58} {impl:<18} truth {t:<28} checker {v}")
    print(f"\n{right} of {total} verdicts agree with the model ({time.time() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
