"""``stream``: pack documents as a trainer reading a stream does (``packing.stream.StreamPacker``): a buffer of
N pieces, best fit from it, each row out as soon as it is full; the rows, their utilisation beside bfd over the
same documents, and the packer's state, which ``--save-state`` writes and ``--state`` resumes from (stop after
``--documents N``, as a checkpoint mid-stream does). ``--curve`` measures utilisation against buffer size and
TRL's window instead (``analysis.stream_price``). ``--lengths`` and ``--synthetic`` are read in their order;
FILE and ``--profile`` hold counts, not an order, so their stream is a seeded sample in random order."""
from __future__ import annotations

import argparse
import math
import re

from packing_core._validate import DEFAULT_CONTEXT, MAX_JSON_BYTES, MAX_STREAM_BUFFER, InputError, limit_hint
from packing_core.cli.common import (
    NO_DATA,
    add_data_arguments,
    check_tokenizer,
    count,
    dump_json,
    escaped,
    has_data,
    load_lengths,
    load_profile,
)

NAME = "stream"
HELP = "pack a stream from a buffer of N documents: rows, utilisation, a state to save and resume"
DEFAULT_BUFFER = 1000          # TRL's packing window (``packing.stream.TRL_WINDOW``)
MAX_ROWS_SHOWN = 10_000
_SHARE = re.compile(r"\s*(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*", re.A)


def _share(text: str) -> float:
    """An argparse type: a share of the context above 0 and at most 1 (ASCII digits only)."""
    value = float(text) if _SHARE.fullmatch(text) else math.nan
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"the minimum fill must be a share of the context above 0 and at most 1, "
                                         f"got {text[:40]!r}; try 1.0 (a row leaves when full) or 0.95")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_data_arguments(p, strategy=None)
    p.add_argument("--buffer-size", type=count("the buffer size", maximum=MAX_STREAM_BUFFER,
                                               hint=f"try {DEFAULT_BUFFER} ({limit_hint('MAX_STREAM_BUFFER')})"),
                   default=None, metavar="N", help=f"pieces the buffer holds (default {DEFAULT_BUFFER}, TRL's window)")
    p.add_argument("--min-fill", type=_share, default=None, metavar="SHARE",
                   help="a row leaves once it holds this share of the context (default 1.0: when full)")
    p.add_argument("--documents", type=count("documents to read"), default=None, metavar="N",
                   help="read only the next N documents and stop mid-stream: the buffer keeps what is left "
                        "(write it with --save-state)")
    p.add_argument("--state", metavar="JSON", help="resume from a state --save-state wrote: the stream's documents "
                                                   "from its position on, with its settings")
    p.add_argument("--save-state", metavar="JSON", help="write the packer's state after the last row (atomically)")
    p.add_argument("--rows", type=count("rows shown", minimum=0, maximum=MAX_ROWS_SHOWN), default=0, metavar="N",
                   help="show the first N rows, piece by piece (document:start+length)")
    p.add_argument("--curve", action="store_true",
                   help="utilisation against buffer size (1, 2, 4, ...) and TRL's window, on the first documents")
    p.add_argument("--format", default="table", choices=("table", "json"))


def _documents(args):
    """(lengths in stream order, what they are, their order)."""
    if args.profile is not None or args.file:
        from packing_core.analysis.profile_report import profile_sample

        lengths = profile_sample(load_profile(args), args.seed)
        order = f"seeded random order (seed {args.seed})"
        return lengths, f"a sample of {len(lengths):,} documents in {order}", order
    lengths = load_lengths(args)
    name = "--lengths" if args.lengths is not None else args.synthetic
    return lengths, f"{len(lengths):,} documents of {name}", f"the order of {name}"


def _resumed(args):
    """The packer: new from the settings, or resumed from ``--state`` (whose settings it keeps)."""
    from packing_core.data.files import read_bytes
    from packing_core.packing.stream import StreamPacker, StreamState

    if args.state is None:
        return StreamPacker(args.context, args.buffer_size or DEFAULT_BUFFER, min_fill=args.min_fill or 1.0,
                            overlong=args.overlong)
    state = StreamState.from_json(read_bytes(args.state, "the stream state", MAX_JSON_BYTES))
    given = [name for name, value, kept in (("--buffer-size", args.buffer_size, None), ("--min-fill", args.min_fill, None),
                                            ("--context", args.context, DEFAULT_CONTEXT),
                                            ("--overlong", args.overlong, "split"))
             if value is not None and value != kept and value != getattr(state, name[2:].replace("-", "_"))]
    if given:
        raise InputError(f"{', '.join(given)} differ{'s' if len(given) == 1 else ''} from the state's own settings "
                         f"(context {state.context}, buffer {state.buffer_size:,}, min fill {state.min_fill:g}, "
                         f"overlong {state.overlong}): a resumed stream keeps them; drop {' and '.join(given)}")
    return StreamPacker(state=state)


def run(args, out, err) -> int:
    if not has_data(args):
        raise InputError(NO_DATA)
    check_tokenizer(args.tokenizer)
    if args.curve and (args.state or args.save_state or args.documents):
        raise InputError("--curve measures whole streams at each buffer size: drop --state, --save-state and "
                         "--documents (or drop --curve to pack one stream)")
    inputs = [*args.file, *(x for x in (args.profile, args.state) if x)]
    if args.save_state is not None:
        from packing_core.data.files import check_output

        check_output(args.save_state, inputs, "--save-state", "the state")   # before any work: never an input
    lengths, label, order = _documents(args)
    if args.curve:
        return _curve(args, lengths, label, order, out)
    packer = _resumed(args)
    start = packer.position
    if start > len(lengths):
        raise InputError(f"the state stands at document {start:,}, but this stream holds {len(lengths):,}: resume "
                         "it with the documents it was saved from")
    part = lengths[start:] if args.documents is None else lengths[start:start + args.documents]
    rows = packer.feed(part.tolist()) if args.documents is not None else packer.rows(part.tolist())
    n_rows = tokens = 0
    shown: list = []
    for row in rows:
        n_rows += 1
        tokens += sum(length for _, _, length in row)
        if len(shown) < args.rows:
            shown.append(row)
    state = packer.state()
    if args.save_state is not None:
        from packing_core.data.files import write_atomic

        write_atomic(args.save_state, (state.to_json() + "\n").encode(), inputs, "--save-state", "the state")
    report = _report(args, packer, label, start, part, n_rows, tokens, shown, state)
    if args.format == "json":
        dump_json(report, out)
    else:
        out.write(_table(report) + "\n")
    return 0


def _report(args, packer, label, start, part, n_rows, tokens, shown, state) -> dict:
    from packing_core.packing.strategies import make_plan

    whole = make_plan(part, packer.context, "bfd", overlong=packer.overlong).metrics() if len(part) else None
    waiting = sum(length for _, _, length in state.buffer)
    return {"source": label, "context": packer.context, "buffer_size": packer.size, "min_fill": packer.min_fill,
            "overlong": packer.overlong, "start": start, "documents": len(part),
            "ended": args.documents is None, "rows": n_rows, "tokens": tokens,
            "utilisation": tokens / (n_rows * packer.context) if n_rows else 0.0,
            "bfd_rows": whole.rows if whole else 0, "bfd_utilisation": whole.utilisation if whole else 0.0,
            "waiting_pieces": len(state.buffer), "waiting_tokens": waiting, "state": state.to_dict(),
            "saved_to": args.save_state, "row_list": [[list(piece) for piece in row] for row in shown]}


def _table(r: dict) -> str:
    lines = [f"stream: {r['source']}, context {r['context']:,}, buffer {r['buffer_size']:,} pieces, min fill "
             f"{r['min_fill']:g}, overlong {r['overlong']}",
             f"read documents {r['start']:,} to {r['start'] + r['documents'] - 1:,}: {r['rows']:,} rows, "
             f"{r['tokens']:,} tokens, utilisation {r['utilisation']:.1%} (bfd over the same documents: "
             f"{r['bfd_rows']:,} rows, {r['bfd_utilisation']:.1%})" if r["documents"] else
             f"no document left to read from position {r['start']:,}: {r['rows']:,} rows from the buffer"]
    lines.append("the stream ended: the buffer was emptied into rows" if r["ended"] else
                 f"stopped mid-stream: {r['waiting_pieces']:,} piece(s), {r['waiting_tokens']:,} tokens, wait in "
                 "the buffer")
    s = r["state"]
    lines.append(f"state: position {s['position']:,}, {s['rows']:,} rows made, {len(s['buffer']):,} piece(s) waiting"
                 + (f"; written to {escaped(r['saved_to'])}" if r["saved_to"] else ""))
    for i, row in enumerate(r["row_list"]):
        lines.append(f"row {i:>4}  {sum(p[2] for p in row):>7,} tokens  "
                     + " ".join(f"{d}:{st}+{n}" for d, st, n in row))
    return "\n".join(lines)


def _curve(args, lengths, label: str, order: str, out) -> int:
    from packing_core.analysis.quality import stream_price

    if args.state or args.buffer_size is not None or args.min_fill is not None:
        raise InputError("--curve measures every buffer size from 1 up, at min fill 1.0: drop --buffer-size and "
                         "--min-fill")
    price = stream_price(lengths, args.context, overlong=args.overlong, order=order)
    if args.format == "json":
        dump_json(price.to_dict(), out)
        return 0
    c = price.curve
    rows = [f"{'buffer':>10} {'rows':>10} {'utilisation':>12}"]
    rows += [f"{b:>10,} {n:>10,} {u:>12.1%}" for b, n, u in zip(c.buffer_sizes, c.rows, c.utilisation)]
    rows.append(f"{'bfd':>10} {c.whole_rows:>10,} {c.whole_utilisation:>12.1%}   (the same documents, whole)")
    rows.append(f"TRL's window of {price.window:,}: {price.window_rows:,} rows, {price.window_utilisation:.1%}")
    out.write(f"stream of {label}, context {args.context:,}\n" + "\n".join(rows) + "\n" + price.sentence + "\n")
    return 0
