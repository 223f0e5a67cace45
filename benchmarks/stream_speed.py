"""Stream check speed and memory: `check` over a folder of many batch files, one at a time.

    python benchmarks/stream_speed.py                  # 10,000 files of DataCollatorWithFlattening batches
    python benchmarks/stream_speed.py --files 1000 --json

Each file is a real transformers ``DataCollatorWithFlattening`` batch (8 documents of 16 to 256
tokens, saved with ``save_batch_file``). The figure is the wall time of ``check_stream`` over the
folder and its peak traced memory (``tracemalloc``), beside the same over a tenth of the files:
memory must not grow with the number of files, only the few numbers kept per batch.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from transformers import DataCollatorWithFlattening

from packing_core.check import check_stream, save_batch_file
from packing_lab.bench import machine_info


def write(folder: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    collate = DataCollatorWithFlattening(return_tensors="np", return_flash_attn_kwargs=True)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        docs = [{"input_ids": rng.integers(3, 30_000, int(k)).tolist()} for k in rng.integers(16, 256, 8)]
        save_batch_file(collate(docs), folder / f"batch_{i:06d}.safetensors")


def measure(folder: Path) -> tuple[float, int, str]:
    tracemalloc.start()
    start = time.perf_counter()
    summary = check_stream(folder)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak, summary.line


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    machine = machine_info()
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp) / "small", Path(tmp) / "large"
        write(small, max(args.files // 10, 1))
        write(large, args.files)
        measure(small)                                   # imports and first-call caches, once
        small_s, small_peak, _ = measure(small)
        large_s, large_peak, line = measure(large)
    result = {"files": args.files, "seconds": round(large_s, 2), "ms_per_file": round(1000 * large_s / args.files, 2),
              "peak_mib": round(large_peak / 2**20, 1), "peak_mib_tenth": round(small_peak / 2**20, 1),
              "tenth_seconds": round(small_s, 2), "line": line,
              "machine": machine.finished().to_dict()}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for k, v in result.items():
            print(f"{k:>15}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
