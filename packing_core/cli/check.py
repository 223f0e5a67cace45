"""``check``: a trainer's batch file (safetensors, ``.npz``, JSON; never a pickle), judged for the attention
implementation that will read it; ``--attn-implementation all`` judges it for each, computing the
implementation-free half once (``check.check_all_implementations``). ``--model-type NAME`` (or the
``model_type`` of ``--model``'s config.json) judges every layer of that family that mixes tokens, not only
attention (``check.mixers``); without it, one note says the verdict covers attention only. ``--model`` also
runs the batch, and one reconciled line says whether the run and the static verdict agree (the run decides
the exit code), then runs the causality check (a later token changed). Several files, or a folder, are a
stream: is packing on at all, and how full are the rows."""
from __future__ import annotations

import argparse
from pathlib import Path

from packing_core._validate import InputError
from packing_core.cli.common import count, dump_json, escaped, vet_model
from packing_core.models.registry import is_model_path, model_names

NAME = "check"
HELP = "check a trainer's batch file (safetensors, .npz, JSON; never pickle), or a stream of them"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from packing_core.attention import IMPLEMENTATIONS, TRAINER_READERS
    from packing_core.attention.families import KERNELS

    with_texts = ", ".join(model_names(tokenizer=True))
    p.add_argument("file", nargs="*", help="the batch: input_ids, labels, position_ids, attention_mask, "
                                           "cu_seq_lens_q/k; several files or a folder: a stream (is packing on, "
                                           "how full are the rows)")
    p.add_argument("--model", help=f"also run it: {with_texts} or a local HF model folder (safetensors); its "
                                   "model_type judges every layer that mixes tokens")
    p.add_argument("--model-type", metavar="NAME",
                   help="a transformers model_type (qwen3_next, lfm2, llama, roberta, ...): judge every layer of "
                        "that family that mixes tokens (convolutions, recurrent state) and its own mask call, "
                        "without running a model")
    p.add_argument("--kernel", action="append", choices=sorted({k.package for k in KERNELS.values()}),
                   metavar="NAME", help="a fast kernel installed where the model trains (causal-conv1d, mamba-ssm, "
                                        "flash-linear-attention; repeat); default: those importable here")
    p.add_argument("--list-model-types", action="store_true", help="list the model types the lab knows and exit")
    p.add_argument("--attn-implementation", default="sdpa", choices=(*IMPLEMENTATIONS, *TRAINER_READERS, "all"),
                   help="the attention that will read the batch (default sdpa); all: a verdict for each")
    p.add_argument("--tokenizer", help=f"{with_texts} or a tokenizer folder: its EOS id ends documents where nothing "
                                       "stronger marks them (with --model: the model folder's)")
    p.add_argument("--eos-id", type=count("an EOS id", minimum=0, maximum=2**63 - 1, hint="a token id (int64)"),
                   action="append", metavar="N", help="a token id that ends a document (repeat)")
    p.add_argument("--labels", default="auto", choices=("unshifted", "shifted", "auto"),
                   help="unshifted: transformers' labels (the model shifts); shifted: targets (torchtune recipes, "
                        "Megatron, nanoGPT); auto decides and says so")
    p.add_argument("--allow-cross-document", action="store_true",
                   help="reading across documents, and EOS -> next-document targets, are deliberate (pretraining "
                        "streams): both become notes")
    p.add_argument("--mask-convention", default="auto", choices=("auto", "may-read", "masked"),
                   help="what True means in a boolean 4D mask that does not say it itself: may-read (transformers) "
                        "or masked (Megatron)")
    p.add_argument("--use-cache", action="store_true", help="the forward call uses a cache (use_cache=True)")
    p.add_argument("--transformers", metavar="VERSION",
                   help="the transformers release that reads the batch where it trains (e.g. 4.46.3); default: the "
                        "one installed here. The verdict names it (docs/checker-releases.md: what each release does)")
    p.add_argument("--cp", metavar="N", help="the files are context-parallel rank batches (written by `cp --out`, or a "
                                             "trainer's rank: input_ids, position_ids, labels, padding_mask, "
                                             "cu_seqlens[_padded][_rank]) of a split over N ranks: one file, or a "
                                             "folder / every file of the split")
    p.add_argument("--cp-scheme", default="zigzag-document", choices=("contiguous", "zigzag-row", "zigzag-document"),
                   help="how the split cut the rows (default zigzag-document: Transformer Engine's THD)")
    p.add_argument("--cp-rank", metavar="R", help="the rank of a single file that does not say it (cp_rank)")
    p.add_argument("--tp", default="1", help="with --sequence-parallel: the tensor-parallel size (default 1)")
    p.add_argument("--sequence-parallel", action="store_true", help="the split padded to lcm(2N, TP·N)")
    p.add_argument("--strict", action="store_true", help="warnings exit 1 too")
    p.add_argument("--format", default="table", choices=("table", "json"))


def special_ids(args):
    """``(EOS ids, tokenizer facts)`` from --eos-id, --tokenizer, or the --model folder's tokenizer.

    Only the EOS id: chat templates open every turn with the BOS-like token, so it would split
    one conversation into turns. An EOS id decides documents only where nothing stronger marks them.
    """
    eos = tuple(dict.fromkeys(args.eos_id or ()))
    spec = args.tokenizer or args.model
    if not args.tokenizer and args.model and is_model_path(args.model):

        folder = Path(args.model).expanduser()
        if not any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
            spec = None      # a model folder without a tokenizer: no EOS evidence (say --eos-id to give one)
    if not spec or args.eos_id:
        return eos, None
    from packing_core.check.evidence import tokenizer_facts
    from packing_core.models.tokenizers import load_tokenizer

    facts = tokenizer_facts(load_tokenizer(spec), spec)
    if not facts.eos_ids:
        raise InputError(f"the tokenizer {spec} has no EOS id: give --eos-id N")
    return eos, facts


def list_model_types(out, fmt: str = "table") -> int:
    """Every model type of the families table: its layer kinds, and whether its mask call sees position resets."""
    from packing_core.attention.families import known_families, table_version

    built = known_families(built=True)
    if fmt == "json":
        dump_json({"transformers": table_version(),
                   "measured": [{"model_type": f.model_type, "kinds": list(f.kinds),
                                 "mask_sees_resets": bool(f.mask_sees_resets)} for f in built],
                   "not_measured": [f.model_type for f in known_families(built=False)]}, out)
        return 0
    out.write(f"{len(built)} model types measured on transformers {table_version()}: the layers that mix tokens, "
              "and whether position resets reach the attention mask (docs/checker-guide.md: What each model family reads)\n")
    for fam in built:
        mask = "" if "attention" not in fam.kinds or fam.mask_sees_resets else "  mask without position_ids"
        out.write(f"  {fam.model_type:<28} {' + '.join(fam.kinds)}{mask}\n")
    out.write(f"not measured here: {len(known_families(built=False))} (multimodal wrappers, or too large when tiny)\n")
    return 0


def model_type_of(args) -> str | None:
    """--model-type, or the model_type of --model's config.json (a folder); one line if they disagree."""
    from packing_core.check.mixers import model_family
    from packing_core.models.folders import config_model_type

    given = args.model_type
    if given is not None and not given.strip():
        raise InputError("--model-type is empty: give a transformers model_type (llama, qwen3_next, lfm2, ...), or "
                         "leave it out; list them: python -m packing_core check --list-model-types")
    read = config_model_type(Path(args.model).expanduser()) if args.model and is_model_path(args.model) else None
    if given and read and model_family(given).model_type != model_family(read).model_type:
        raise InputError(f"--model-type {given} disagrees with {args.model}'s config.json (model_type {read!r}): "
                         "drop --model-type, the folder says it")
    name = given or read
    return model_family(name).model_type if name else None


def run_model(model, check, args, model_type):
    """``(run verdict, causality, skipped)``: the batch run as given and the causality check, or why not here."""
    from packing_core.verify import run_hf_batch
    from packing_core.verify.causality import causality_of_batch

    refused = next((f for f in check.errors if f.name == "model_refuses_batch"), None)
    if refused is not None:
        return None, None, (f"model run skipped: {refused.detail}. The verdict above is judged from "
                            f"{model_type}'s code (the families table), not run here")
    try:
        verdict = run_hf_batch(model, check, model_name=args.model, use_cache=args.use_cache)
        return verdict, causality_of_batch(model, check, use_cache=args.use_cache), ""
    except InputError:
        raise
    except (ValueError, RuntimeError, NotImplementedError) as e:     # the library refused the batch as given
        said = " ".join(str(e).split())[:300]
        return None, None, (f"model run failed here ({type(e).__name__}: {said}). The verdict above is judged "
                            "from the code, not run")


def built_with(args) -> str | None:
    """The attention implementation a model folder is loaded with: the one the check runs, when it can run here."""
    return args.attn_implementation if args.attn_implementation in ("sdpa", "eager") else None
def run_cp(args, out) -> int:
    """``--cp``: one rank's batch, or every rank's (a folder, several files), for its CP size and scheme."""
    from packing_core.check.files import load_batch_file
    from packing_core.check.ranks import check_cp_ranks, check_rank_batch
    from packing_core.check.stream import stream_files
    from packing_core.cli.cp import _whole, cp_sizes
    from packing_core.parallel.layout import MAX_TP

    if args.model or args.model_type:
        raise InputError("--cp checks rank batches without a model: drop --model / --model-type")
    (cp,) = cp_sizes(args.cp) if "," not in str(args.cp) else (None,)
    if cp is None:
        raise InputError("check --cp takes one size, the split's: e.g. --cp 2")
    tp = _whole(args.tp, "--tp", MAX_TP)
    rank = None
    if args.cp_rank is not None:
        if not str(args.cp_rank).strip().isdigit() or len(str(args.cp_rank).strip()) > 12:
            raise InputError(f"--cp-rank must be a whole number from 0, got {escaped(args.cp_rank)[:40]!r}")
        rank = int(args.cp_rank)
        if rank >= cp:
            raise InputError(f"--cp-rank {rank} is outside CP {cp} (ranks 0 to {cp - 1})")
    files = stream_files(args.file)
    if len(files) > cp:
        raise InputError(f"CP {cp} has {cp} ranks, but {len(files)} files were given: give one rank's file or the "
                         f"{cp} files of one split")
    kw = dict(tp=tp, sequence_parallel=args.sequence_parallel)
    if len(files) == 1 and not Path(args.file[0]).is_dir():
        result = check_rank_batch(load_batch_file(files[0]), cp, args.cp_scheme, rank=rank, **kw)
    else:
        if rank is not None:
            raise InputError("--cp-rank names the rank of one file; the files of a split each say theirs")
        result = check_cp_ranks([load_batch_file(f) for f in files], cp, args.cp_scheme,
                                names=[f.name for f in files], **kw)
    if args.format == "json":
        dump_json(result.to_dict(), out)
    else:
        out.write(result.format_table() + "\n")
    return result.exit_code(args.strict)


def run(args, out, err) -> int:
    if args.list_model_types:
        return list_model_types(out, args.format)
    if args.cp is not None:
        if not args.file:
            raise InputError("give a rank's batch file, or the folder of a split's files: check FILE --cp N")
        return run_cp(args, out)
    if not args.file:
        raise InputError("give a batch file, several, or a folder: check FILE (--list-model-types lists the "
                         "model types the lab knows)")
    vet_model(args.model)
    if args.transformers is not None and args.model is not None:
        from packing_core.attention.releases import release_rules

        if not release_rules(args.transformers).installed:
            raise InputError(f"--model runs the batch on the transformers installed here, not {args.transformers}: "
                             "run check --model in the trainer's environment, or drop --transformers")
    from packing_core.check import SCOPE_NOTE, check_all_implementations, check_hf_batch, check_stream, load_batch_file

    model_type = model_type_of(args)
    model = None
    if args.model is not None and not is_model_path(args.model):      # a registered model: its config names it
        from packing_core.check.mixers import model_family
        from packing_core.verify.run import load_causal_lm

        model, _ = load_causal_lm(args.model, attn_implementation=built_with(args))
        model_type = model_type or model_family(model.config.model_type).model_type
    eos, facts = special_ids(args)
    options = dict(use_cache=args.use_cache, eos_ids=eos, labels=args.labels,
                   allow_cross_document=args.allow_cross_document, tokenizer=facts,
                   mask_convention=args.mask_convention, model_type=model_type, kernels=args.kernel,
                   transformers=args.transformers)
    scope = "" if model_type else SCOPE_NOTE
    if len(args.file) > 1 or Path(args.file[0]).is_dir():     # a stream: packing on?, fill, the worst batch
        impl = "sdpa" if args.attn_implementation == "all" else args.attn_implementation
        summary = check_stream(args.file, impl, **options)
        if args.format == "json":
            dump_json({**summary.to_dict(), "scope": scope}, out)
        else:
            out.write(summary.format_table() + "\n" + (scope + "\n" if scope else ""))
        if summary.refused:     # the summary above; the refused files as the one error line (exit 2)
            raise InputError(summary.refusal())
        return 1 if any(b.errors or (args.strict and b.warnings) for b in summary.batches) else 0
    batch = load_batch_file(args.file[0])
    every = args.attn_implementation == "all"
    checks = (list(check_all_implementations(batch, **options)) if every
              else [check_hf_batch(batch, args.attn_implementation, compare=True, **options)])
    verdict = reconciled = causal = None
    skipped = ""
    if args.model is not None:
        if model is None:
            from packing_core.verify.run import load_causal_lm

            model, _ = load_causal_lm(args.model, attn_implementation=built_with(args))
        verdict, causal, skipped = run_model(model, checks[0], args, model_type)
        if verdict is not None:
            from packing_core.verify.batch_run import reconcile

            reconciled = reconcile(checks[0], verdict, strict=args.strict)
    if args.format == "json":
        dump_json({"checks": [c.to_dict() for c in checks], "model_run": verdict and verdict.to_dict(),
                   "reconciled": reconciled and reconciled.to_dict(), "causality": causal and causal.to_dict(),
                   "model_run_skipped": skipped, "scope": scope}, out)
    else:
        if len(checks) == 1:
            out.write(checks[0].format_table() + "\n")
        else:
            out.write("\n".join(c.verdict for c in checks) + "\n\n")
            out.write("\n\n".join(c.format_table() for c in checks if not c.sound or c.warnings) + "\n")
        if scope:
            out.write(scope + "\n")
        if verdict is not None:
            out.write("\n" + verdict.format_table() + "\n" + reconciled.line + "\n")
        if causal is not None:
            out.write("\n" + causal.format_table() + "\n")
        if skipped:
            out.write("\n" + skipped + "\n")
    codes = [c.exit_code(args.strict) for c in checks]
    if reconciled is not None:          # the run decides for the implementation it ran
        codes[0] = reconciled.exit_code
    if causal is not None and causal.future_visible:
        codes.append(1)
    return max(codes)
