"""Packing a stream: a buffer, rows as they fill, an exact resume; TRL's windows, checked against TRL itself."""
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packing_core.packing import make_plan
from packing_core.packing.stream import (
    TRL_STRATEGY,
    TRL_WINDOW,
    StreamPacker,
    StreamState,
    buffer_curve,
    windowed_plan,
)


def run(lengths, context, size, **kw):
    return list(StreamPacker(context, size, **kw).rows(lengths))


def test_rows_hold_every_item_once_within_the_context():
    lengths = np.random.default_rng(0).integers(1, 900, 500).tolist()
    rows = run(lengths, 512, 16)
    items = [x for row in rows for x in row]
    assert all(sum(n for _, _, n in row) <= 512 for row in rows)
    kept = np.bincount([d for d, _, _ in items], weights=[n for _, _, n in items], minlength=len(lengths))
    assert kept.tolist() == lengths                     # split: every token placed once
    assert len(set((d, s) for d, s, _ in items)) == len(items)


@pytest.mark.parametrize("overlong", ["split", "truncate", "drop"])
@pytest.mark.parametrize("size, min_fill", [(1, 1.0), (3, 1.0), (8, 0.9), (50, 1.0)])
def test_stopping_after_any_row_and_resuming_from_saved_json_gives_the_same_rows(size, min_fill, overlong):
    lengths = np.random.default_rng(size).integers(1, 40, 60).tolist() + [70, 5, 90]
    whole = run(lengths, 32, size, min_fill=min_fill, overlong=overlong)
    for stop in range(len(whole) + 1):
        packer = StreamPacker(32, size, min_fill=min_fill, overlong=overlong)
        rows = packer.rows(lengths)
        head = [next(rows) for _ in range(stop)]
        saved = packer.state().to_json()
        state = StreamState.from_json(saved)
        tail = list(StreamPacker(state=state).rows(lengths[state.position:]))
        assert head + tail == whole, stop
        assert state.rows == stop and len(saved) < 4000


def test_a_starved_buffer_leaves_most_slots_empty_and_a_large_one_approaches_bfd():
    lengths = np.random.default_rng(1).integers(20, 200, 3000)
    curve = buffer_curve(lengths, 512, [1, 4, 64, 3000])
    assert curve.rows[0] == len(lengths)                # a buffer of one: one document a row
    assert curve.utilisation[0] < 0.34
    assert curve.rows[1] > curve.rows[2] and curve.rows[-1] <= curve.whole_rows * 1.01
    assert curve.whole_rows == make_plan(lengths, 512, "bfd").n_rows
    assert json.loads(json.dumps(curve.to_dict()))["buffer_sizes"] == [1, 4, 64, 3000]


@pytest.mark.parametrize("edit, words", [
    (lambda d: d.update(buffer=[[0, 0, 600]]), "outside 1..512"),
    (lambda d: d.update(buffer=[[99, 0, 5]]), "never read"),
    (lambda d: d.update(buffer=[[1, 0, 5], [0, 0, 5]]), "arrival order"),
    (lambda d: d.update(buffer=[[0, 0, 5]] * 2), "appears twice"),
    (lambda d: d.update(buffer_size=0), "buffer_size"),
    (lambda d: d.update(buffer_size=10**12), "buffer_size"),
    (lambda d: d.update(min_fill=float("nan")), "NaN"),       # JSON itself has no NaN: refused as it is read
    (lambda d: d.update(min_fill=1.5), "min_fill"),
    (lambda d: d.update(position=-1), "position"),
    (lambda d: d.update(context="512"), "context"),
    (lambda d: d.pop("offset"), "fields"),
    (lambda d: d.update(version=2), "version"),
])
def test_a_hand_edited_state_that_no_packer_could_write_is_refused_in_one_line(edit, words):
    packer = StreamPacker(512, 8)
    rows = packer.rows([100, 300, 50, 20, 7])
    next(rows)
    d = json.loads(packer.state().to_json())
    d.update(position=3, offset=0)
    edit(d)
    with pytest.raises(ValueError, match=words) as e:
        StreamState.from_json(json.dumps(d))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("bad", [0, -1, 10**12, 2.5, True])
def test_a_buffer_that_makes_no_sense_is_one_line(bad):
    with pytest.raises(ValueError, match="buffer_size") as e:
        StreamPacker(512, bad)
    assert "\n" not in str(e.value)


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 120), min_size=1, max_size=60), window=st.integers(1, 25))
def test_windows_never_mix_documents_of_two_windows(lengths, window):
    plan = windowed_plan(lengths, 128, window)
    windows_of_row = {}
    for d, r in zip(plan.piece_doc.tolist(), plan.piece_row.tolist()):
        windows_of_row.setdefault(r, set()).add(d // window)
    assert all(len(w) == 1 for w in windows_of_row.values())
    assert plan.n_rows >= make_plan(lengths, 128, "bfd", overlong="truncate").metrics().lower_bound_rows


@pytest.mark.parametrize("overlong, trl_strategy", sorted(TRL_STRATEGY.items()))
def test_the_window_model_gives_trls_own_rows_and_utilisation(trl_strategy, overlong):
    datasets = pytest.importorskip("datasets")
    from trl.data_utils import pack_dataset

    rng = np.random.default_rng(7)
    lengths = np.where(rng.random(2500) < 0.05, rng.integers(300, 700, 2500), rng.integers(1, 200, 2500))
    ds = datasets.Dataset.from_dict({"input_ids": [list(range(n)) for n in lengths.tolist()]})
    packed = pack_dataset(ds, seq_length=256, strategy=trl_strategy)     # map's default batch: 1,000
    trl_loads = sorted(sum(x) for x in packed["seq_lengths"])
    plan = windowed_plan(lengths, 256, TRL_WINDOW, overlong=overlong)
    ours = sorted(np.bincount(plan.piece_row, weights=plan.piece_len).astype(int).tolist())
    assert ours == trl_loads                               # the same rows, load for load
    assert plan.metrics().utilisation == pytest.approx(sum(trl_loads) / (len(trl_loads) * 256))
    whole = make_plan(lengths, 256, "bfd", overlong=overlong).n_rows
    assert whole <= plan.n_rows                            # windows cost rows, never save them


def test_the_readmes_trl_figures_name_the_strategy_that_gives_them():
    # TRL's default `bfd` truncates over-long documents; `bfd_split` cuts them (TRL_STRATEGY, checked against
    # pack_dataset above): each figure the README gives for the 200,000 tickets is the window model's under its name
    from packing_core.data import synthetic_lengths

    root = Path(__file__).resolve().parents[2]
    text = " ".join(" ".join(p.read_text(encoding="utf-8").split()) for p in
                    [root / "README.md", *sorted((root / "docs").glob("*.md"))])
    lengths = synthetic_lengths("support-tickets")
    split = windowed_plan(lengths, 512, TRL_WINDOW, overlong="split").metrics()
    cut = windowed_plan(lengths, 512, TRL_WINDOW, overlong="truncate").metrics()
    assert TRL_STRATEGY == {"split": "bfd_split", "truncate": "bfd"}
    assert (f"its `bfd_split`, which cuts the {cut.docs_truncated:,} tickets longer than 512 into pieces as the "
            f"figures above do, uses {split.rows:,} rows ({split.utilisation:.2%})").replace("%)", " %)") in text
    assert (f"its default `bfd` truncates them ({cut.tokens_truncated:,} tokens lost) and uses {cut.rows:,} rows"
            in text)
