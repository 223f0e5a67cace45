"""``report``: utilisation and cost of every padding and packing strategy, as a table or JSON.

``--lengths`` and ``--synthetic`` are planned in their order; FILE and ``--profile`` become a
length profile and are planned from its counts (order-dependent strategies on a seeded sample).
Both tables come from ``analysis.format_strategy_table``, the JSON has one shape
(``analysis.report_dict``). ``--ranks`` is the ``balance`` command's (deprecated here).
"""
from __future__ import annotations

import argparse

from packing_core._validate import InputError
from packing_core.cli.common import (
    NO_DATA,
    add_data_arguments,
    check_strategy,
    check_tokenizer,
    deprecated,
    dump_json,
    has_data,
    load_lengths,
    load_profile,
)

NAME = "report"
HELP = "utilisation and cost of every padding and packing strategy"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_data_arguments(p, strategy="all")
    p.add_argument("--format", default="table", choices=("table", "json"))
    # deprecated for one release: `balance` is the command
    p.add_argument("--ranks", type=int, help=argparse.SUPPRESS)
    p.add_argument("--micro-batches", type=int, default=1, help=argparse.SUPPRESS)


def run(args, out, err) -> int:
    if args.ranks is not None:
        from packing_core.cli import balance

        deprecated(err, "`report --ranks`", "`python -m packing_core balance` with the same arguments")
        args.strategy = "bfd" if args.strategy == "all" else args.strategy
        return balance.run(args, out, err)
    if not has_data(args):
        raise InputError(NO_DATA)
    check_strategy(args.strategy, allow_all=True)
    check_tokenizer(args.tokenizer)
    strategies = None if args.strategy == "all" else (args.strategy,)
    if args.file or args.profile is not None:
        return _profile_report(args, strategies, out)
    return _lengths_report(args, strategies, out)


def _lengths_report(args, strategies, out) -> int:
    from packing_core.analysis.columns import format_strategy_table
    from packing_core.analysis.profile_report import REPORT_VERSION, headline
    from packing_core.analysis.tables import strategy_table
    from packing_core.packing.registry import STRATEGIES

    lengths = load_lengths(args)
    rows = strategy_table(lengths, args.context, strategies or tuple(STRATEGIES), overlong=args.overlong,
                          batch_size=args.batch_size, seed=args.seed)
    try:
        head = headline(rows)
    except ValueError:      # one strategy: nothing to compare
        head = None
    if args.format == "json":   # the shape of report FILE (analysis.report_dict), without a profile
        dump_json({"report_version": REPORT_VERSION, "context": args.context,
                   "profile": {"kind": "lengths", "documents": int(len(lengths)), "tokens": int(lengths.sum())},
                   "loss_share": 1.0, "headline": head and head.to_dict(),
                   "strategies": [r.metrics.to_dict() for r in rows if r.metrics is not None]}, out)
        return 0
    out.write(f"{len(lengths):,} documents, {int(lengths.sum()):,} tokens, context {args.context}\n")
    out.write(f"{head.sentence}\n\n" if head else "\n")
    out.write(format_strategy_table(rows) + "\n")
    return 0


def _same_tokenizer(profile, spec: str) -> None:
    """A --tokenizer named beside a profile must be the one that counted it: its numbers are that tokenizer's."""
    if spec == "auto" or profile.tokenizer == "none":     # nothing named, or lengths counted by no tokenizer
        return
    from packing_core.data.scan import tokenizer_identity
    from packing_core.models.tokenizers import load_tokenizer

    given = tokenizer_identity(load_tokenizer(spec))
    same = (given["vocab_hash"] == profile.vocab_hash if profile.vocab_hash and given["vocab_hash"]
            else given["tokenizer"] == profile.tokenizer)
    if not same:
        raise InputError(f"the profile was counted with the tokenizer {profile.tokenizer!r}, not --tokenizer "
                         f"{spec!r}: its numbers are that tokenizer's; scan the data again with --tokenizer {spec!r}, "
                         "or drop --tokenizer")


def _profile_report(args, strategies, out) -> int:
    from packing_core.analysis.profile_report import format_profile_report, profile_table, report_dict

    profile = load_profile(args)
    _same_tokenizer(profile, args.tokenizer)
    plans = profile_table(profile, args.context, strategies=strategies, overlong=args.overlong,
                          batch_size=args.batch_size, seed=args.seed)
    if args.format == "json":
        dump_json(report_dict(profile, plans, args.context), out)
    else:
        out.write(format_profile_report(profile, plans) + "\n")
    return 0
