"""The releases table: its installed row against the installed library's code and a run, its coverage, its verdicts."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from packing_core._validate import InputError
from packing_core.attention.releases import (
    covered_span,
    family_mask_call,
    installed_release,
    ranges,
    release_key,
    release_rules,
)
from packing_core.attention.semantics import BatchTensors, effective_attention
from packing_core.check import check_hf_batch
from tools import releases_code, releases_probe

# three documents of 7, 9 and 5 tokens, positions restarting per document, no mask: what the collator emits
COLLATOR_BATCH = {"input_ids": [list(range(5, 26))],
                  "position_ids": [list(range(7)) + list(range(9)) + list(range(5))]}


def test_the_installed_releases_rules_are_read_from_its_own_code():
    facts = releases_code.read_release(releases_code.Source.installed(), {})
    rules = release_rules()
    assert rules.installed and rules.covered
    for name, value in facts["rules"].items():
        got = getattr(rules, name)
        assert (list(got) if isinstance(got, tuple) else got) == value, name


def test_the_families_mask_calls_of_the_installed_release_are_read_from_its_code():
    from packing_core.attention.families import family

    src = releases_code.Source.installed()
    rules = release_rules()
    for mt in ("llama", "opt", "gpt2", "bamba", "roberta"):
        assert family_mask_call(mt, rules) == releases_code.family_mask(src, family(mt).modeling), mt


@pytest.mark.parametrize("family_", ["llama", "opt"])
def test_the_installed_releases_measured_cells_hold_on_a_run_here(family_):
    """The probe's own cells for the installed release (written by tools/releases_table.py) hold in this process."""
    from packing_core.attention.releases import _stored

    stored = _stored()["measured"].get(installed_release())
    if stored is None:
        pytest.skip(f"transformers {installed_release()} is covered by another measured release of its range")
    model = releases_probe.build(family_, "sdpa")
    for setup in ("position_ids", "mask_ones", "use_cache", "mask_4d"):
        cell = releases_probe.cell(model, setup)
        assert cell["status"][0].upper() == stored[f"{family_}|sdpa"][setup][0], setup


def test_the_table_covers_its_declared_span_and_an_unmeasured_range_is_never_judged():
    rs = ranges()
    assert release_key(rs[0]["from"]) <= (4, 44, 0) and release_key(rs[-1]["to"]) >= release_key(installed_release())
    assert all(r["measured"] for r in rs), [f"{r['from']}..{r['to']}" for r in rs if not r["measured"]]
    for r in rs:
        assert all(release_key(r["from"]) <= release_key(m) <= release_key(r["to"]) for m in r["measured"])
        for release in (r["from"], r["to"]):
            assert release_rules(release).covered == bool(r["measured"]), release
            if not r["measured"]:
                assert "not measured" in check_hf_batch(COLLATOR_BATCH, transformers=release).verdict
    for a, b in zip(rs, rs[1:]):
        assert release_key(a["to"]) < release_key(b["from"])


def test_packed_detection_arrives_in_4_53_1():
    assert not release_rules("4.53.0").packed_detection and release_rules("4.53.1").packed_detection


def test_position_resets_leak_under_sdpa_and_eager_on_4_46_and_not_on_4_57():
    for impl in ("sdpa", "eager"):
        assert not check_hf_batch(COLLATOR_BATCH, impl, transformers="4.46.3").sound
        assert check_hf_batch(COLLATOR_BATCH, impl, transformers="4.57.6").sound


def test_the_verdict_names_the_release_it_judged_for():
    assert check_hf_batch(COLLATOR_BATCH, transformers="4.46.3").verdict.endswith("judged for transformers 4.46.3")
    assert f"transformers {installed_release()} (installed)" in check_hf_batch(COLLATOR_BATCH).verdict


@pytest.mark.parametrize("release", ["4.40.0", "9.0.0"])
def test_a_release_outside_the_span_is_never_sound(release):
    for impl in ("sdpa", "eager", "flash_attention_2"):
        c = check_hf_batch(COLLATOR_BATCH, impl, transformers=release)
        assert not c.sound and "not measured for transformers" in c.verdict and "SOUND" not in c.verdict


def test_the_lab_s_own_backends_do_not_depend_on_the_release():
    assert check_hf_batch({**COLLATOR_BATCH, "cu_seq_lens_q": [0, 7, 16, 21]}, "varlen", transformers="4.40.0").sound


def test_flash_reads_several_rows_flattened_before_4_53_and_one_row_after():
    rows = BatchTensors(np.array([[5, 6, 7, 8], [1, 2, 3, 4]]), position_ids=np.array([[0, 1, 0, 1], [0, 1, 2, 0]]))
    old = effective_attention(rows, "flash_attention_2", rules=release_rules("4.46.3"))
    new = effective_attention(rows, "flash_attention_2", rules=release_rules("5.24.0"))
    assert old.segment_ids.tolist() == [[0, 0, 1, 1], [2, 2, 2, 3]]
    assert new.segment_ids.tolist() == [[0, 0, 0, 0], [1, 1, 1, 1]]


def test_cu_seq_lens_are_not_read_by_flash_before_4_47():
    t = BatchTensors(np.arange(6)[None], cu_seq_lens_q=np.array([0, 3, 6]), cu_seq_lens_k=np.array([0, 3, 6]),
                     max_length_q=3, max_length_k=3)
    assert len(set(effective_attention(t, "flash_attention_2", rules=release_rules("4.46.3")).segment_ids[0])) == 1
    assert len(set(effective_attention(t, "flash_attention_2", rules=release_rules("4.53.1")).segment_ids[0])) == 2


def test_a_family_the_release_lacks_is_named_as_such():
    with pytest.raises(InputError, match="'lfm2' is not in transformers 4.46.3"):
        check_hf_batch(COLLATOR_BATCH, model_type="lfm2", transformers="4.46.3")


@pytest.mark.parametrize("release", ["latest", "", "   ", "\u0664.\u0664\u0666", "4.46.3; rm", "4." + "4" * 80])
def test_a_release_that_is_not_a_version_is_refused_in_one_line(release):
    # an empty string is not "the installed one" (None is); Arabic-Indic digits are not 4.46
    with pytest.raises(InputError, match="is not a version"):
        check_hf_batch(COLLATOR_BATCH, transformers=release)


def test_a_pre_release_of_the_installed_release_is_not_called_installed(monkeypatch):
    import packing_core.attention.releases as releases
    monkeypatch.setattr(releases, "installed_release", lambda: "4.57.6")
    assert release_rules("4.57.6").installed and release_rules("v4.57.6 ").installed
    assert not release_rules("4.57.6rc1").installed and not release_rules("4.57.6.dev0").installed
    assert release_rules(None).release == "4.57.6"


def test_the_span_is_the_first_and_last_release_read():
    assert covered_span() == (ranges()[0]["from"], ranges()[-1]["to"])


@pytest.mark.skipif(importlib.util.find_spec("safetensors") is None, reason="needs safetensors")
def test_check_model_runs_and_agrees_with_the_run_on_the_installed_release(tmp_path, capsys):
    """`check --model` builds and calls a saved tiny Llama through the installed release's API; other releases:
    tools/releases_model_check.py (one venv each, built by tools/release_venvs.py)."""
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    from packing_core.cli import main

    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                      num_key_value_heads=2, num_hidden_layers=2, max_position_embeddings=256, initializer_range=0.1)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(tmp_path / "model")
    save_file({k: torch.tensor(v) for k, v in COLLATOR_BATCH.items()}, tmp_path / "batch.safetensors")
    for impl in ("sdpa", "eager"):
        code = main(["check", "--attn-implementation", impl, "--model", str(tmp_path / "model"),
                     str(tmp_path / "batch.safetensors")])
        out = capsys.readouterr().out
        assert "they agree" in out and code == (0 if release_rules().packed_detection else 1), out


def test_the_guard_judges_for_the_release_it_runs_under_and_outside_the_span_warns_without_raising(monkeypatch):
    import warnings

    import packing_core.integrations.hook as hook

    monkeypatch.setattr(hook, "release_rules", lambda release=None: release_rules(release or "4.40.0"))
    model = releases_probe.build("llama", "sdpa")
    with pytest.warns(UserWarning, match="not measured for transformers 4.40"):
        g = hook.guard(model, batches=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model(input_ids=torch.tensor(COLLATOR_BATCH["input_ids"]) % 256,
              position_ids=torch.tensor(COLLATOR_BATCH["position_ids"]), use_cache=False)
    assert g.release == "4.40.0" and "not measured for transformers 4.40" in g.checks[0].verdict
