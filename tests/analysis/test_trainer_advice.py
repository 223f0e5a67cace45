"""The settings to paste, run against the real libraries: each snippet's own text builds the config, collator or
dataset, and each sentence about over-long examples is what that library does."""
import dataclasses
import functools
import sys
import types

import numpy as np
import pytest

from packing_core.analysis import length_stats, recommended_settings
from packing_core.analysis.tables import recommend, strategy_table
from packing_core.analysis.trainer_advice import settings_markdown, trainer_settings
from packing_core.data import synthetic_lengths
from packing_core.packing import make_plan

PURPOSES = ("instruction", "pretraining")


def _run(code: str, **names) -> dict:
    space = dict(names)
    exec(compile(code, "<snippet>", "exec"), space)
    return space


@pytest.fixture
def sft_config(monkeypatch):
    """TRL's SFTConfig; on this machine (no GPU) with use_cpu=True added, as bf16 needs a GPU. Every argument of a
    snippet still reaches the real class, so a misspelt one raises TypeError."""
    import trl
    from trl import SFTConfig

    monkeypatch.setattr(trl, "SFTConfig", functools.partial(SFTConfig, use_cpu=True))
    return SFTConfig


def _choices(cls, name: str) -> list:
    return next(f.metadata["choices"] for f in dataclasses.fields(cls) if f.name == name)


@pytest.mark.parametrize("purpose", PURPOSES)
def test_the_trl_snippet_builds_trls_own_config_with_those_values(sft_config, purpose):
    trl = trainer_settings(2048, purpose, bucket_first=True)[0]
    space = _run(trl.code)
    args, first = space["args"], space["first_run"]
    strategy = "bfd" if purpose == "instruction" else "bfd_split"
    assert (args.packing, args.packing_strategy, args.max_length, args.padding_free) == (True, strategy, 2048, True)
    assert args.packing_strategy in _choices(sft_config, "packing_strategy")        # TRL does not check at init
    assert first.packing is False and first.max_length == 2048
    assert first.train_sampling_strategy == "group_by_length" in _choices(sft_config, "train_sampling_strategy")
    # the one-line forms say the same as the block
    assert _run(f"from trl import SFTConfig\nx = {trl.call}")["x"].packing_strategy == strategy
    assert _run(f"from trl import SFTConfig\nx = {trl.first_run}")["x"].train_sampling_strategy == "group_by_length"


def test_a_misspelt_argument_fails_the_snippet_test(sft_config):
    code = trainer_settings(2048, "instruction")[0].code
    with pytest.raises(TypeError, match="packing_strategi"):
        _run(code.replace("packing_strategy=", "packing_strategi="))


def test_trl_turns_padding_free_on_for_both_bfd_strategies_and_packs_them_as_the_sentences_say():
    import inspect

    from datasets import Dataset
    from trl import SFTTrainer
    from trl.data_utils import pack_dataset

    assert 'args.padding_free or (args.packing and args.packing_strategy in {"bfd", "bfd_split"})' in \
        inspect.getsource(SFTTrainer.__init__)
    data = Dataset.from_dict({"input_ids": [[1] * 7, [2] * 3, [3] * 2]})
    truncated = pack_dataset(data, 4, "bfd")["input_ids"]
    split = pack_dataset(data, 4, "bfd_split")["input_ids"]
    assert sum(map(len, truncated)) == 4 + 3 + 2 and max(map(len, truncated)) == 4      # 7 -> its first 4
    assert sorted(x for row in split for x in row) == sorted([1] * 7 + [2] * 3 + [3] * 2)  # nothing lost
    assert "truncates each example longer than max_length=4" in trainer_settings(4, "instruction")[0].overlong
    assert "cuts each example longer than max_length=4 into pieces" in trainer_settings(4, "pretraining")[0].overlong


@pytest.mark.parametrize("purpose", PURPOSES)
def test_the_transformers_snippet_builds_the_collator_that_flattens_without_truncating(purpose):
    flat = trainer_settings(16, purpose)[1]
    collator = _run(flat.code)["collator"]
    batch = collator([{"input_ids": [5, 6, 7]}, {"input_ids": list(range(40))}])
    assert batch["position_ids"].tolist() == [[0, 1, 2, *range(40)]]          # restarts per example
    assert batch["labels"][0, 0] == batch["labels"][0, 3] == -100               # no target across the edge
    assert batch["cu_seq_lens_q"].tolist() == [0, 3, 43] and "attention_mask" not in batch
    assert batch["input_ids"].shape == (1, 43)       # 40 > 16 tokens, kept whole: the collator never truncates
    assert "never truncates" in flat.overlong
    assert "seq_idx" not in batch and _run(flat.code.replace("return_seq_idx=False", "return_seq_idx=True"))[
        "collator"]([{"input_ids": [1, 2]}, {"input_ids": [3]}])["seq_idx"].tolist() == [[0, 0, 1]]


@pytest.fixture
def torchtune(monkeypatch):
    """torchtune 0.6.1's PackedDataset from the installed wheel, importable as the snippet imports it."""
    from tests.check.conftest import _torchtune_modules  # the one loader of torchtune's files

    found = _torchtune_modules()
    if found is None:
        from tests._trainers.vendor import library_file
        library_file("torchtune/datasets/_packed.py")        # skips (fails under CI) naming the install step
    datasets = types.ModuleType("torchtune.datasets")
    datasets.PackedDataset = found[0]
    monkeypatch.setitem(sys.modules, "torchtune", types.ModuleType("torchtune"))
    monkeypatch.setitem(sys.modules, "torchtune.datasets", datasets)
    return found[0]


def _samples(lengths):
    return [{"tokens": [d + 1] * n, "labels": [d + 1] * n} for d, n in enumerate(lengths)]


def _pack_rows(packs, context) -> list[list[int]]:
    """Each pack's sample lengths, the pad tail left out (torchtune appends it as one more 'sequence')."""
    rows = []
    for p in packs.packs:
        lens = p["seq_lens"].tolist()
        real = int((p["tokens"] != 0).sum())
        rows.append(lens if sum(lens[:-1]) != real else lens[:-1])
    return rows


@pytest.mark.parametrize("purpose", PURPOSES)
def test_the_torchtune_snippet_packs_as_the_labs_next_fit_or_concat_cut(torchtune, purpose):
    lengths = [5, 3, 6, 2, 7, 4]
    tune = trainer_settings(8, purpose)[2]
    packs = _run(tune.code, ds=_samples(lengths))["packed"]
    assert isinstance(packs, torchtune) and packs.max_seq_len == 8
    plan = make_plan(lengths, 8, "next-fit" if purpose == "instruction" else "concat-cut")
    b = plan.row_bounds()
    assert _pack_rows(packs, 8) == [plan.piece_len[b[r]:b[r + 1]].tolist() for r in range(plan.n_rows)]


def test_torchtune_refuses_a_sample_longer_than_a_pack_unless_split_as_the_sentence_says(torchtune):
    tune = trainer_settings(8, "instruction")[2]
    with pytest.raises(ValueError, match="Dataset sample is too long"):
        _run(tune.code, ds=_samples([3, 12]))
    assert "stops packing with a ValueError" in tune.overlong


def test_the_recommendation_ends_with_the_trl_switch_and_the_settings_follow_it():
    x = synthetic_lengths("support-tickets", n=5_000)
    stats, table = length_stats(x, 512), strategy_table(x, 512)
    advice = recommend(stats, table, "instruction")
    settings = recommended_settings(stats, table, "instruction")
    assert advice.startswith("First run: bucket.")
    assert advice.endswith(f" In TRL: first run `{settings[0].first_run}`, long run `{settings[0].call}`.")
    assert f"{stats.over_context:,} of these documents are longer than 512" in settings[0].overlong
    long_tailed = np.asarray(synthetic_lengths("long-tailed", n=20_000))
    s8, t8 = length_stats(long_tailed, 8192), strategy_table(long_tailed, 8192)
    assert recommend(s8, t8).startswith("Pack from the start")
    assert recommend(s8, t8).endswith(f" In TRL: `{recommended_settings(s8, t8)[0].call}`.")
    assert recommended_settings(s8, t8)[0].first_run == ""


def test_the_markdown_holds_each_framework_with_its_code_and_source():
    md = settings_markdown(trainer_settings(1024, "instruction"))
    assert md.count("```python") == 3
    for s in trainer_settings(1024, "instruction"):
        assert s.code in md and s.source in md and s.framework in md
