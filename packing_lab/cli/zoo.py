"""``zoo``: the bug catalogue (``packing_lab.zoo.ZOO``), listed, or reproduced live broken and fixed."""
from __future__ import annotations

import argparse

from packing_core._validate import InputError
from packing_core.cli.common import dump_json

NAME = "zoo"
HELP = "packing bugs reported in real projects, reproduced live, and classic faults planted in a small batch"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", metavar="NAME", help="reproduce one bug (a name from the listing), or all")
    p.add_argument("--format", default="table", choices=("table", "json"))


def run(args, out, err) -> int:
    from packing_lab.zoo import REPRODUCED, ZOO, reproduce_bug

    if args.run is None:
        if args.format == "json":
            dump_json([b.to_dict() for b in ZOO], out)
            return 0
        for b in ZOO:
            out.write(f"{b.name:<30} {b.title}\n{'':<30} reported: {'; '.join(r.split(':')[0] for r in b.reported)}\n"
                      f"{'':<30} needs: {b.needs}\n"
                      f"{'':<30} caught by: {b.caught_words}\n")
        out.write("\nreproduce one: packing-lab zoo --run NAME (or --run all)\n")
        return 0
    if args.run != "all" and args.run not in REPRODUCED:
        raise InputError(f"unknown bug {args.run!r}: choose one of {', '.join(REPRODUCED)}, or all "
                         "(planted faults run on the Masks and labels page)")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    results = [reproduce_bug(n) for n in (REPRODUCED if args.run == "all" else (args.run,))]
    if args.format == "json":
        dump_json([r.to_dict() for r in results], out)
    else:
        for r in results:
            out.write(f"{r.name}\n  broken: {r.symptom}\n  fixed:  {r.fixed}\n  check:  {r.check_says}\n"
                      f"  caught: {'yes' if r.caught else 'NO'}; silent on the fix: {'yes' if r.silent_on_fix else 'NO'}\n")
    return 0 if all(r.caught and r.silent_on_fix for r in results) else 1
