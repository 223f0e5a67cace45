"""``warm``: before class, convert SmolLM2, train the demo pair and fill the caches (``packing_lab.demos.warm``)."""
from __future__ import annotations

import argparse

from packing_core.cli.common import dump_json

NAME = "warm"
HELP = "before class: convert SmolLM2, train the demo pair, fill the caches"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", default="table", choices=("table", "json"))


def run(args, out, err) -> int:
    from transformers.utils import logging as hf_logging

    from packing_lab.demos.warm import warm_server, warm_status

    hf_logging.disable_progress_bar()
    def progress(line: str) -> None:
        err.write(line + "\n")
        err.flush()

    steps = warm_server(progress=progress)
    status = warm_status()
    if args.format == "json":
        dump_json({"steps": [s.to_dict() for s in steps], "status": status.to_dict()}, out)
    else:
        for s in steps:
            out.write(f"{s.name:<45} {s.seconds:>7.1f} s  {s.detail}\n")
        out.write(status.line + "\n")
    return 0
