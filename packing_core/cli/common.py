"""What the commands share: the parser that turns bad usage into one line, bounded whole numbers,
the data arguments of ``report`` and ``balance``, model-folder vetting, JSON output and escaping.

>>> escaped("bad\\x1b[2J name\\n")
'bad\\\\x1b[2J name\\\\n'
>>> bounded(lambda n: n)("1e20")
Traceback (most recent call last):
argparse.ArgumentTypeError: '1e20' is not a whole number (digits only)
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import re
import sys

from packing_core._validate import (
    DEFAULT_CONTEXT,
    INTEGER_TEXT,
    InputError,
    as_batch_size,
    as_context,
    as_seed,
    whole_number,
)
from packing_core.data import INPUT_SUFFIXES, RECORD_KINDS
from packing_core.models.registry import PRETRAINED, is_model_path
from packing_core.models.tokenizers import TOKENIZER_CHOICES
from packing_core.packing.registry import STRATEGIES
from packing_core.packing.strategies import OVERLONG_POLICIES

EXIT_BAD_INPUT = 2
EXIT_BUG = 3         # an exception that is not InputError: a bug of the lab, reported with its traceback
NO_DATA = "no data given: pass FILE, --lengths 120,90,300, --synthetic support-tickets or --profile profile.json"
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\n]")


class Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line and exit code 2, like every other bad input."""

    def error(self, message):  # noqa: D102
        raise InputError(message)


def bounded(check):
    """An argparse type: a whole number in ASCII digits, checked by ``_validate`` (so '1e20', 10**20 or an
    Arabic-Indic '٣', which ``int()`` reads as 3 but no length field accepts, is one line)."""
    def parse(text: str) -> int:
        if not re.fullmatch(INTEGER_TEXT, text):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number (digits only)")
        try:
            value = int(text)
        except ValueError:      # past Python's 4,300 digits: far past every bound
            raise argparse.ArgumentTypeError(f"{text[:40]!r}... has {len(text):,} digits, far past any bound") from None
        try:
            return check(value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return parse


def count(name: str, *, minimum: int = 1, maximum: int | None = None, hint: str = ""):
    """``bounded`` for a plain count: ``--ranks``, ``--eos-id``, ``--cap`` ... from ``minimum`` to ``maximum``."""
    return bounded(lambda v: whole_number(v, name, minimum=minimum, maximum=maximum, hint=hint))


def escaped(text) -> str:
    """One line, whatever the data held: control characters and bidi overrides escaped."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text))


MAX_SHOWN_WORD = 160   # characters of one unbroken run (a name, a value) an error line shows


def error_line(text) -> str:
    """An error message as one short line: escaped, and any run of ``MAX_SHOWN_WORD``+ characters without
    a space (a 100 kB name echoed back) cut in the middle, with its length said.

    >>> line = error_line("unknown bug '" + "x" * 100_000 + "'")
    >>> len(line) < 120, "[100,002 characters]" in line
    (True, True)
    """
    def cut(m: re.Match) -> str:
        word = m.group()
        return f"{word[:60]}...[{len(word):,} characters]...{word[-20:]}"
    return re.sub(r"\S{%d,}" % MAX_SHOWN_WORD, cut, escaped(text))


def dump_json(value, out) -> None:
    """``value`` as indented JSON in one write (``json.dump`` writes each token: 300,000 calls for a big batch)."""
    out.write(json.dumps(value, indent=2) + "\n")




def add_data_arguments(p: argparse.ArgumentParser, *, strategy: str | None) -> None:
    """FILE, --lengths, --synthetic or --profile, and how to plan them: ``report``, ``balance`` and ``stream``
    alike (``strategy=None``: no --strategy and --batch-size, for a command with one way of packing)."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("file", nargs="*", default=[], metavar="FILE",
                     help="data files, folders (also save_to_disk) or quoted globs, as for scan: messages or "
                          f"prompt/completion records, text, lengths or token-id lists ({' '.join(INPUT_SUFFIXES)}); "
                          "or a profile JSON written by scan")
    src.add_argument("--lengths", help="comma-separated token lengths, e.g. 120,90,300")
    src.add_argument("--synthetic", metavar="NAME", help="a built-in synthetic dataset, e.g. support-tickets")
    src.add_argument("--profile", metavar="JSON", help="a length profile written by `scan` (planned from its counts)")
    p.add_argument("--column", help="read this one column of FILE: lengths (integers), token-id lists or text")
    p.add_argument("--tokenizer", default="auto",
                   help=f"as for scan: {', '.join(TOKENIZER_CHOICES)}, or a local Hugging Face tokenizer folder "
                        f"(auto: {PRETRAINED}'s when installed, else UTF-8 bytes)")
    p.add_argument("--kind", choices=RECORD_KINDS, help="override the detected kind of FILE's records")
    p.add_argument("--context", type=bounded(as_context), default=DEFAULT_CONTEXT,
                   help=f"row length in tokens (default {DEFAULT_CONTEXT})")
    if strategy is not None:
        p.add_argument("--strategy", default=strategy, help=f"one of {', '.join(STRATEGIES)}"
                       + (", or all (default)" if strategy == "all" else f" (default {strategy})"))
    p.add_argument("--overlong", default="split", choices=OVERLONG_POLICIES, help="documents longer than the context")
    if strategy is not None:
        p.add_argument("--batch-size", type=bounded(as_batch_size), default=32,
                       help="rows per batch for pad-longest and bucket")
    p.add_argument("--seed", type=bounded(as_seed), default=0)


def has_data(args) -> bool:
    return any(x is not None for x in (args.file or None, args.lengths, args.synthetic, args.profile))


def check_strategy(name: str, *, allow_all: bool) -> None:
    if (name != "all" or not allow_all) and name not in STRATEGIES:
        raise InputError(f"unknown --strategy {name!r}; choose one of {', '.join(STRATEGIES)}"
                         + (" or all" if allow_all else ""))


def check_tokenizer(spec: str) -> None:
    """Refuse a tokenizer that names nothing before any work: once per command (loaders do not check again)."""
    from packing_core.models.tokenizers import check_tokenizer as check

    check(spec)


def tokenizer_loader(spec: str):
    """A zero-argument loader for ``--tokenizer``, loaded only when text is counted (checked by the command)."""
    from packing_core.models.tokenizers import load_tokenizer

    return functools.partial(load_tokenizer, spec)


def load_lengths(args):
    """``--lengths`` or ``--synthetic`` as an array of lengths, in their order."""
    from packing_core.data import parse_lengths, synthetic_lengths

    if args.lengths is not None:
        return parse_lengths(args.lengths)
    return synthetic_lengths(args.synthetic, seed=args.seed)


def load_profile(args):
    """``--profile`` or FILE (files, folders, globs or a profile) as a LengthProfile: how every input is planned."""
    from packing_core.data.intake import profile_from_inputs
    from packing_core.data.profile import LengthProfile

    if args.profile is not None:
        return LengthProfile.load(args.profile)
    return profile_from_inputs(args.file, tokenizer_loader(args.tokenizer), kind=args.kind, column=args.column)


def vet_model(model: str | None) -> None:
    """A model folder is vetted before torch is imported: a hostile one costs well under a second."""
    if model is not None and is_model_path(model):
        from pathlib import Path

        from packing_core.models.folders import vet_model_folder

        vet_model_folder(Path(model).expanduser())


def quiet_libraries() -> None:
    """No progress bars or warnings on stderr from loading a model: one report, or one error line."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if "transformers" in sys.modules or importlib.util.find_spec("transformers") is not None:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
