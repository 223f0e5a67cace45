"""``cp``: packed rows over context-parallel ranks. For the data's rows planned by a strategy, each scheme's
causal work per rank and the pads the cut adds, at each CP size (``parallel.balance``); with ``--out``, the
first rows' documents cut over the ranks, one batch file per rank (``parallel.split``), for ``check --cp``.
The token ids written are stand-ins (the lab plans lengths): each document's own sequence of byte values."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from packing_core._validate import InputError, whole_number
from packing_core.cli.common import (
    NO_DATA,
    add_data_arguments,
    check_strategy,
    check_tokenizer,
    dump_json,
    escaped,
    has_data,
    load_lengths,
    load_profile,
)

NAME = "cp"
HELP = "packed rows over context-parallel ranks: causal work per rank and pads per scheme; --out writes each rank's batch"
MAX_SIZES = 8          # CP sizes one table compares
MAX_ROWS_WRITTEN = 64  # rows --out cuts into rank files


def add_arguments(p: argparse.ArgumentParser) -> None:
    from packing_core.parallel.layout import MAX_CP, SCHEMES

    add_data_arguments(p, strategy="bfd")
    p.add_argument("--cp", metavar="N[,N...]",
                   help=f"context-parallel sizes, e.g. 2,4,8 (1 to {MAX_CP}; at most {MAX_SIZES})")
    p.add_argument("--scheme", default="all", choices=(*SCHEMES, "all"),
                   help="contiguous (each row cut in N), zigzag-row (2N chunks per row), zigzag-document "
                        "(2N chunks per document: Transformer Engine's THD), or all (default)")
    p.add_argument("--tp", default="1", help="tensor-parallel size, for --sequence-parallel (default 1)")
    p.add_argument("--sequence-parallel", action="store_true",
                   help="pad to lcm(2N, TP·N) as Megatron-Bridge does with sequence parallelism")
    p.add_argument("--out", metavar="FOLDER", help="write one batch file per rank (rank-R.safetensors) of the first "
                                                   "--rows rows' documents; needs one --cp and one --scheme")
    p.add_argument("--rows", default="1", help=f"rows whose documents --out cuts (default 1, at most "
                                               f"{MAX_ROWS_WRITTEN})")
    p.add_argument("--format", default="table", choices=("table", "json"))


def cp_sizes(text: str) -> tuple[int, ...]:
    """``"2,4,8"`` as CP sizes, each checked: one line for anything else."""
    from packing_core.parallel.layout import as_cp

    parts = [t.strip() for t in str(text).split(",")]
    if not parts or any(not t for t in parts) or len(parts) > MAX_SIZES:
        raise InputError(f"--cp takes 1 to {MAX_SIZES} comma-separated sizes, e.g. 2,4,8; got {escaped(text)[:60]!r}")
    out = []
    for t in parts:
        if not t.lstrip("+").isdigit() or len(t) > 12:
            raise InputError(f"--cp size {escaped(t)[:40]!r} is not a whole number: give e.g. --cp 2,4,8")
        out.append(as_cp(int(t), "--cp"))
    return tuple(dict.fromkeys(out))


def _whole(text: str, name: str, maximum: int) -> int:
    if not str(text).strip().isdigit() or len(str(text).strip()) > 12:
        raise InputError(f"{name} must be a whole number, got {escaped(text)[:40]!r}")
    return whole_number(int(text), name, minimum=1, maximum=maximum)


def stand_in_documents(lengths) -> list[list[int]]:
    """Token ids for documents of ``lengths``: document i counts up from byte 32 + 7i (mod 95), one step a token."""
    return [(32 + (7 * i + np.arange(int(n))) % 95).tolist() for i, n in enumerate(lengths)]


def prepare_ranks(args, lengths, cp: int, scheme: str, tp: int):
    """``(split, paths, documents, rows)``: the first ``--rows`` rows' documents, packed again by the strategy and
    cut, and the files they go to; everything checked before anything is printed or written."""
    from packing_core.batch.packed import PackedBatch
    from packing_core.data.files import check_output
    from packing_core.packing.strategies import make_plan
    from packing_core.parallel.split import split_batch

    rows = _whole(args.rows, "--rows", MAX_ROWS_WRITTEN)
    folder = Path(args.out).expanduser()
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--out {escaped(args.out)} is a file: name a folder (it is made if missing)")
    paths = [check_output(folder / f"rank-{r}.safetensors") for r in range(cp)]
    plan = make_plan(lengths, args.context, args.strategy, overlong=args.overlong, batch_size=args.batch_size,
                     seed=args.seed)
    chosen = np.unique(plan.piece_doc[plan.piece_row < rows])
    docs = stand_in_documents(np.asarray(lengths)[chosen])
    batch = PackedBatch.from_documents(docs, args.context, args.strategy, overlong=args.overlong,
                                       batch_size=args.batch_size, seed=args.seed)
    split = split_batch(batch, cp, scheme, tp=tp, sequence_parallel=args.sequence_parallel)
    return split, paths, len(docs), batch.plan.n_rows


def write_ranks(prepared, folder: str, out) -> None:
    """One batch file per rank, each written whole or not at all."""
    import safetensors.numpy

    from packing_core.data.files import write_atomic

    split, paths, documents, rows = prepared
    for rb, path in zip(split.ranks, paths):
        write_atomic(path, safetensors.numpy.save({k: np.ascontiguousarray(v) for k, v in rb.to_file().items()}))
    out.write(f"wrote {split.cp} rank files to {escaped(folder)}: {documents} documents in {rows} row(s), "
              f"{split.real_tokens:,} real tokens, {split.pads_added:,} pads added by the cut ({split.scheme}, "
              f"multiple {split.multiple}); check them with: python -m packing_core check {escaped(folder)} --cp "
              f"{split.cp} --cp-scheme {split.scheme}\n")


def run(args, out, err) -> int:
    from packing_core.parallel.balance import cp_balance, cp_balance_counts, format_cp_balance
    from packing_core.parallel.layout import MAX_TP, SCHEMES

    if args.cp is None:
        raise InputError("give the context-parallel size(s): --cp 2, or --cp 2,4,8 to compare")
    if not has_data(args):
        raise InputError(NO_DATA)
    sizes = cp_sizes(args.cp)
    tp = _whole(args.tp, "--tp", MAX_TP)
    schemes = SCHEMES if args.scheme == "all" else (args.scheme,)
    check_strategy(args.strategy, allow_all=False)
    check_tokenizer(args.tokenizer)
    if args.out is not None and (len(sizes) != 1 or len(schemes) != 1):
        raise InputError("--out writes one split: give one --cp size and one --scheme")
    if args.profile is not None or args.file:
        if args.strategy != "bfd":
            raise InputError("a profile or a data file is balanced from its length counts, packed by bfd: drop "
                             "--strategy (or give --lengths / --synthetic to plan another strategy)")
        if args.out is not None:
            raise InputError("--out cuts documents of --lengths or --synthetic: a profile holds counts, not documents")
        counts = load_profile(args)
        label = f"bfd rows at context {args.context} (from the length counts)"
        result = [b for n in sizes for b in cp_balance_counts(counts, args.context, n, schemes, tp=tp,
                                                             sequence_parallel=args.sequence_parallel)]
    else:
        from packing_core.packing.strategies import make_plan

        lengths = load_lengths(args)
        prepared = None if args.out is None else prepare_ranks(args, lengths, sizes[0], schemes[0], tp)
        plan = make_plan(lengths, args.context, args.strategy, overlong=args.overlong, batch_size=args.batch_size,
                         seed=args.seed)
        label = f"{args.strategy} rows at context {args.context}: {plan.n_rows:,} rows"
        result = [b for n in sizes for b in cp_balance(plan, n, schemes, tp=tp,
                                                        sequence_parallel=args.sequence_parallel)]
    if args.format == "json":
        dump_json({"basis": label, "balance": [b.to_dict() for b in result]}, out)
    else:
        out.write(format_cp_balance(result, label) + "\n")
    if args.out is not None:
        write_ranks(prepared, str(Path(args.out).expanduser()), out if args.format == "table" else err)
    return 0
