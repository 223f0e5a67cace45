"""``check``: a trainer's batch file (safetensors, ``.npz``, JSON; never a pickle), judged for the attention
implementation that will read it; ``--attn-implementation all`` judges it for each, computing the
implementation-free half once (``check.check_all_implementations``); ``--model`` also runs it."""
from __future__ import annotations

import argparse

from packing_core._validate import InputError
from packing_core.cli.common import dump_json, vet_model
from packing_core.models.registry import is_model_path, model_names

NAME = "check"
HELP = "check a trainer's batch file (safetensors, .npz, JSON; never pickle)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from packing_core.attention import IMPLEMENTATIONS

    with_texts = ", ".join(model_names(tokenizer=True))
    p.add_argument("file", help="the batch: input_ids, labels, position_ids, attention_mask, cu_seq_lens_q/k")
    p.add_argument("--model", help=f"also run it: {with_texts} or a local HF model folder (safetensors)")
    p.add_argument("--attn-implementation", default="sdpa", choices=(*IMPLEMENTATIONS, "all"),
                   help="the attention that will read the batch (default sdpa); all: a verdict for each")
    p.add_argument("--tokenizer", help=f"{with_texts} or a tokenizer folder: its EOS id ends documents (with --model: "
                                       "the model folder's)")
    p.add_argument("--eos-id", type=int, action="append", metavar="N", help="a token id that ends a document (repeat)")
    p.add_argument("--labels", default="auto", choices=("unshifted", "shifted", "auto"),
                   help="unshifted: transformers' labels (the model shifts); shifted: targets (torchtune recipes, "
                        "Megatron, nanoGPT); auto decides and says so")
    p.add_argument("--allow-cross-document", action="store_true",
                   help="reading across documents is deliberate (pretraining streams): leaks become notes")
    p.add_argument("--use-cache", action="store_true", help="the forward call uses a cache (use_cache=True)")
    p.add_argument("--strict", action="store_true", help="warnings exit 1 too")
    p.add_argument("--format", default="table", choices=("table", "json"))


def special_ids(args) -> tuple[int, ...]:
    """EOS ids from --eos-id, --tokenizer, or the --model folder's tokenizer.

    Only the EOS id: chat templates open every turn with the BOS-like token, so it would split
    one conversation into turns. Where the EOS id also ends every turn, give --eos-id instead.
    """
    eos = list(args.eos_id or ())
    spec = args.tokenizer or args.model
    if not args.tokenizer and args.model and is_model_path(args.model):
        from pathlib import Path

        folder = Path(args.model).expanduser()
        if not any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
            spec = None      # a model folder without a tokenizer: no EOS evidence (say --eos-id to give one)
    if spec and not args.eos_id:
        from packing_core.models.tokenizers import load_tokenizer

        tok = load_tokenizer(spec)
        value = getattr(getattr(tok, "hf", tok), "eos_token_id", None)
        if not isinstance(value, int):
            raise InputError(f"the tokenizer {spec} has no EOS id: give --eos-id N")
        eos.append(value)
    return tuple(dict.fromkeys(eos))


def run(args, out, err) -> int:
    vet_model(args.model)
    from packing_core.check import check_all_implementations, check_hf_batch, load_batch_file

    batch = load_batch_file(args.file)
    options = dict(use_cache=args.use_cache, eos_ids=special_ids(args), labels=args.labels,
                   allow_cross_document=args.allow_cross_document)
    every = args.attn_implementation == "all"
    checks = (list(check_all_implementations(batch, **options)) if every
              else [check_hf_batch(batch, args.attn_implementation, compare=True, **options)])
    verdict = None
    if args.model is not None:
        from packing_core.verify import load_causal_lm, run_hf_batch

        model, _ = load_causal_lm(args.model)
        if not every:
            model.config._attn_implementation = args.attn_implementation
        verdict = run_hf_batch(model, checks[0], model_name=args.model, use_cache=args.use_cache)
    if args.format == "json":
        dump_json({"checks": [c.to_dict() for c in checks], "model_run": verdict and verdict.to_dict()}, out)
    else:
        if len(checks) == 1:
            out.write(checks[0].format_table() + "\n")
        else:
            out.write("\n".join(c.verdict for c in checks) + "\n\n")
            out.write("\n\n".join(c.format_table() for c in checks if not c.sound or c.warnings) + "\n")
        if verdict is not None:
            out.write("\n" + verdict.format_table() + "\n")
    code = max(c.exit_code(args.strict) for c in checks)
    return 1 if code or (verdict is not None and verdict.leaks) else 0
