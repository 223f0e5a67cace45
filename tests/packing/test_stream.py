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


def test_the_docs_trl_figures_name_the_strategy_that_gives_them():
    # TRL's default `bfd` truncates over-long documents; `bfd_split` cuts them (TRL_STRATEGY, checked against
    # pack_dataset above): each figure docs/measurements.md gives for the 200,000 tickets is the window model's
    from packing_core.data import synthetic_lengths

    text = (Path(__file__).resolve().parents[2] / "docs" / "measurements.md").read_text(encoding="utf-8")
    rows = {line.split(" | ")[0]: line.split(" | ")[1:] for line in text.splitlines() if line.startswith("| TRL's ")}
    lengths = synthetic_lengths("support-tickets")
    split = windowed_plan(lengths, 512, TRL_WINDOW, overlong="split").metrics()
    cut = windowed_plan(lengths, 512, TRL_WINDOW, overlong="truncate").metrics()
    assert TRL_STRATEGY == {"split": "bfd_split", "truncate": "bfd"}
    named = {next(k for k in rows if f"`{TRL_STRATEGY[mode]}`" in k): m for mode, m in (("split", split), ("truncate", cut))}
    for label, m in named.items():
        assert rows[label][0] == f"{m.rows:,}", label
    split_label = next(k for k in named if "`bfd_split`" in k)
    assert f"the {cut.docs_truncated:,} tickets over 512 cut" in split_label
    assert rows[split_label][1].startswith(f"{split.utilisation:.2%}".replace("%", " %"))


def test_feeding_part_of_a_stream_keeps_the_rest_waiting_and_finishing_empties_it():
    lengths = [5, 3, 6, 2, 7]
    packer = StreamPacker(8, 3)
    fed = list(packer.feed(lengths[:3]))
    assert [[n for _, _, n in row] for row in fed] == [[5, 3]]
    assert packer.state().buffer == ((2, 0, 6),) and packer.state().position == 3
    rest = list(StreamPacker(state=StreamState.from_json(packer.state().to_json())).rows(lengths[3:]))
    assert fed + rest == run(lengths, 8, 3)


def _stream_cli(*argv):
    import io

    from packing_core.cli.dispatch import main

    out, err = io.StringIO(), io.StringIO()
    return main(["stream", *argv], out, err), out.getvalue(), err.getvalue()


def test_the_stream_command_reports_the_packers_rows_beside_bfd():
    code, out, err = _stream_cli("--lengths", "5,3,6,2,7", "--context", "8", "--buffer-size", "3", "--format", "json")
    r = json.loads(out)
    assert code == 0, err
    assert (r["rows"], r["tokens"], r["bfd_rows"], r["ended"]) == (3, 23, 3, True)
    assert r["utilisation"] == pytest.approx(23 / 24)


def test_the_stream_command_stops_saves_and_resumes_to_the_rows_of_one_run(tmp_path):
    state = tmp_path / "s.json"
    lengths = ",".join(map(str, np.random.default_rng(3).integers(1, 700, 300)))
    whole = json.loads(_stream_cli("--lengths", lengths, "--buffer-size", "16", "--rows", "400", "--format", "json")[1])
    code, first, _ = _stream_cli("--lengths", lengths, "--buffer-size", "16", "--documents", "120", "--save-state",
                                 str(state), "--rows", "400", "--format", "json")
    assert code == 0 and json.loads(state.read_text())["position"] == 120
    code, second, _ = _stream_cli("--lengths", lengths, "--state", str(state), "--rows", "400", "--format", "json")
    assert code == 0
    assert json.loads(first)["row_list"] + json.loads(second)["row_list"] == whole["row_list"]


def test_the_stream_command_refuses_settings_that_contradict_the_state(tmp_path):
    state = tmp_path / "s.json"
    state.write_text(StreamState(8, 3, 1.0, "split", 3, 0, 1, ((2, 0, 6),)).to_json())
    code, out, err = _stream_cli("--lengths", "5,3,6,2,7", "--state", str(state), "--buffer-size", "9")
    assert code == 2 and out == ""
    assert err.startswith("error: --buffer-size differs from the state's own settings (context 8, buffer 3")


def test_the_stream_curve_is_the_stream_price_of_the_same_documents():
    from packing_core.analysis.quality import stream_price
    from packing_core.data import synthetic_lengths

    code, out, _ = _stream_cli("--synthetic", "long-tailed", "--curve", "--format", "json")
    price = stream_price(synthetic_lengths("long-tailed", seed=0), 512, order="the order of long-tailed")
    assert code == 0 and json.loads(out)["curve"]["rows"] == list(price.curve.rows)
