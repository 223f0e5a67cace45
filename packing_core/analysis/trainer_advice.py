"""The settings to paste: the lab's advice as TRL, transformers and torchtune arguments, with what each does
to an example longer than the context.

Each entry mirrors the library's own code (cited below), and a test constructs the config, collator or
dataset from the very text of each snippet, so an argument the library does not take fails there:

- **TRL 1.16** ``trl/trainer/sft_config.py`` ``SFTConfig``: ``packing`` (default False), ``packing_strategy``
  (default ``"bfd"``; choices ``bfd``, ``bfd_split``, ``wrapped``), ``max_length`` (default 1024: the row
  length when packing), ``padding_free`` (default False). ``trl/trainer/sft_trainer.py`` ``SFTTrainer.__init__``
  turns padding-free on for ``bfd`` and ``bfd_split`` whatever ``padding_free`` says, and
  ``_prepare_dataset`` truncates to ``max_length`` only when not packing. ``trl/data_utils.py``
  ``pack_dataset`` -> ``_pack_bfd``: ``"bfd"`` truncates a sequence longer than ``seq_length`` to its first
  ``seq_length`` tokens (``on_seq_length_overflow="truncate"``), ``"bfd_split"`` cuts it into pieces of
  ``seq_length`` packed like any other (``"split"``). Without packing, transformers' ``TrainingArguments``
  (which ``SFTConfig`` extends) groups similar lengths with ``train_sampling_strategy="group_by_length"``
  (``LengthGroupedSampler``): bucketing.
- **transformers 5.24** ``transformers/data/data_collator.py`` ``DataCollatorWithFlattening(return_position_ids=True,
  separator_id=-100, return_flash_attn_kwargs=False, return_seq_idx=False, position_ids_start=0)``: the whole
  batch becomes one row ``[1, total tokens]``; it never truncates, so length is the tokenizer's business.
- **torchtune 0.6.1** ``torchtune/datasets/_packed.py`` ``PackedDataset(ds, *, max_seq_len, padding_idx=0,
  max_packs=None, split_across_pack=False)``: packs in the dataset's order. With ``split_across_pack=False``
  a sample that does not fit starts the next pack (the lab's next-fit) and a sample longer than
  ``max_seq_len`` raises ``ValueError``; with ``True`` the samples run on across packs, cut at every
  ``max_seq_len`` (the lab's concat-cut).

Which releases have each setting is read from the releases' own code (``tools/settings_releases.py``,
``settings_releases.json``): :func:`setting_releases`.

>>> trl = trainer_settings(2048, "instruction")[0]
>>> trl.call
"SFTConfig(packing=True, packing_strategy='bfd', max_length=2048, padding_free=True)"
>>> trainer_settings(2048, "pretraining")[0].call
"SFTConfig(packing=True, packing_strategy='bfd_split', max_length=2048, padding_free=True)"
>>> trainer_settings(2048, "pretraining")[2].call
'PackedDataset(ds, max_seq_len=2048, split_across_pack=True)'
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from packing_core._validate import InputError, as_context

__all__ = ["FRAMEWORKS", "TrainerSettings", "setting_releases", "settings_markdown", "trainer_settings"]
_RELEASES = Path(__file__).with_name("settings_releases.json")   # data, written by tools/settings_releases.py


@cache
def _releases() -> dict:
    return json.loads(_RELEASES.read_text(encoding="utf-8"))


def setting_releases(framework: str, purpose: str = "instruction") -> str:
    """The releases that have each pasted setting, read from their code: one sentence per framework.

    >>> setting_releases("TRL").split(", ")[2]
    "packing_strategy from 0.19.1 (default 'ffd'"
    >>> setting_releases("transformers").split(", ")[2]
    'return_flash_attn_kwargs and return_seq_idx from 4.52.1'
    """
    d = _releases()
    if framework == "TRL":
        t, s = d["trl"], d["trl_strategies"]
        oldest = d["trl_read"][0]
        packing = f"from TRL {t['packing']}" + (" or earlier (the oldest read)" if t["packing"] == oldest else "")
        first_default = d["trl_default_strategy"][0][1]
        return (f"SFTConfig(packing=...) {packing}, padding_free from {t['padding_free']}, packing_strategy from "
                f"{t['packing_strategy']} (default {first_default!r}, 'bfd' from {s['bfd']}), 'bfd_split' from "
                f"{s['bfd_split']}.")
    if framework == "transformers":
        c = d["transformers_collator"]
        return (f"DataCollatorWithFlattening from transformers {c['return_position_ids']} (return_position_ids), "
                f"separator_id from {c['separator_id']}, return_flash_attn_kwargs and return_seq_idx from "
                f"{c['return_flash_attn_kwargs']}, position_ids_start from {c['position_ids_start']}.")
    raise InputError(f"unknown framework {framework!r}: choose TRL or transformers")

FRAMEWORKS = ("TRL 1.16", "transformers 5.24", "torchtune 0.6.1")


@dataclass(frozen=True)
class TrainerSettings:
    """One framework's settings: ``code`` to paste, ``call`` its key line, and what happens to long examples."""

    framework: str
    code: str
    call: str
    overlong: str
    source: str
    first_run: str = ""     # TRL: the bucketing config of a first run, when asked for one
    releases: str = ""      # which releases have these settings (setting_releases)
    since: str = ""         # the first release that has every setting of ``call`` ("TRL 0.20.0")

    def to_dict(self) -> dict:
        return asdict(self)


def _trl_since(strategy: str) -> str:
    """The first TRL release read that has ``packing``, ``padding_free``, ``packing_strategy`` and ``strategy``.

    >>> _trl_since("bfd"), _trl_since("bfd_split")
    ('TRL 0.20.0', 'TRL 1.0.0')
    """
    d = _releases()
    firsts = [d["trl"][k] for k in ("packing", "padding_free", "packing_strategy")] + [d["trl_strategies"][strategy]]
    return "TRL " + max(firsts, key=lambda r: tuple(int(x) for x in r.split(".")[:3]))


def _trl(context: int, instruction: bool, bucket_first: bool, over: str) -> TrainerSettings:
    strategy = "bfd" if instruction else "bfd_split"
    call = f"SFTConfig(packing=True, packing_strategy='{strategy}', max_length={context}, padding_free=True)"
    first = f"SFTConfig(max_length={context}, train_sampling_strategy='group_by_length')" if bucket_first else ""
    lines = ["from trl import SFTConfig", ""]
    if bucket_first:
        lines += ["# first run: no packing; batches of similar lengths, each padded to its longest",
                  f"first_run = {first}", "",
                  "# to pack, once the pipeline is trusted"]
    lines += ["args = SFTConfig(",
              "    packing=True,",
              f'    packing_strategy="{strategy}",  # best-fit decreasing; longer examples are '
              + ("truncated" if instruction else "split into pieces"),
              f"    max_length={context},  # the length of every packed row",
              "    padding_free=True,  # on anyway with bfd: the per-device batch as one row, no mask",
              "    # padding-free is for FlashAttention: on sdpa its one mask is (batch tokens)²",
              '    model_init_kwargs={"attn_implementation": "flash_attention_2"},',
              ")"]
    overlong = (f"{over}packing_strategy='bfd' truncates each example longer than max_length={context} to its first "
                f"{context} tokens (the end is lost); filter the dataset by length first to drop them instead, or "
                "use 'bfd_split' to cut them into pieces." if instruction else
                f"{over}packing_strategy='bfd_split' cuts each example longer than max_length={context} into pieces "
                f"of {context} tokens, packed like separate examples; 'bfd' would truncate them.")
    note = (" TRL packs each map batch of 1,000 examples on its own, so it fills slightly fewer slots than bfd over "
            "the whole set.")
    return TrainerSettings("TRL 1.16", "\n".join(lines), call, overlong + note,
                           "trl/trainer/sft_config.py SFTConfig; trl/trainer/sft_trainer.py SFTTrainer.__init__ "
                           "(padding_free for bfd, bfd_split); trl/data_utils.py pack_dataset, _pack_bfd; "
                           "transformers/training_args.py train_sampling_strategy", first, setting_releases("TRL"),
                           _trl_since(strategy))


def _flattening(context: int, instruction: bool, over: str) -> TrainerSettings:
    call = ("DataCollatorWithFlattening(return_position_ids=True, separator_id=-100, return_flash_attn_kwargs=True, "
            "return_seq_idx=False)")
    code = "\n".join([
        "from transformers import DataCollatorWithFlattening",
        "",
        "collator = DataCollatorWithFlattening(",
        "    return_position_ids=True,        # positions restart at 0 for every example",
        "    separator_id=-100,               # each example's first label: nothing trained across an edge",
        "    return_flash_attn_kwargs=True,   # cu_seq_lens_q/k and max_length_q/k for FlashAttention's varlen",
        "    return_seq_idx=False,            # True for models whose Mamba or convolution layers read seq_idx",
        ")",
        "# Trainer(model=model, args=args, train_dataset=tokenized, data_collator=collator): no attention_mask",
    ])
    overlong = (f"{over}The collator joins the whole batch into one row [1, total tokens] and never truncates: cut "
                f"examples at {context} when tokenising (tokenizer(..., truncation=True, max_length={context})"
                + (", or drop the longer ones)" if instruction else ", or split long documents into pieces first)")
                + " and size the batch so its tokens fit in memory.")
    return TrainerSettings("transformers 5.24", code, call, overlong,
                           "transformers/data/data_collator.py DataCollatorWithFlattening.__init__, __call__",
                           releases=setting_releases("transformers"))


def _torchtune(context: int, instruction: bool, over: str) -> TrainerSettings:
    split = not instruction
    call = f"PackedDataset(ds, max_seq_len={context}, split_across_pack={split})"
    code = "\n".join([
        "from torchtune.datasets import PackedDataset",
        "",
        "packed = PackedDataset(",
        '    ds,  # a map-style dataset of {"tokens", "labels"}',
        f"    max_seq_len={context},  # the length of every pack",
        f"    split_across_pack={split},  # " + ("samples run on into the next pack (concat-cut)" if split else
                                             "a sample that does not fit starts the next pack (next-fit)"),
        ")",
    ])
    overlong = (f"{over}torchtune packs in the dataset's order, one pack at a time. With split_across_pack=False a "
                f"sample longer than max_seq_len={context} stops packing with a ValueError: truncate while "
                "tokenising (the tokenizer's max_seq_len) or filter first." if instruction else
                f"{over}torchtune packs in the dataset's order and, with split_across_pack=True, cuts the stream at "
                f"every {context} tokens, so any sample may be split across packs, long or not.")
    return TrainerSettings("torchtune 0.6.1", code, call, overlong,
                           "torchtune/datasets/_packed.py PackedDataset.__init__, _pack, _split_and_add_pack")


def trainer_settings(context: int, purpose: str, *, bucket_first: bool = False,
                     over_context: int = 0) -> tuple[TrainerSettings, ...]:
    """TRL's, transformers' and torchtune's settings for packing rows of ``context`` tokens.

    ``purpose`` is ``"instruction"`` (examples stay whole: truncated or dropped, never split) or
    ``"pretraining"`` (long documents split). ``bucket_first`` adds TRL's bucketing config for a first run;
    ``over_context`` (documents longer than the context) is named in each over-long sentence.
    """
    context = as_context(context)
    if purpose not in ("instruction", "pretraining"):
        raise InputError(f"purpose must be 'instruction' or 'pretraining', got {purpose!r}")
    instruction = purpose == "instruction"
    n = int(over_context)
    over = f"{n:,} of these documents {'is' if n == 1 else 'are'} longer than {context}. " if n > 0 else ""
    return (_trl(context, instruction, bucket_first, over), _flattening(context, instruction, over),
            _torchtune(context, instruction, over))


def settings_markdown(settings) -> str:
    """The settings as Markdown: per framework a heading, its code block, what it does to long examples, its source."""
    parts = []
    for s in settings:
        have = f" Releases: {s.releases}" if s.releases else ""
        parts.append(f"**{s.framework}**\n\n```python\n{s.code}\n```\n\n{s.overlong} (Mirrors {s.source}.){have}")
    return "\n\n".join(parts)
