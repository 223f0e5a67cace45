"""Command line: ``packing-lab COMMAND`` (or ``python -m packing_core COMMAND``), one module per command here.

The lab adds its own commands (``zoo``, ``warm``) in ``packing_lab.cli``; ``packing-lab`` runs them all.

    report    utilisation and cost of every padding and packing strategy            report.py
    balance   a strategy's rows over data-parallel ranks and micro-batches           balance.py
    stream    a stream packed from a buffer of N documents, its state saved, resumed  stream.py
    scan      files, folders or globs of shards into a length profile (JSON)         scan.py
    check     a trainer's batch file, for the attention that will read it            check.py
    verify    documents alone and packed on a model: did packing change the logits?  verify.py
    cp        packed rows over context-parallel ranks: work per rank, pads, rank files cp.py

``common.py`` holds what they share (the parser, bounded whole numbers, the data arguments of
``report`` and ``balance``, escaping); ``dispatch.py`` builds the parser from ``COMMANDS`` and
runs ``main``. A command module has ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args, out, err) -> exit code``. Examples::

    python -m packing_core report --lengths 120,90,300,40,55,30,210,65 --context 512
    python -m packing_core report --synthetic support-tickets --strategy bfd --format json
    python -m packing_core report data.parquet --column text
    python -m packing_core report chats.jsonl --tokenizer smollm2       (messages, prompt/completion, text, lengths)
    python -m packing_core balance --synthetic long-tailed --context 2048 --ranks 8 --micro-batches 4
    python -m packing_core stream --synthetic support-tickets --buffer-size 64 --documents 1000 --save-state s.json
    python -m packing_core stream --synthetic support-tickets --state s.json
    python -m packing_core scan data/ --tokenizer smollm2 --out profile.json
    python -m packing_core report --profile profile.json
    python -m packing_core check batch.safetensors --attn-implementation all --eos-id 2
    python -m packing_core check batch.safetensors --model smollm2
    python -m packing_core verify --model tiny-rope --mask off
    python -m packing_core verify --model smollm2 --attn-implementation sdpa --use-cache
    python -m packing_core cp --synthetic support-tickets --cp 2,4,8
    python -m packing_core cp --lengths 7,5,12,3 --context 32 --cp 2 --scheme zigzag-document --out ranks/
    python -m packing_core check ranks/ --cp 2 --cp-scheme zigzag-document

Bad input prints one line, ``error: ...``, to stderr and exits 2; an unexpected exception is a bug of the lab:
its traceback and one line saying so go to stderr, exit 3. ``verify`` exits 0 when packing changed nothing
within tolerance, 1 when it did. ``check`` exits 1 on an error finding (on a warning too with ``--strict``),
or when ``--model`` shows a leak.
"""
from typing import TYPE_CHECKING

from packing_core._lazy import lazy_exports

if TYPE_CHECKING:
    from .dispatch import main

__all__, __getattr__, __dir__ = lazy_exports(__name__, __file__)
