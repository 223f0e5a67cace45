"""The leakage lab's training section through AppTest: the bug trains, looks better, is worse alone."""
from tests._support import assert_clean, markdown, metric, open_page


def _number(text: str) -> float:
    return float(text.rstrip("%"))


def test_the_training_section_waits_for_the_button():
    at = open_page("leakage_lab")
    assert any(h.value == "A wrong mask never errors" for h in at.subheader)
    assert not [m for m in at.metric if m.label.startswith("Train loss")]


def test_train_both_shows_the_mask_off_run_better_in_training_and_worse_alone():
    at = open_page("leakage_lab")
    at.button(key="leakage_lab.train").click().run(timeout=300)  # two training runs: seconds alone, minutes on a loaded CI box
    assert_clean(at)
    train_on, train_off = _number(metric(at, "Train loss, mask on")), _number(metric(at, "Train loss, mask off"))
    alone_on, alone_off = _number(metric(at, "Loss alone, mask on")), _number(metric(at, "Loss alone, mask off"))
    drift_on = _number(metric(at, "Drift with the previous document visible, mask on"))
    drift_off = _number(metric(at, "Drift with the previous document visible, mask off"))
    assert train_off < train_on and alone_off > alone_on
    assert drift_on > 25 and drift_off > 25      # both judged with the neighbour visible: both drift
    assert "looks better in training" in markdown(at) and f"{alone_off:.3f} against {alone_on:.3f}" in markdown(at)
    assert "the drift figure alone does not convict the bug" in markdown(at)
    assert any(c.proto.id and "leakage_lab.train_curves" in c.proto.id for c in at.get("plotly_chart"))
    # the runs stay on the page when something else reruns it
    at.run()
    assert_clean(at)
    assert metric(at, "Train loss, mask off") == f"{train_off:.3f}"
