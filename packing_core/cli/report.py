"""``report``: utilisation and cost of every padding and packing strategy, as a table or JSON.

``--lengths`` and ``--synthetic`` are planned in their order; FILE and ``--profile`` become a
length profile and are planned from its counts (order-dependent strategies on a seeded sample).
Both tables come from ``analysis.format_strategy_table``, the JSON has one shape
(``analysis.report_dict``).

``--time-limit`` bounds ``optimal`` (it stops sooner once its plan is proven optimal);
``--max-docs-per-row`` caps every plan, as a compiled or graph-captured kernel wants, and
reports what the cap costs bfd in rows. A strategy that cuts documents cannot honour a cap: with
every strategy it is left out (and the report says so); named alone, it is refused in one line.
"""
from __future__ import annotations

import argparse
import math
import re

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

NAME = "report"
_SECONDS = re.compile(r"\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*|\s*[+-]?(?:inf(?:inity)?|nan)\s*",
                      re.I | re.A)
HELP = "utilisation and cost of every padding and packing strategy"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_data_arguments(p, strategy="all")
    p.add_argument("--format", default="table", choices=("table", "json"))
    p.add_argument("--time-limit", type=_seconds, default=None, metavar="SECONDS",
                   help="seconds optimal may spend before it returns its best plan and its gap "
                        "(default 5; it stops sooner once the plan is proven optimal)")
    p.add_argument("--max-docs-per-row", type=count("the cap on documents per row"), default=None, metavar="N",
                   help="at most N documents per row in every plan (static shapes for torch.compile and CUDA "
                        "graphs); the report says what the cap costs bfd in rows")


def _seconds(text: str) -> float:
    """An argparse type: a time budget, checked by ``packing.options.as_time_limit`` (one line when bad)."""
    from packing_core.packing.options import as_time_limit

    try:
        if not _SECONDS.fullmatch(text):   # float() reads Arabic-Indic or full-width digits too: ASCII only
            raise ValueError(text)
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the time limit must be a number of seconds, got {text[:40]!r}; try 5") from None
    try:
        return as_time_limit(value if math.isfinite(value) else text, "the time limit")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _plan_args(args, strategies):
    """(strategies to plan, plan options, a note on what was left out) with the cap and the budget checked."""
    from packing_core.packing.options import DEFAULT_TIME_LIMIT, as_max_docs_per_row
    from packing_core.packing.registry import STRATEGIES, get_strategy

    cap = as_max_docs_per_row(args.max_docs_per_row, args.context, "--max-docs-per-row")
    options = {"max_docs_per_row": cap,
               "time_limit": DEFAULT_TIME_LIMIT if args.time_limit is None else args.time_limit}
    names = tuple(STRATEGIES) if strategies is None else strategies
    if cap is None or strategies is not None:      # one strategy named: the library refuses what cannot hold
        return names, options, ""
    cut = [s for s in names if get_strategy(s).cuts]
    note = (f"{', '.join(cut)} left out: it cuts documents at row edges, so a cap of {cap} documents per row "
            "cannot hold there") if cut else ""
    return tuple(s for s in names if s not in cut), options, note


def _cap_price(data, args, names, options):
    if options["max_docs_per_row"] is None or "bfd" not in names:
        return None
    from packing_core.packing.from_counts import cap_price

    return cap_price(data, args.context, "bfd", options["max_docs_per_row"], overlong=args.overlong)


def run(args, out, err) -> int:
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
    from packing_core.analysis.profile_report import headline, report_dict
    from packing_core.analysis.quality import cap_sentence
    from packing_core.analysis.tables import strategy_table

    lengths = load_lengths(args)
    names, options, left_out = _plan_args(args, strategies)
    rows = strategy_table(lengths, args.context, names, overlong=args.overlong, batch_size=args.batch_size,
                          seed=args.seed, **options)
    cap = _cap_price(lengths, args, names, options)
    try:
        head = headline(rows)
    except ValueError:      # one strategy: nothing to compare
        head = None
    if args.format == "json":   # the shape of report FILE (analysis.report_dict), without a profile
        meta = {"kind": "lengths", "documents": int(len(lengths)), "tokens": int(lengths.sum())}
        dump_json(report_dict(None, None, args.context, rows=rows, head=head.to_dict() if head else None, meta=meta,
                              max_docs_per_row=options["max_docs_per_row"], cap=cap), out)
        return 0
    out.write(f"{len(lengths):,} documents, {int(lengths.sum()):,} tokens, context {args.context}\n")
    out.write(f"{head.sentence}\n\n" if head else "\n")
    _cap_lines(out, options, left_out, cap, cap_sentence)
    out.write(format_strategy_table(rows) + "\n")
    return 0


def _cap_lines(out, options, left_out, cap, cap_sentence) -> None:
    if options["max_docs_per_row"] is None:
        return
    out.write(f"every plan holds at most {options['max_docs_per_row']} documents per row (--max-docs-per-row)"
              + (f"; {left_out}" if left_out else "") + "\n")
    out.write((cap_sentence(cap) + "\n\n") if cap is not None else "\n")


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
    from packing_core.analysis.quality import cap_sentence

    profile = load_profile(args)
    _same_tokenizer(profile, args.tokenizer)
    names, options, left_out = _plan_args(args, strategies)
    kwargs = dict(overlong=args.overlong, batch_size=args.batch_size, seed=args.seed)
    plans = profile_table(profile, args.context, strategies=names, **kwargs, **options)
    # every ratio is against padding to the context, planned even when only another strategy is shown
    base = None if any(p.strategy == "pad" for p in plans) else profile_table(
        profile, args.context, strategies=("pad",), **kwargs)[0]
    cap = _cap_price(profile, args, names, options)
    if args.format == "json":
        dump_json(report_dict(profile, plans, args.context, max_docs_per_row=options["max_docs_per_row"], cap=cap,
                              base=base), out)
    else:
        text = format_profile_report(profile, plans, base)
        head, _, table = text.partition("\n\n")
        out.write(head + "\n\n")
        _cap_lines(out, options, left_out, cap, cap_sentence)
        out.write(table + "\n")
    return 0
