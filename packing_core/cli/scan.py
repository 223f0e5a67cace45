"""``scan``: files, folders or globs of shards into a length profile (JSON), by local processes or Ray."""
from __future__ import annotations

import argparse

from packing_core._validate import MAX_LENGTH, as_workers
from packing_core.cli.common import bounded, check_tokenizer, count, escaped, tokenizer_loader
from packing_core.data import INPUT_SUFFIXES, RECORD_KINDS
from packing_core.models.registry import PRETRAINED
from packing_core.models.tokenizers import TOKENIZER_CHOICES

NAME = "scan"
HELP = "scan files, folders or globs of shards into a length profile (JSON)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help=f"files, folders (also save_to_disk) or quoted globs of {' '.join(INPUT_SUFFIXES)} files")
    p.add_argument("--out", required=True, help="the profile to write (atomically: complete or not at all)")
    p.add_argument("--tokenizer", default=PRETRAINED,
                   help=f"{', '.join(TOKENIZER_CHOICES)}, or a local Hugging Face tokenizer folder (default {PRETRAINED})")
    p.add_argument("--kind", choices=RECORD_KINDS, help="override the detected kind")
    p.add_argument("--column", help="read this one column: lengths (integers), token-id lists or text")
    p.add_argument("--engine", default="local", choices=("local", "ray"))
    p.add_argument("--workers", type=bounded(as_workers), default=2,
                   help="worker processes (local) or actors (ray), 0 to 8 (default 2)")
    p.add_argument("--ray-address", help="join a Ray cluster: auto or HOST:PORT (default: start a local Ray)")
    p.add_argument("--cap", type=count("the cap", maximum=MAX_LENGTH, hint="e.g. the context, 2048"),
                   help="name the documents longer than this many tokens (e.g. the context)")


def run(args, out, err) -> int:
    from packing_core.data.files import check_output
    from packing_core.data.scan import scan
    from packing_core.data.sources import find_shards

    check_tokenizer(args.tokenizer)
    # before an hour of scanning: never an input (every file a glob or a folder names), a device or a folder
    inputs = [*args.inputs, *sorted({str(shard.path) for shard in find_shards(args.inputs)})]
    check_output(args.out, inputs)
    last = [0.0]

    def progress(p):
        if p.shards_done == p.shards_total or p.seconds - last[0] >= 1.0:
            last[0] = p.seconds
            err.write(p.line() + "\n")
            err.flush()

    profile = scan(args.inputs, tokenizer_loader(args.tokenizer), kind=args.kind, column=args.column,
                   engine=args.engine, workers=args.workers, cap=args.cap, ray_address=args.ray_address,
                   progress=progress)
    profile.save(args.out, inputs=inputs)
    shards = len(profile.sources)
    out.write(f"wrote {escaped(args.out)}: {profile.documents:,} documents, {profile.tokens:,} tokens ({profile.kind}, "
              f"tokenizer {profile.tokenizer}) from {shards:,} shard{'' if shards == 1 else 's'} "
              f"in {profile.scan_seconds:.1f} s\n")
    return 0
