"""The parser, built from ``COMMANDS``, and ``main``: one line for bad input, a bug report for anything else.

Only the command being run declares its arguments, so starting the CLI costs what that command
imports (``report`` never loads torch to describe ``verify``'s backends).

>>> [c.NAME for c in COMMANDS]
['report', 'balance', 'stream', 'scan', 'check', 'verify', 'cp']

The lab's own commands (``zoo``, ``warm``) live in ``packing_lab.cli``, which extends ``COMMANDS``:
``packing-lab`` (or ``python -m packing_lab``) runs every command, ``python -m packing_core`` the
library's; asked here for one of the lab's, it says where that command lives.
"""
from __future__ import annotations

import os
import sys

import packing_core.cli.balance as balance
import packing_core.cli.check as check
import packing_core.cli.cp as cp
import packing_core.cli.report as report
import packing_core.cli.scan as scan
import packing_core.cli.stream as stream
import packing_core.cli.verify as verify
from packing_core._validate import LIMIT_ERRORS, InputError
from packing_core.cli.common import EXIT_BAD_INPUT, EXIT_BUG, Parser, error_line, quiet_libraries
from packing_core.models.registry import model_names

COMMANDS = (report, balance, stream, scan, check, verify, cp)
# commands of the lab package (``packing_lab.cli``), named here only to say where they live
LAB_COMMANDS = ("zoo", "warm")
PROG = "python -m packing_core"


def parser(command: str | None = None, commands=COMMANDS, prog: str = PROG) -> Parser:
    """The CLI's parser; given ``command``, only that command declares its arguments (the others just their help)."""
    p = Parser(prog=prog, description="Packing Lab: measure and check sequence packing.")
    sub = p.add_subparsers(dest="command", required=True)
    for c in commands:
        s = sub.add_parser(c.NAME, help=c.HELP, description=(c.__doc__ or "").split("\n\n")[0])
        if command is None or command == c.NAME:
            c.add_arguments(s)
    return p


def main(argv=None, out=None, err=None, *, commands=COMMANDS, prog: str = PROG) -> int:
    """Run one command of ``commands`` (the library's by default); the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if LIMIT_ERRORS:   # a PACKING_LAB_MAX_* setting that is not a number: said before any work
            raise InputError(LIMIT_ERRORS[0])
        command = next((a for a in argv if not a.startswith("-")), None)
        names = {c.NAME for c in commands}
        if command in LAB_COMMANDS and command not in names:
            raise InputError(f"{command!r} is a command of the lab, not of the library: run `packing-lab {command}` "
                             f"(or `python -m packing_lab {command}`)")
        args = parser(command if command in names else None, commands, prog).parse_args(argv)
        if args.command in ("verify", "check") and args.model not in (None, *model_names(tokenizer=False)):
            quiet_libraries()   # a real model loads through transformers
        return next(c for c in commands if c.NAME == args.command).run(args, out, err)
    except InputError as e:
        err.write(f"error: {error_line(e)}\n")
        return EXIT_BAD_INPUT
    except BrokenPipeError:   # the reader went away (``check ... | head``): not an error of the input
        if out is sys.stdout:   # the real stdout: no second error when the interpreter flushes it at exit
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except (OSError, ValueError):
                pass
        return 141   # 128 + SIGPIPE, what a shell tool killed by the closed pipe returns
    except RecursionError:   # a structure nested past Python's limit, wherever it was parsed
        err.write("error: the input is nested too deeply to read; flatten it\n")
        return EXIT_BAD_INPUT
    except (OSError, MemoryError) as e:  # unreadable paths and the like: still one line
        err.write(f"error: {e.__class__.__name__}: {error_line(e)}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:   # Ctrl-C: writes are atomic, so nothing half-done is left behind
        err.write("error: interrupted; nothing was written\n")
        return 130
    except Exception as e:  # noqa: BLE001  anything else is a bug of the lab, not of the input: say so, keep the traceback
        import traceback

        err.write("".join(traceback.format_exception(e)))
        err.write(f"error: an unexpected {type(e).__name__} inside Packing Lab: a bug, not a problem with your input; "
                  "the traceback above says where (please report it)\n")
        return EXIT_BUG
