"""Attention throughput, padded vs packed, on the support-tickets lengths.

    python benchmarks/attention_speed.py                 # CPU, float32, table
    python benchmarks/attention_speed.py --tile 64       # flex with 64-token tiles
    python benchmarks/attention_speed.py --device cuda --json
    python benchmarks/attention_speed.py --breakdown      # where segments' CPU time goes
"""
from __future__ import annotations

import argparse
import json
import sys

from packing_core.attention import available_backends
from packing_lab.bench import PACKED_BACKENDS, format_benchmark, format_breakdown, run_benchmark, segments_breakdown


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=256, help="documents taken from the dataset")
    p.add_argument("--dataset", default="support-tickets")
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3, help="rounds; the best of each is kept")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="auto", help="auto (bfloat16 on CUDA, float32 on CPU), "
                                                   "float32, bfloat16, float16")
    p.add_argument("--backends", nargs="+", default=None,
                   help="packed backends to time (default: every one that runs here, flex included)")
    p.add_argument("--tile", type=int, default=128, help="flex's tile (block) size in tokens")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--padded-layout", choices=("model", "contiguous"), default="model",
                   help="memory layout of the padded q, k, v: model = [B, L, H, D] viewed as "
                        "[B, H, L, D], as a model's projection leaves them (the packed side "
                        "is token-major too); contiguous = head-major, a copy no model makes, "
                        "and faster for SDPA")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--breakdown", action="store_true",
                   help="CPU only: time the segments backend stage by stage instead")
    args = p.parse_args(argv)
    if args.breakdown:
        if args.device != "cpu" or args.dtype not in ("auto", "float32"):
            print("error: --breakdown measures the CPU float32 path: drop --device/--dtype",
                  file=sys.stderr)
            return 2
        try:
            result = segments_breakdown(docs=args.docs, context=args.context, heads=args.heads,
                                        head_dim=args.head_dim, repeats=args.repeats,
                                        dataset=args.dataset, seed=args.seed,
                                        padded_layout=args.padded_layout)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(result.to_dict(), indent=2) if args.json else format_breakdown(result))
        return 0
    try:
        backends = args.backends
        if backends is None:
            usable = available_backends(args.device)
            backends = [b for b in PACKED_BACKENDS if b in usable]
        result = run_benchmark(docs=args.docs, context=args.context, heads=args.heads,
                               head_dim=args.head_dim, repeats=args.repeats, device=args.device,
                               dtype=args.dtype, backends=backends, dataset=args.dataset,
                               seed=args.seed, padded_layout=args.padded_layout, tile=args.tile)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result.to_dict(), indent=2) if args.json else format_benchmark(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
