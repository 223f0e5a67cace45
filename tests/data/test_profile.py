"""Length profiles: exact counts that round-trip, merge and plan without expanding."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packing_core._validate import InputError
from packing_core.data.profile import SCHEMA_VERSION, LengthProfile, SourceCount
from packing_core.packing.from_counts import compare_counts, plan_from_counts, sampled_plan
from packing_core.packing.strategies import make_plan


def _profile():
    return LengthProfile.from_lengths([3, 5, 3, 9, 700], loss_tokens=[1, 2, 1, 4, 300], kind="messages",
                                      tokenizer="smollm2", vocab_hash="sha256:ab", chat_template_hash="sha256:cd",
                                      sources=(SourceCount("a.jsonl", 2), SourceCount("b.jsonl", 3)), cap=512,
                                      scan_seconds=1.5)


def test_profile_round_trips_through_its_json_file(tmp_path):
    p = _profile()
    q = LengthProfile.load(p.save(tmp_path / "p.json"))
    assert q.to_dict() == p.to_dict()
    assert q.count_dict() == {3: 2, 5: 1, 9: 1, 700: 1}
    assert q.over_cap == 1 and q.loss_share == pytest.approx(308 / 720)


def test_merge_adds_the_counts_and_keeps_every_source():
    p = _profile()
    m = p.merge(p)
    assert m.count_dict() == {3: 4, 5: 2, 9: 2, 700: 2}
    assert m.trained_tokens == 2 * p.trained_tokens
    assert [s.name for s in m.sources] == ["a.jsonl", "b.jsonl"] * 2


def test_merge_refuses_profiles_from_different_tokenizers():
    p = _profile()
    other = LengthProfile.from_lengths([4], kind="messages", tokenizer="bytes", cap=512)
    with pytest.raises(ValueError, match="different tokenizer"):
        p.merge(other)


def test_save_is_atomic_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    _profile().save(path)
    before = path.read_bytes()

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(json, "dump", interrupted)
    with pytest.raises(KeyboardInterrupt):
        LengthProfile.from_lengths([1, 2]).save(path)
    assert path.read_bytes() == before
    assert [f.name for f in tmp_path.iterdir()] == ["p.json"]


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(schema_version=99), "schema_version 99"),
    (lambda d: d["counts"].update({"3": -2}), "negative"),
    (lambda d: d.update(documents=7), "documents = 7"),
    (lambda d: d["loss_tokens"].update({"5": 6}), "outside 0..5"),
    (lambda d: d.pop("counts"), "missing"),
    (lambda d: d["counts"].update({"x": 1}), "'x', not a whole number"),
])
def test_hand_edited_profiles_are_refused_with_the_reason(tmp_path, edit, message):
    d = _profile().to_dict()
    edit(d)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=message):
        LengthProfile.load(path)


def test_a_file_that_is_not_json_names_itself(tmp_path):
    path = tmp_path / "notes.json"
    path.write_text("hello")
    with pytest.raises(ValueError, match="notes.json is not JSON"):
        LengthProfile.load(path)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 120), min_size=1, max_size=200), st.integers(4, 64),
       st.sampled_from(["split", "truncate", "drop"]))
def test_count_plans_equal_make_plan_on_the_expanded_lengths(lengths, context, overlong):
    if overlong == "drop" and min(lengths) > context:
        return
    profile = LengthProfile.from_lengths(lengths)
    for s in ("pad", "concat-cut", "ffd", "bfd"):
        a = make_plan(lengths, context, s, overlong=overlong).metrics()
        b = plan_from_counts(profile, context, s, overlong=overlong).metrics
        assert (a.rows, a.slots, a.real_tokens, a.tokens_lost, a.lower_bound_rows) == \
               (b.rows, b.slots, b.real_tokens, b.tokens_lost, b.lower_bound_rows), s


def test_bfd_plans_a_billion_documents_from_counts():
    profile = LengthProfile.from_counts({40: 600_000_000, 120: 300_000_000, 400: 100_000_000})
    plan = plan_from_counts(profile, 512, "bfd")
    assert plan.metrics.documents == 10**9
    assert plan.basis == "counts"
    assert 1.0 <= plan.metrics.rows_over_lower_bound < 1.1   # 40-token documents tile 512 with 32 spare


def test_order_dependent_strategies_say_they_ran_on_a_sample():
    profile = LengthProfile.from_counts({40: 600_000, 400: 100_000})
    plan = sampled_plan(profile, 512, "next-fit", n=5_000, seed=3)
    assert plan.basis == "sample of 5,000 documents (seed 3)"
    assert plan.metrics.documents == 5_000
    assert "order" in plan.note


def test_trained_tokens_per_slot_counts_only_the_loss_tokens():
    # two documents of 100 tokens, 30 of them answers: 60 trained tokens
    profile = LengthProfile.from_counts({100: 2}, {100: 60})
    pad, bfd = compare_counts(profile, 512, ("pad", "bfd"))
    assert pad.trained_tokens == bfd.trained_tokens == 60
    assert pad.trained_per_slot == pytest.approx(60 / 1024)
    assert bfd.trained_per_slot == pytest.approx(60 / 512)


def test_truncation_takes_the_answer_tokens_first():
    # 600 tokens, the last 200 trained; truncating to 512 cuts 88 answer tokens
    profile = LengthProfile.from_counts({600: 1}, {600: 200})
    assert plan_from_counts(profile, 512, "pad", overlong="truncate").trained_tokens == 112
    assert SCHEMA_VERSION == 1


def test_sample_draws_documents_in_proportion():
    profile = LengthProfile.from_counts({10: 9000, 20: 1000})
    sample = profile.sample(2000, seed=0)
    assert len(sample) == 2000 and set(np.unique(sample)) == {10, 20}
    assert 150 < (sample == 20).sum() < 250


@pytest.mark.parametrize("key, count", [("٣", 1), ("3", 1.0), ("3", True), ("3.0", 1)])
def test_a_profile_file_reads_whole_numbers_by_the_one_rule(key, count):
    """A count or a length in a profile is an int or its ASCII digits, as everywhere in the lab."""
    d = {"schema_version": 1, "kind": "lengths", "tokenizer": {"name": "none"}, "counts": {key: count}, "sources": []}
    with pytest.raises(InputError, match="not a whole number; the file was edited by hand"):
        LengthProfile.from_dict(d, "p.json")
    assert LengthProfile.from_dict({**d, "counts": {" 3": 2}}, "p.json").count_dict() == {3: 2}
