"""``report``: utilisation and cost of every padding and packing strategy, as a table or JSON.

One pipeline for every input: ``--lengths``, ``--synthetic``, FILE and ``--profile`` become one
length profile, planned from its counts (order-dependent strategies on the lengths in their order
when they came as a list, else on a seeded sample), printed as one table
(``analysis.format_profile_report``) or one JSON shape (``analysis.report_dict``).

By default it plans every strategy but those run on request (``optimal``: an LP solve that proves
the best plan and its bound); ``--optimal`` adds it, ``--strategy optimal`` runs it alone, and the
table's last line says so. ``--time-limit`` sets ``optimal``'s budget
(``packing.options.TIME_LIMIT_HELP`` says what it buys);
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
    p.add_argument("--optimal", action="store_true",
                   help="also run optimal: a plan proven optimal, or its best plan with the gap to the LP bound "
                        "(an LP solver, within --time-limit)")
    from packing_core.packing.options import TIME_LIMIT_HELP

    p.add_argument("--timings", action="store_true",
                   help="say on stderr how long the read and the report took (results stay a function of the input)")
    p.add_argument("--time-limit", type=_seconds, default=None, metavar="SECONDS", help=TIME_LIMIT_HELP)
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
    from packing_core.packing.registry import DEFAULT_STRATEGIES, STRATEGIES, get_strategy

    cap = as_max_docs_per_row(args.max_docs_per_row, args.context, "--max-docs-per-row")
    options = {"max_docs_per_row": cap,
               "time_limit": DEFAULT_TIME_LIMIT if args.time_limit is None else args.time_limit}
    if strategies is None:
        names = tuple(STRATEGIES) if args.optimal else tuple(DEFAULT_STRATEGIES)
    else:
        names = strategies
    if cap is None or strategies is not None:      # one strategy named: the library refuses what cannot hold
        return names, options, ""
    cut = [s for s in names if get_strategy(s).cuts]
    note = (f"{', '.join(cut)} left out: it cuts documents at row edges, so a cap of {cap} documents per row "
            "cannot hold there") if cut else ""
    return tuple(s for s in names if s not in cut), options, note


def _on_request_line(args, names) -> str:
    """One line naming what the default table leaves out (optimal's proven plan and its LP bound), and how to ask."""
    from packing_core.packing.registry import STRATEGIES, get_strategy

    left = [s for s in STRATEGIES if get_strategy(s).on_request and s not in names]
    if not left or args.strategy != "all":
        return ""
    limit = args.time_limit if args.time_limit is not None else _default_limit()
    return (f"not run by default: {', '.join(left)} (a plan proven optimal or its best with the gap, and the LP "
            f"bound, within {limit:g} s of an LP solver): add --optimal, or --strategy optimal\n")


def _default_limit() -> float:
    from packing_core.packing.options import DEFAULT_TIME_LIMIT

    return DEFAULT_TIME_LIMIT


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
    if args.optimal and strategies is not None:
        raise InputError("--optimal adds optimal to every strategy; with --strategy NAME, name optimal itself "
                         "(--strategy optimal)")
    import time

    started = time.perf_counter()
    order = None
    if args.file or args.profile is not None:
        profile = load_profile(args)
        _same_tokenizer(profile, args.tokenizer)
    else:       # typed or synthetic lengths: one profile, and their order for the strategies that read it
        from packing_core.data.profile import LengthProfile

        order = load_lengths(args)
        profile = LengthProfile.from_lengths(order, kind="lengths", tokenizer="none")
    read = time.perf_counter()
    code = _report(profile, order, args, strategies, out)
    if args.timings:
        err.write(f"timings: read {read - started:.2f} s, plan and report {time.perf_counter() - read:.2f} s\n")
    return code


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


def _report(profile, order, args, strategies, out) -> int:
    """The one pipeline of every input: plans from the profile (order-dependent ones on ``order`` when the
    lengths came as a list), one table, one JSON shape."""
    from packing_core.analysis.profile_report import format_profile_report, profile_table, report_dict
    from packing_core.analysis.quality import cap_sentence

    names, options, left_out = _plan_args(args, strategies)
    kwargs = dict(overlong=args.overlong, batch_size=args.batch_size, seed=args.seed, order=order)
    plans = profile_table(profile, args.context, strategies=names, **kwargs, **options)
    # every ratio is against padding to the context, planned even when only another strategy is shown
    base = None if any(p.strategy == "pad" for p in plans) else profile_table(
        profile, args.context, strategies=("pad",), **kwargs)[0]
    cap = _cap_price(order if order is not None else profile, args, names, options)
    if args.format == "json":
        dump_json(report_dict(profile, plans, args.context, max_docs_per_row=options["max_docs_per_row"], cap=cap,
                              base=base), out)
        return 0
    text = format_profile_report(profile, plans, base)
    head, _, table = text.partition("\n\n")
    out.write(head + "\n\n")
    if options["max_docs_per_row"] is not None:
        out.write(f"every plan holds at most {options['max_docs_per_row']} documents per row (--max-docs-per-row)"
                  + (f"; {left_out}" if left_out else "") + "\n")
        out.write((cap_sentence(cap) + "\n\n") if cap is not None else "\n")
    out.write(table + "\n")
    out.write(_on_request_line(args, names))
    return 0
