"""Command line: ``python -m packing_core report|verify``.

    python -m packing_core report --lengths 120,90,300,40,55,30,210,65 --context 512
    python -m packing_core report --synthetic support-tickets --strategy bfd --format json
    python -m packing_core report data.parquet --column text
    python -m packing_core report chats.jsonl --tokenizer smollm2       (messages, prompt/completion, text, lengths)
    python -m packing_core verify --model tiny-rope --mask off
    python -m packing_core verify --model smollm2 --mask off --text "..." --text "..."
    python -m packing_core check batch.safetensors --attn-implementation all --eos-id 2
    python -m packing_core check batch.safetensors --model smollm2
    python -m packing_core zoo --run all
    python -m packing_core warm        # before class: convert SmolLM2, train the demo, fill the caches
    python -m packing_core scan data/ --tokenizer smollm2 --out profile.json
    python -m packing_core report --profile profile.json

Bad input prints one line, ``error: ...``, to stderr and exits 2; an unexpected exception is a bug of the lab:
its traceback and one line saying so go to stderr, exit 3. ``verify`` exits 0
when packing changed nothing within tolerance, 1 when it did. ``check`` exits 1 on an error
finding (on a warning too with ``--strict``), or when ``--model`` shows a leak.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys

from packing_core._validate import DEFAULT_CONTEXT, InputError, as_batch_size, as_context, as_seed, as_workers
from packing_core.data.kinds import RECORD_KINDS
from packing_core.data.sources import INPUT_SUFFIXES
from packing_core.models.registry import DEFAULT_MODEL, PRETRAINED, find_model, model_names
from packing_core.models.tokenizers import TOKENIZER_CHOICES
from packing_core.packing.strategies import OVERLONG_POLICIES, STRATEGIES, STRATEGY_INFO, make_plan

EXIT_BAD_INPUT = 2
EXIT_BUG = 3         # an exception that is not InputError: a bug of the lab, reported with its traceback
_TABLE_COLUMNS = (
    ("strategy", "strategy", "{}"),
    ("rows", "rows", "{:,}"),
    ("slots", "slots", "{:,}"),
    ("real_tokens", "real", "{:,}"),
    ("pad_tokens", "pads", "{:,}"),
    ("utilisation", "util", "{:.3f}"),
    ("tokens_lost", "lost", "{:,}"),
    ("docs_split", "split", "{:,}"),
    ("attention_cost_padded", "attn dense", "{:.3g}"),
    ("attention_cost_packed", "attn block", "{:.3g}"),
    ("lower_bound_rows", "fewest rows", "{:,}"),
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line and exit code 2, like every other bad input."""

    def error(self, message):  # noqa: D102
        raise InputError(message)


def _bounded(check):
    """An argparse type: a whole number checked by ``_validate`` (so '1e20' or 10**20 is one line)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number (digits only)") from None
        try:
            return check(value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return parse


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m packing_core", description="Packing Lab: measure and check sequence packing.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("report", help="utilisation and cost of every padding and packing strategy")
    src = r.add_mutually_exclusive_group()
    src.add_argument("file", nargs="*", default=[], metavar="FILE",
                     help="data files, folders (also save_to_disk) or quoted globs, as for scan: messages or "
                          f"prompt/completion records, text, lengths or token-id lists ({' '.join(INPUT_SUFFIXES)}); "
                          "or a profile JSON written by scan")
    src.add_argument("--lengths", help="comma-separated token lengths, e.g. 120,90,300")
    src.add_argument("--synthetic", metavar="NAME", help="a built-in synthetic dataset, e.g. support-tickets")
    src.add_argument("--profile", metavar="JSON", help="a length profile written by `scan` (planned from its counts)")
    r.add_argument("--column", help="read this one column of FILE: lengths (integers), token-id lists or text")
    r.add_argument("--tokenizer", default="auto",
                   help=f"as for scan: {', '.join(TOKENIZER_CHOICES)}, or a local Hugging Face tokenizer folder "
                        f"(auto: {PRETRAINED}'s when installed, else UTF-8 bytes)")
    r.add_argument("--kind", choices=RECORD_KINDS, help="override the detected kind of FILE's records")
    r.add_argument("--context", type=_bounded(as_context), default=DEFAULT_CONTEXT,
                   help=f"row length in tokens (default {DEFAULT_CONTEXT})")
    r.add_argument("--strategy", default="all", help=f"one of {', '.join(STRATEGIES)}, or all (default)")
    r.add_argument("--overlong", default="split", choices=OVERLONG_POLICIES, help="documents longer than the context")
    r.add_argument("--batch-size", type=_bounded(as_batch_size), default=32, help="rows per batch for pad-longest and bucket")
    r.add_argument("--seed", type=_bounded(as_seed), default=0)
    r.add_argument("--format", default="table", choices=("table", "json"))

    r.add_argument("--ranks", type=int, help="instead of the table: split the strategy's rows (bfd for all) over "
                   "this many data-parallel ranks, before and after balancing by attention cost")
    r.add_argument("--micro-batches", type=int, default=1, help="with --ranks: micro-batches per rank (default 1)")

    s = sub.add_parser("scan", help="scan files, folders or globs of shards into a length profile (JSON)")
    s.add_argument("inputs", nargs="+", metavar="INPUT",
                   help=f"files, folders (also save_to_disk) or quoted globs of {' '.join(INPUT_SUFFIXES)} files")
    s.add_argument("--out", required=True, help="the profile to write (atomically: complete or not at all)")
    s.add_argument("--tokenizer", default=PRETRAINED,
                   help=f"{', '.join(TOKENIZER_CHOICES)}, or a local Hugging Face tokenizer folder (default {PRETRAINED})")
    s.add_argument("--kind", choices=RECORD_KINDS, help="override the detected kind")
    s.add_argument("--column", help="read this one column: lengths (integers), token-id lists or text")
    s.add_argument("--engine", default="local", choices=("local", "ray"))
    s.add_argument("--workers", type=_bounded(as_workers), default=2,
                   help="worker processes (local) or actors (ray), 0 to 8 (default 2)")
    s.add_argument("--ray-address", help="join a Ray cluster: auto or HOST:PORT (default: start a local Ray)")
    s.add_argument("--cap", type=int, help="name the documents longer than this many tokens (e.g. the context)")

    v = sub.add_parser("verify", help="run documents alone and packed, and compare the logits")
    v.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"{', '.join(model_names())}, or the path of a local HF causal-LM folder (safetensors)")
    v.add_argument("--mask", default="on", choices=("on", "off"), help="block-diagonal mask on, or one causal triangle")
    v.add_argument("--positions", default="reset", choices=("reset", "continuous"))
    v.add_argument("--backend", default="segments",
                   help=f"segments, dense, padded, causal_only, varlen (CUDA); for {', '.join(model_names(tokenizer=True))} "
                        "also the model's own sdpa or eager")
    v.add_argument("--use-cache", action="store_true",
                   help=f"{PRETRAINED} with sdpa/eager: leave use_cache on, as transformers does by default (it leaks)")
    v.add_argument("--text", action="append", metavar="TEXT",
                   help=f"a document (repeat: 2 to 4); {', '.join(model_names(tokenizer=True))} or a model folder "
                        "with a tokenizer")
    v.add_argument("--texts", metavar="FILE", help="UTF-8 file, one document per line (2 to 4 lines)")
    v.add_argument("--format", default="table", choices=("table", "json"))

    c = sub.add_parser("check", help="check a trainer's batch file (safetensors, .npz, JSON; never pickle)")
    c.add_argument("file", help="the batch: input_ids, labels, position_ids, attention_mask, cu_seq_lens_q/k")
    c.add_argument("--model", help=f"also run it: {', '.join(model_names(tokenizer=True))} or a local HF model folder "
                                   "(safetensors)")
    c.add_argument("--attn-implementation", default="sdpa",
                   choices=("sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3", "all"),
                   help="the attention that will read the batch (default sdpa); all: a verdict for each")
    c.add_argument("--tokenizer", help="smollm2 or a tokenizer folder: its EOS id ends documents (with --model: "
                                       "the model folder's)")
    c.add_argument("--eos-id", type=int, action="append", metavar="N", help="a token id that ends a document (repeat)")
    c.add_argument("--labels", default="auto", choices=("unshifted", "shifted", "auto"),
                   help="unshifted: transformers' labels (the model shifts); shifted: targets (torchtune recipes, "
                        "Megatron, nanoGPT); auto decides and says so")
    c.add_argument("--allow-cross-document", action="store_true",
                   help="reading across documents is deliberate (pretraining streams): leaks become notes")
    c.add_argument("--use-cache", action="store_true", help="the forward call uses a cache (use_cache=True)")
    c.add_argument("--strict", action="store_true", help="warnings exit 1 too")
    c.add_argument("--format", default="table", choices=("table", "json"))

    z = sub.add_parser("zoo", help="packing bugs that reached users of real projects, reproduced live")
    z.add_argument("--run", metavar="NAME", help="reproduce one bug (a name from the listing), or all")
    z.add_argument("--format", default="table", choices=("table", "json"))

    w = sub.add_parser("warm", help="before class: convert SmolLM2, train the demo pair, fill the caches")
    w.add_argument("--format", default="table", choices=("table", "json"))
    return p


def _load_lengths(args):
    import packing_core.data.lengths as L

    if args.lengths is not None:
        return L.parse_lengths(args.lengths)
    return L.synthetic_lengths(args.synthetic, seed=args.seed)


def tokenizer_loader(spec: str):
    """A zero-argument loader for ``--tokenizer`` (checked now, loaded only when text is counted)."""
    import functools

    from packing_core.models.tokenizers import check_tokenizer, load_tokenizer

    check_tokenizer(spec)
    return functools.partial(load_tokenizer, spec)


def _file_profile(args):
    """FILE (files, folders, globs or a profile) as a LengthProfile: the way every input is planned."""
    from packing_core.data.intake import profile_from_inputs

    return profile_from_inputs(args.file, tokenizer_loader(args.tokenizer), kind=args.kind, column=args.column)


def _report(args, out) -> int:
    from packing_core.analysis.profile_report import REPORT_VERSION, headline

    given = [x for x in (args.file or None, args.lengths, args.synthetic, args.profile) if x is not None]
    if not given:
        raise InputError("no data given: pass FILE, --lengths 120,90,300, --synthetic support-tickets "
                         "or --profile profile.json")
    if args.strategy != "all" and args.strategy not in STRATEGIES:
        raise InputError(f"unknown --strategy {args.strategy!r}; choose one of {', '.join(STRATEGIES)} or all")
    if args.file or args.profile is not None:
        return _profile_report(args, out)
    strategies = STRATEGIES if args.strategy == "all" else (args.strategy,)
    lengths = _load_lengths(args)
    rows = [
        make_plan(lengths, args.context, s, overlong=args.overlong, batch_size=args.batch_size, seed=args.seed).metrics()
        for s in strategies
    ]
    try:
        head = headline(rows)
    except ValueError:      # one strategy: nothing to compare
        head = None
    if args.format == "json":   # the shape of report FILE (analysis.profile_report.report_dict), without a profile
        json.dump({"report_version": REPORT_VERSION, "context": args.context,
                   "profile": {"kind": "lengths", "documents": int(len(lengths)), "tokens": int(lengths.sum())},
                   "loss_share": 1.0, "headline": head and head.to_dict(),
                   "strategies": [m.to_dict() for m in rows]}, out, indent=2)
        out.write("\n")
        return 0
    out.write(f"{len(lengths):,} documents, {int(lengths.sum()):,} tokens, context {args.context}\n")
    out.write(f"{head.sentence}\n\n" if head else "\n")
    cells = [[h for _, h, _ in _TABLE_COLUMNS]]
    cells += [[fmt.format(getattr(m, k)) for k, _, fmt in _TABLE_COLUMNS] for m in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    for r in cells:
        out.write("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        out.write("\n")
    out.write("\n")
    for m in rows:
        out.write(f"{m.strategy:<12} {STRATEGY_INFO[m.strategy]}\n")
    return 0


def _vet_model(model: str | None) -> None:
    """A model folder is vetted before torch is imported: a hostile one costs well under a second."""
    if model is not None and find_model(model) is None and (os.sep in model or os.path.exists(model)):
        from pathlib import Path

        from packing_core.models.folders import vet_model_folder

        vet_model_folder(Path(model).expanduser())


def _verify(args, out) -> int:
    _vet_model(args.model)
    from packing_core.verify.registry import verify_model

    texts = args.text
    if args.texts is not None:
        from packing_core.verify.registry import read_texts_file

        if texts:
            raise InputError("give --text or --texts FILE, not both")
        texts = read_texts_file(args.texts)
    report = verify_model(args.model, mask=args.mask, positions=args.positions, backend=args.backend,
                          use_cache=args.use_cache, texts=texts)
    if args.format == "json":
        json.dump(report.to_dict(), out, indent=2)
        out.write("\n")
    else:
        out.write(report.format_table())
        out.write("\n")
    return 0 if report.equivalent else 1


def _special_ids(args) -> tuple[int, ...]:
    """EOS ids from --eos-id, --tokenizer, or the --model folder's tokenizer.

    Only the EOS id: chat templates open every turn with the BOS-like token, so it would split
    one conversation into turns. Where the EOS id also ends every turn, give --eos-id instead.
    """
    eos = list(args.eos_id or ())
    spec = args.tokenizer or args.model
    if not args.tokenizer and args.model and find_model(args.model) is None:
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


def _check(args, out) -> int:
    _vet_model(args.model)
    from packing_core.attention.semantics import IMPLEMENTATIONS
    from packing_core.check.batch import check_hf_batch
    from packing_core.check.files import load_batch_file

    batch = load_batch_file(args.file)
    eos = _special_ids(args)
    impls = IMPLEMENTATIONS if args.attn_implementation == "all" else (args.attn_implementation,)
    checks = [check_hf_batch(batch, impl, use_cache=args.use_cache, eos_ids=eos, labels=args.labels,
                             allow_cross_document=args.allow_cross_document, compare=len(impls) == 1)
              for impl in impls]
    verdict = None
    if args.model is not None:
        from packing_core.verify.batch_run import run_hf_batch
        from packing_core.verify.registry import load_causal_lm

        model, _ = load_causal_lm(args.model)
        if len(impls) == 1:
            model.config._attn_implementation = impls[0]
        verdict = run_hf_batch(model, checks[0], model_name=args.model, use_cache=args.use_cache)
    if args.format == "json":
        json.dump({"checks": [c.to_dict() for c in checks], "model_run": verdict and verdict.to_dict()}, out, indent=2)
        out.write("\n")
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


def _scan(args, out, err) -> int:
    import functools

    from packing_core.data.files import check_output
    from packing_core.data.scan import scan
    from packing_core.data.sources import find_shards
    from packing_core.models.tokenizers import check_tokenizer, load_tokenizer

    # before an hour of scanning: never an input (every file a glob or a folder names), a device or a folder
    inputs = [*args.inputs, *sorted({str(shard.path) for shard in find_shards(args.inputs)})]
    check_output(args.out, inputs)
    check_tokenizer(args.tokenizer)
    last = [0.0]

    def progress(p):
        if p.shards_done == p.shards_total or p.seconds - last[0] >= 1.0:
            last[0] = p.seconds
            err.write(p.line() + "\n")
            err.flush()

    profile = scan(args.inputs, functools.partial(load_tokenizer, args.tokenizer), kind=args.kind, column=args.column,
                   engine=args.engine,
                   workers=args.workers, cap=args.cap, ray_address=args.ray_address, progress=progress)
    profile.save(args.out, inputs=inputs)
    shards = len(profile.sources)
    out.write(f"wrote {_escaped(args.out)}: {profile.documents:,} documents, {profile.tokens:,} tokens ({profile.kind}, "
              f"tokenizer {profile.tokenizer}) from {shards:,} shard{'' if shards == 1 else 's'} "
              f"in {profile.scan_seconds:.1f} s\n")
    return 0


def _profile_report(args, out) -> int:
    from packing_core.analysis.profile_report import format_profile_report, profile_table, report_dict
    from packing_core.data.profile import LengthProfile

    profile = LengthProfile.load(args.profile) if args.profile is not None else _file_profile(args)
    strategies = None if args.strategy == "all" else (args.strategy,)
    plans = profile_table(profile, args.context, strategies=strategies, overlong=args.overlong,
                          batch_size=args.batch_size, seed=args.seed)
    if args.format == "json":
        json.dump(report_dict(profile, plans, args.context), out, indent=2)
        out.write("\n")
    else:
        out.write(format_profile_report(profile, plans) + "\n")
    return 0


def _balance(args, out) -> int:
    from packing_core.analysis.balance_report import format_balance
    from packing_core.data.profile import LengthProfile
    from packing_core.packing.balance import balance_rows

    strategy = "bfd" if args.strategy == "all" else args.strategy
    if args.profile is not None or args.file:   # a profile has counts, not rows: balance the rows of a seeded sample
        profile = LengthProfile.load(args.profile) if args.profile is not None else _file_profile(args)
        lengths = profile.sample(200_000, args.seed)
        label = f"{strategy} rows of a sample of {len(lengths):,} documents (seed {args.seed})"
    elif args.lengths is None and args.synthetic is None:
        raise InputError("no data given: pass FILE, --lengths 120,90,300, --synthetic support-tickets "
                         "or --profile profile.json")
    else:
        lengths = _load_lengths(args)
        label = f"{strategy} rows"
    plan = make_plan(lengths, args.context, strategy, overlong=args.overlong, batch_size=args.batch_size, seed=args.seed)
    report = balance_rows(plan, args.ranks, args.micro_batches)
    if args.format == "json":
        json.dump({"strategy": strategy, "basis": label, **report.to_dict()}, out, indent=2)
        out.write("\n")
    else:
        out.write(format_balance(report, label) + "\n")
    return 0


def _zoo(args, out) -> int:
    from packing_core.verify.zoo import REPRODUCED, ZOO, reproduce_bug

    if args.run is None:
        if args.format == "json":
            json.dump([b.to_dict() for b in ZOO], out, indent=2)
            out.write("\n")
            return 0
        for b in ZOO:
            out.write(f"{b.name:<30} {b.title}\n{'':<30} reported: {'; '.join(r.split(':')[0] for r in b.reported)}\n"
                      f"{'':<30} needs: {b.needs}\n"
                      f"{'':<30} caught by: {'; '.join(b.caught_by_titles) or 'no static finding (a model run)'}\n")
        out.write("\nreproduce one: python -m packing_core zoo --run NAME (or --run all)\n")
        return 0
    if args.run != "all" and args.run not in REPRODUCED:
        raise InputError(f"unknown bug {args.run!r}: choose one of {', '.join(REPRODUCED)}, or all "
                         "(planted faults run on the Masks and labels page)")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    results = [reproduce_bug(n) for n in (REPRODUCED if args.run == "all" else (args.run,))]
    if args.format == "json":
        json.dump([r.to_dict() for r in results], out, indent=2)
        out.write("\n")
    else:
        for r in results:
            out.write(f"{r.name}\n  broken: {r.symptom}\n  fixed:  {r.fixed}\n  check:  {r.check_says}\n"
                      f"  caught: {'yes' if r.caught else 'NO'}; silent on the fix: {'yes' if r.silent_on_fix else 'NO'}\n")
    return 0 if all(r.caught and r.silent_on_fix for r in results) else 1


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\n]")


def _escaped(text) -> str:
    r"""One line, whatever the data held: control characters and bidi overrides escaped.

    >>> _escaped("bad\x1b[2J name\n")
    'bad\\x1b[2J name\\n'
    """
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text))


def _quiet_libraries() -> None:
    """No progress bars or warnings on stderr from loading a model: one report, or one error line."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if "transformers" in sys.modules or importlib.util.find_spec("transformers") is not None:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
def _warm(args, out, err) -> int:
    from transformers.utils import logging as hf_logging

    from packing_core.experiments.warm import warm, warm_status

    hf_logging.disable_progress_bar()
    steps = warm(progress=lambda line: (err.write(line + "\n"), err.flush()))
    status = warm_status()
    if args.format == "json":
        json.dump({"steps": [s.to_dict() for s in steps], "status": status.to_dict()}, out, indent=2)
        out.write("\n")
    else:
        for s in steps:
            out.write(f"{s.name:<45} {s.seconds:>7.1f} s  {s.detail}\n")
        out.write(status.line + "\n")
    return 0


def main(argv=None, out=None, err=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = _parser().parse_args(argv)
        if args.command in ("report", "scan"):   # the same choices for both, refused before any work
            from packing_core.models.tokenizers import check_tokenizer

            check_tokenizer(args.tokenizer)
        if args.command in ("verify", "check") and args.model not in (None, *model_names(tokenizer=False)):
            _quiet_libraries()   # a real model loads through transformers
        if args.command == "scan":
            return _scan(args, out, err)
        if args.command == "warm":
            return _warm(args, out, err)
        if args.command == "report" and args.ranks is not None:
            return _balance(args, out)
        return {"report": _report, "verify": _verify, "check": _check, "zoo": _zoo}[args.command](args, out)
    except InputError as e:
        err.write(f"error: {_escaped(e)}\n")
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
        err.write(f"error: {e.__class__.__name__}: {_escaped(e)}\n")
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


if __name__ == "__main__":
    sys.exit(main())
