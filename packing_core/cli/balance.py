"""``balance``: a strategy's rows over data-parallel ranks and micro-batches, one optimizer step at a time
(ranks x micro-batches x rows per micro-batch, drawn in turn from the shuffled rows), before and after
balancing each step by attention cost, each rank's step FLOPs for a model shape, and which cost to balance
by (``analysis.balance_report.step_balance``, with ``fit=True`` as the Dataset explorer uses it: too few
rows for one step are shown on a step they fill, and the report says so)."""
from __future__ import annotations

import argparse

from packing_core._validate import InputError
from packing_core.cli.common import (
    NO_DATA,
    add_data_arguments,
    check_strategy,
    check_tokenizer,
    count,
    dump_json,
    has_data,
    load_lengths,
    load_profile,
)

NAME = "balance"
HELP = ("a strategy's rows over data-parallel ranks and micro-batches, step by step: attention and step cost, "
        "before and after balancing each step")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_data_arguments(p, strategy="bfd")
    from packing_core.packing.balance import MAX_RANKS

    p.add_argument("--ranks", type=count("ranks", maximum=MAX_RANKS, hint="the data-parallel world size, e.g. 8"),
                   required=True, help="data-parallel ranks (the world size), e.g. 8")
    p.add_argument("--micro-batches", type=count("micro_batches", maximum=MAX_RANKS, hint="try 4"), default=1,
                   help="micro-batches per rank (default 1)")
    p.add_argument("--rows-per-micro-batch", type=count("rows_per_micro_batch", maximum=MAX_RANKS, hint="try 1"),
                   default=1, help="rows in each micro-batch, the per-device batch (default 1); a step holds ranks x "
                        "micro-batches x this many rows, drawn in turn from the shuffled rows (--seed)")
    p.add_argument("--model-shape", default="SmolLM2-135M",
                   help="the model shape whose step FLOPs are counted (6N per token + attention): "
                        "SmolLM2-135M (default) or 7B")
    p.add_argument("--format", default="table", choices=("table", "json"))


def run(args, out, err) -> int:
    from packing_core.analysis.balance_report import format_balance, step_balance
    from packing_core.analysis.costs import model_shape
    from packing_core.analysis.profile_report import profile_sample
    from packing_core.packing.strategies import make_plan

    if not has_data(args):
        raise InputError(NO_DATA)
    check_strategy(args.strategy, allow_all=False)
    check_tokenizer(args.tokenizer)
    shape = model_shape(getattr(args, "model_shape", "SmolLM2-135M"))   # `report --ranks` has no such flag
    if args.profile is not None or args.file:   # a profile has counts, not rows: balance the rows of a seeded sample
        lengths = profile_sample(load_profile(args), args.seed)
        label = f"{args.strategy} rows of a sample of {len(lengths):,} documents (seed {args.seed})"
    else:
        lengths = load_lengths(args)
        label = f"{args.strategy} rows"
    plan = make_plan(lengths, args.context, args.strategy, overlong=args.overlong, batch_size=args.batch_size,
                     seed=args.seed)
    steps = step_balance(plan, args.ranks, args.micro_batches, args.rows_per_micro_batch, shape=shape,
                         seed=args.seed, fit=True)
    report = steps.by_attention.first
    if args.format == "json":
        dump_json({"strategy": args.strategy, "basis": label, **steps.by_attention.to_dict(),
                   "step": steps.to_dict()}, out)
    else:
        out.write(format_balance(report, label, steps) + "\n")
    return 0
