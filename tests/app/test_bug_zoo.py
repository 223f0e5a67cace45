"""The Bug zoo page draws what each reproduction measured, and links every tracker reference."""
import json

from packing_lab.zoo import plant_bug, reproduce_bug, zoo_entry
from tests._support import assert_clean, open_page


def charts(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_a_reproduction_draws_its_figures_only_after_its_button():
    at = open_page("bug_zoo")
    assert not charts(at)
    at.button(key="bug_zoo.run_sliding-window-crosses").click().run()
    assert_clean(at)
    drawn = charts(at)
    r = reproduce_bug("sliding-window-crosses")
    assert len(drawn) == len(r.drawn) == 2
    broken = next(t for t in drawn[0]["data"] if t.get("name") == "broken")
    assert max(c[0] for c in broken["customdata"]) == r.broken_max_abs_diff


def test_a_planted_fault_draws_the_batch_behind_plant_it():
    at = open_page("bug_zoo")
    at.button(key="bug_zoo.run_row-shifted-targets").click().run()
    assert_clean(at)
    (fig,) = charts(at)
    r = plant_bug("row-shifted-targets")
    assert fig["layout"]["title"]["text"].startswith("Targets: 1 differ")
    assert any(r.symptom in m.value.replace("\\", "") for m in at.markdown)


def test_every_tracker_reference_is_a_link_on_the_page():
    at = open_page("bug_zoo")
    page = "\n".join(m.value for m in at.markdown)
    bug = zoo_entry("loss-per-row")
    for parts in bug.links:
        for _, url in parts:
            if url:
                assert f"]({url})" in page
    assert "](https://github.com/huggingface/transformers/issues/34373)" in page


def test_a_bug_beyond_attention_draws_each_layers_output_and_the_check_that_catches_it():
    at = open_page("bug_zoo")
    at.button(key="bug_zoo.run_short-conv-bleeds").click().run()
    assert_clean(at)
    drawn = charts(at)
    r = reproduce_bug("short-conv-bleeds")
    assert len(drawn) == len(r.drawn) == 2                       # the logits, and each layer's output
    layers = next(d for d in drawn if any(t.get("name") == "broken" and t.get("type") == "bar" for t in d["data"]))
    titles = " ".join(a["text"].replace("<br>", " ") for a in layers["layout"]["annotations"])
    assert "convolution: 4 position(s) differ" in titles      # LFM2's kernel 3: 2 tokens of 2 later documents
    assert any("catches it" in s.value and "convolution_reads_previous_document" in s.value.replace("\\", "")
               for s in at.success)
    caption = " ".join(c.value for c in at.caption)
    assert "A short convolution reads the previous document" in caption
