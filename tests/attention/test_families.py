"""The families table against the installed transformers: every row rebuilt from the real classes.

``test_each_family_row_is_what_the_installed_library_does`` builds each family's tiny model and
measures it again (about 40 s for all of them on one core); it fails when a transformers release
changes what a family's layers read, and the table is then rewritten with
``python -m tools.families_table --write``. The other tests read the stored table.
"""
import json

import pytest

from packing_core._validate import InputError
from packing_core.attention.families import (
    FUNCTION_KINDS,
    KERNELS,
    KINDS,
    SETUP_SIGNALS,
    SETUPS,
    STATUSES,
    family,
    known_families,
    layer_verdicts,
    nearest_setup,
    table_version,
)

transformers = pytest.importorskip("transformers")

from packing_core.verify.families_build import canonical_types  # noqa: E402
from tools.families_run import measure_family  # noqa: E402

BUILT = [f for f in known_families(built=True)]


def test_the_table_was_measured_on_the_installed_transformers_and_covers_each_of_its_families():
    assert table_version() == transformers.__version__, "rebuild: python -m tools.families_table --write"
    assert [f.model_type for f in known_families()] == list(canonical_types())
    assert len(BUILT) >= 150


@pytest.mark.parametrize("model_type", list(canonical_types()))
def test_each_family_row_is_what_the_installed_library_does(model_type):
    stored, rebuilt = family(model_type), measure_family(model_type)
    assert rebuilt.not_built == stored.not_built
    for name in ("causal_lm", "modeling", "attn_implementation", "aliases", "mask_call", "mask_sees_resets", "mixers"):
        assert getattr(rebuilt, name) == getattr(stored, name), name
    for setup, kind, old in stored.outcomes:
        new = rebuilt.outcome(setup, kind)
        assert (new.status, new.error) == (old.status, old.error), (setup, kind)
        if old.status == "leaks":   # the size may move with the numerics; a leak of another order is news
            assert old.max_diff / 10 < new.max_diff < old.max_diff * 10, (setup, kind, old.max_diff, new.max_diff)
    assert len(rebuilt.outcomes) == len(stored.outcomes)


def test_the_issues_headline_rows():
    """Qwen3-Next and LFM2 leak through their convolutions (and Qwen3-Next's recurrence) with position resets,
    while their attention isolates; Llama is sound; OPT and RoBERTa never show the resets to their mask."""
    for mt, leaking in (("qwen3_next", {"convolution", "recurrence"}), ("lfm2", {"convolution"}), ("llama", set())):
        f = family(mt)
        assert f.outcome("position_ids", "attention").status == "sound"
        assert {k for k in f.kinds if f.outcome("position_ids", k).status == "leaks"} == leaking
    for mt in ("opt", "roberta"):
        f = family(mt)
        assert not f.mask_sees_resets
        assert f.outcome("position_ids", "attention").status == "leaks"
        assert f.outcome("mask_4d", "attention").status == "sound"


def test_every_layer_kind_leaks_with_no_boundary_signal():
    """The positive control: a layer that mixes tokens must move something across documents in a naive packed
    row; otherwise the measurement could not see its leak (it is then marked unmeasured, never sound)."""
    for f in BUILT:
        for kind in f.kinds:
            assert f.outcome("none", kind).status in ("leaks", "refused", "unmeasured"), (f.model_type, kind)
            for setup in SETUPS:
                assert f.outcome(setup, kind).status in STATUSES


def test_a_mask_call_without_position_ids_is_measured_as_a_leak_and_one_with_them_isolates_unless_more_mixes():
    """What the code says (families_code reads the create_causal_mask call) and what the run shows agree:
    a mask that never sees position_ids leaks with resets alone; one that sees them is sound, unless the
    attention layer also mixes tokens outside its mask, in which case a 4D block mask does not help either."""
    for f in BUILT:
        if "attention" not in f.kinds or not f.mask_call:
            continue
        o = f.outcome("position_ids", "attention")
        if o.status not in ("sound", "leaks"):
            continue
        if not f.mask_sees_resets:
            assert o.status == "leaks", f.model_type
        elif o.status == "leaks":
            assert f.outcome("mask_4d", "attention").status == "leaks", f.model_type


def test_the_rules_predict_every_measured_cell():
    """layer_verdicts (the rules the check reads) against each measured setup, with no fast kernel installed."""
    for f in BUILT:
        for setup in SETUPS:
            verdicts = {v.kind: v for v in layer_verdicts(f.model_type, SETUP_SIGNALS[setup])}
            for kind in f.kinds:
                measured = f.outcome(setup, kind)
                if measured.status in ("sound", "leaks", "refused"):
                    assert verdicts[kind].status == measured.status, (f.model_type, setup, kind)


def test_the_reference_kernels_refuse_the_signals_the_rules_say_they_refuse():
    """transformers' fallback for a missing kernel raises on cu_seqlens and seq_idx, and runs on otherwise."""
    from transformers.integrations.hub_kernels import use_kernel_func_from_hub_with_fallback

    fn = use_kernel_func_from_hub_with_fallback("causal_conv1d_fn", "no_such_package_here")(lambda x, **kw: x)
    assert fn(3, cu_seq_lens_q=[0, 3]) == 3
    for name in ("cu_seqlens", "seq_idx"):
        with pytest.raises(ValueError, match="can't keep packed sequences apart"):
            fn(3, **{name: [0, 3]})


def test_every_kernel_a_mixer_reaches_is_described_and_every_kernel_function_has_a_kind():
    for f in BUILT:
        for m in f.mixers:
            assert m.kind in KINDS
            if m.name in FUNCTION_KINDS and m.receives:
                assert m.kernel in KERNELS, (f.model_type, m)
    assert {k.package for k in KERNELS.values()} == {"causal-conv1d", "mamba-ssm", "flash-linear-attention"}


def test_signals_that_never_reach_a_kernel_leave_it_leaking_even_with_the_kernel():
    """Mamba2ForCausalLM.forward keeps its **kwargs: seq_idx never reaches the mixers, fast kernel or not."""
    assert all(not m.receives for m in family("mamba2").mixers)
    v = layer_verdicts("mamba2", ["position_ids", "seq_idx"], kernels=["causal-conv1d", "mamba-ssm"])
    assert [x.status for x in v] == ["leaks", "leaks"]
    bamba = layer_verdicts("bamba", ["position_ids", "seq_idx"], kernels=["causal-conv1d", "mamba-ssm"])
    assert [(x.status, x.derived) for x in bamba] == [("sound", False), ("sound", True), ("sound", True)]


def test_a_cache_turns_position_resets_off_for_the_mask():
    v = {x.kind: x for x in layer_verdicts("llama", ["position_ids", "use_cache"])}
    assert v["attention"].status == "leaks" and v["attention"].needs == ("position_ids", "mask_4d")


def test_a_finding_sentence_names_the_layer_the_signal_and_the_kernel():
    conv, rec = layer_verdicts("qwen3_next", ["position_ids"])[1:]
    assert "`torch_chunk_gated_delta_rule`" in rec.why and "`cu_seq_lens`" in rec.why
    assert "flash-linear-attention" in rec.why and "runs from each document into the next" in rec.why
    assert conv.needs == ("seq_idx",) and conv.kernel == "causal-conv1d"


def test_aliases_and_unknown_types():
    assert family("exaone").model_type == "llama" and family("qwen3_5").model_type == "qwen3_5_text"
    with pytest.raises(InputError, match=rf"unknown model type .gpt5.: the nearest it knows: gptj, gpt2, .*{len(BUILT)} famil"):
        family("gpt5")
    with pytest.raises(InputError, match="'Qwen3-Next': the nearest it knows: qwen3_next, "):   # as a model card spells it
        family("Qwen3-Next")
    with pytest.raises(InputError, match=r"'nope': give the model_type .* --list-model-types\)$"):     # nothing near
        family("nope")
    with pytest.raises(InputError, match="unknown boundary signal"):
        layer_verdicts("llama", ["positions"])
    with pytest.raises(InputError, match="could not be measured here"):
        layer_verdicts("blt", ["position_ids"])


def test_the_nearest_setup_of_a_batch():
    assert nearest_setup(["position_ids", "use_cache"]) == "use_cache"
    assert nearest_setup(["position_ids", "mask_4d", "use_cache"]) == "mask_4d"
    assert nearest_setup(["cu_seq_lens"]) == "cu_seq_lens"


def test_the_table_is_json():
    assert json.loads(json.dumps([f.to_dict() for f in known_families()]))
    assert json.loads(json.dumps([v.to_dict() for v in layer_verdicts("lfm2", ["position_ids"])]))


def test_a_leak_outside_every_mixer_is_reported_as_unexplained():
    """BART's decoder numbers its positions itself (arange + cache length): with a perfect 4D mask the attention
    is sound, yet the logits differ; a family whose mixers explain its logits is not flagged."""
    assert family("bart").unexplained("mask_4d") and not family("bart").unexplained("none")
    assert not family("llama").unexplained("mask_4d") and not family("qwen3_next").unexplained("position_ids")


def test_a_signal_that_reaches_a_kernel_under_another_name_is_not_read():
    """Kimi-Linear hands cu_seq_lens_q to its KDA kernel as is; flash-linear-attention's chunk_kda reads cu_seqlens."""
    rec = layer_verdicts("kimi_linear", ["position_ids", "cu_seq_lens"], kernels=["flash-linear-attention"])[-1]
    assert rec.kind == "recurrence" and rec.status == "leaks" and rec.needs == ()
    assert "`cu_seq_lens_q`" in rec.why and "`cu_seqlens`" in rec.why
