"""``verify``: run documents alone and packed in one row on a model, and compare the logits (isolation);
then change the tokens after a cut and confirm the logits before it do not move (causality). Each has
its own verdict; either failing exits 1.

``--backend`` is the lab's own attention (``attention.BACKENDS``); ``--attn-implementation``
is transformers' own (``attention.IMPLEMENTATIONS``), for a model that has it. A run uses one.
"""
from __future__ import annotations

import argparse

from packing_core._validate import InputError
from packing_core.cli.common import dump_json, vet_model
from packing_core.models.registry import DEFAULT_MODEL, PRETRAINED, model_names

NAME = "verify"
HELP = "run documents alone and packed, and compare the logits; then check causality (a later token changed)"


def _backend(name: str) -> str:
    """An argparse type: one of the lab's backends; transformers' own attention goes to --attn-implementation."""
    from packing_core.attention import BACKENDS, IMPLEMENTATIONS

    if name in BACKENDS:
        return name
    if name in IMPLEMENTATIONS:
        raise argparse.ArgumentTypeError(f"it takes the lab's own attention ({', '.join(BACKENDS)}); {name!r} is "
                                         f"transformers' own: pass --attn-implementation {name}")
    raise argparse.ArgumentTypeError(f"{name[:40]!r} is not one of the lab's backends: choose one of {', '.join(BACKENDS)}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from packing_core.attention import BACKENDS, IMPLEMENTATIONS  # torch: only when this command runs

    with_texts = ", ".join(model_names(tokenizer=True))
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"{', '.join(model_names())}, or the path of a local HF causal-LM folder (safetensors)")
    p.add_argument("--mask", default="on", choices=("on", "off"), help="block-diagonal mask on, or one causal triangle")
    p.add_argument("--positions", default="reset", choices=("reset", "continuous"))
    p.add_argument("--backend", default="segments", type=_backend, metavar="BACKEND",
                   help=f"the lab's own attention: {', '.join(BACKENDS)} (varlen needs CUDA; default segments)")
    p.add_argument("--attn-implementation", choices=IMPLEMENTATIONS, metavar="NAME",
                   help=f"instead, transformers' own attention ({', '.join(IMPLEMENTATIONS)}), for {with_texts} or "
                        "a model folder")
    p.add_argument("--use-cache", action="store_true",
                   help=f"{PRETRAINED} with --attn-implementation: leave use_cache on, as transformers does by "
                        "default (it leaks)")
    p.add_argument("--text", action="append", metavar="TEXT",
                   help=f"a document (repeat: 2 to 4); {with_texts} or a model folder with a tokenizer")
    p.add_argument("--texts", metavar="FILE", help="UTF-8 file, one document per line (2 to 4 lines)")
    p.add_argument("--causal", default="on", choices=("on", "off"),
                   help="off: the lab's tiny models attend without the causal flag, as a varlen kernel does by "
                        "default; alone vs packed still agree, the causality check sees it")
    p.add_argument("--format", default="table", choices=("table", "json"))


def run(args, out, err) -> int:
    vet_model(args.model)
    from packing_core.verify import verify_model
    from packing_core.verify.texts import read_texts_file

    backend, implementation = args.backend, args.attn_implementation
    texts = args.text
    if args.texts is not None:
        if texts:
            raise InputError("give --text or --texts FILE, not both")
        texts = read_texts_file(args.texts)
    report = verify_model(args.model, mask=args.mask, positions=args.positions, backend=backend,
                          attn_implementation=implementation, use_cache=args.use_cache, texts=texts,
                          causal=args.causal == "on")
    if args.format == "json":
        dump_json(report.to_dict(), out)
    else:
        out.write(report.format_table() + "\n")
    return 0 if report.equivalent and not report.future_visible else 1
