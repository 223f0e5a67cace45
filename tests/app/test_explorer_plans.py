"""The Dataset explorer's plan quality: named bounds, bfd against the proven optimum, the cap, the stream."""
from pathlib import Path

import numpy as np

import packing_core as pc
from app_pages import _content
from app_pages._data import PAGE_TIME_LIMIT
from packing_core.analysis import CAP_LADDER, STREAM_SAMPLE, cap_sentence
from packing_lab.advice import bounds_example
from tests._support import assert_clean, open_page

ROOT = Path(__file__).resolve().parents[2]


def shown(at) -> str:
    """Everything a page wrote (markdown, captions, alerts, metric help, table headers and cells), unescaped."""
    parts = [m.value for m in [*at.markdown, *at.caption, *at.info, *at.success, *at.warning]]
    parts += [f"{m.label} {m.value} {m.proto.help}" for m in at.metric]
    for df in at.dataframe:
        frame = df.value
        parts += [" ".join(map(str, frame.columns)), frame.to_string()]
    return "\n".join(parts).replace("\\", "").replace("**", "")


def test_the_explorer_names_the_bound_of_each_strategy_and_says_how_far_bfd_is_from_the_proven_optimum():
    at = open_page("dataset_explorer")
    text = shown(at)
    full = at.dataframe[1].value.set_index("strategy")           # every column, under the narrow table
    assert full.loc["concat-cut", "proven lower bound"] == "L1 44,547"
    # 44,547 rows: the bound optimal proves on the tickets (docs/measurements.md, Packing quality); bfd needs 44,589
    assert full.loc["bfd", "proven lower bound"] == "L2 44,547" and full.loc["bfd", "rows"] == 44_589
    advice = at.info[0].value
    assert "bfd is 42 rows (0.0943%) above the proven optimum (44,547 rows, the L2 bound); optimal reaches it within" \
        in advice
    assert ("L1 44,547 (tokens / context: a bound for every plan, reachable only by cutting documents), L2 44,547 "
            "(whole documents), LP 44,547") in text
    assert bounds_example() in text                                 # the ten documents of 300, once
    assert text.count("Ten documents of 300 tokens") == 1


def test_no_page_calls_l1_the_fewest_rows_in_what_it_shows_or_in_its_source():
    for name in ("dataset_explorer", "padded_vs_packed"):
        at = open_page(name)
        assert "fewest" not in shown(at).lower(), name
    for spec in _content.PAGES:
        assert "fewest" not in (ROOT / spec.path).read_text(encoding="utf-8").lower(), spec.path
    padded = open_page("padded_vs_packed", **{"padded_vs_packed.lengths": "300, 300, 300, 300, 300, 300, 300, 300, "
                                                                          "300, 300", "padded_vs_packed.strategy": "bfd"})
    rows = next(m for m in padded.metric if m.label == "Rows")
    assert rows.value == "10" and "the proven lower bound for bfd: L2 10 rows" in rows.proto.help


def test_an_upload_of_ten_documents_of_300_shows_ten_whole_rows_not_six():
    at = open_page("dataset_explorer")
    at.file_uploader(key="w_upload").set_value(("ten.csv", b"length\n" + b"300\n" * 10, "text/csv")).run()
    at.button[0].click().run()
    assert_clean(at)
    assert ("L1 6 (tokens / context: a bound for every plan, reachable only by cutting documents), L2 10 (whole "
            "documents)") in shown(at)
    full = at.dataframe[1].value.set_index("strategy")
    assert full.loc["concat-cut", "proven lower bound"] == "L1 6" and full.loc["concat-cut", "rows"] == 6
    assert (full.loc["bfd", "proven lower bound"], full.loc["bfd", "rows"]) == ("L2 10", 10)
    assert "bfd is already optimal: its 10 rows meet the proven lower bound (L2 10)." in at.info[0].value


def test_the_cap_step_prices_each_cap_in_rows_and_cites_why_kernels_want_one():
    at = open_page("dataset_explorer")
    at.select_slider(key="w_dataset_explorer.cap").set_value(4).run()
    assert_clean(at)
    lengths = pc.load_lengths("support-tickets")
    from packing_core.packing.from_counts import cap_price

    price = cap_price(lengths, 512, "bfd", 4)     # from the lengths: the page plans from their counts
    text = shown(at)
    assert cap_sentence(price) in text and price.extra_rows > 0
    ladder = next(df.value for df in at.dataframe if "bfd rows" in df.value.columns)
    assert ladder["cap"].tolist() == list(CAP_LADDER)
    assert ladder["bfd rows"].is_monotonic_decreasing
    assert ladder["bfd rows"].iloc[0] == int(np.ceil(lengths / 512).sum())     # a cap of 1: one piece a row
    assert ladder.set_index("cap").loc[4, "bfd rows"] == price.rows
    for words in ("torchtitan PR #4158", "Megatron-LM PR #4359", "pytorch issue #188150", "[0, 5, 8, 12, 12, 12, 12]"):
        assert words in text, words


def test_the_stream_step_shows_utilisation_against_buffer_size_and_trls_window():
    at = open_page("dataset_explorer")
    text = shown(at)
    assert f"On the first {STREAM_SAMPLE:,} of 200,000 documents, in the dataset's order" in text
    assert ("TRL's `bfd_split` (bfd inside each batch of 1,000 documents, documents longer than the context cut into "
            "pieces), fills") in text
    chart = next(c for c in at.get("plotly_chart") if "buffer size" in c.proto.spec)
    assert "TRL: bfd in windows of 1,000 documents" in chart.proto.spec


def test_the_pages_ask_optimal_for_a_smaller_budget_than_the_command_line(monkeypatch):
    from app_pages import _data
    from packing_core.packing.options import DEFAULT_TIME_LIMIT

    seen = {}
    monkeypatch.setattr(_data, "_strategy_table", lambda lengths, context, **kw: seen.update(kw))
    _data.strategy_table(np.array([3, 4]), 512)
    assert seen["time_limit"] == PAGE_TIME_LIMIT < DEFAULT_TIME_LIMIT
    source = (ROOT / "app_pages" / "_your_data.py").read_text(encoding="utf-8")
    assert "time_limit=PAGE_TIME_LIMIT" in source          # the uploaded profile's plans too


def test_a_page_plans_at_most_page_max_pieces_for_a_section_and_says_so():
    from app_pages._data import PAGE_MAX_PIECES, over_page_budget

    assert over_page_budget([PAGE_MAX_PIECES * 512], 512) is None          # exactly the budget: planned
    line = over_page_budget([PAGE_MAX_PIECES * 512 + 1], 512)               # one piece more: named, not planned
    assert line.startswith(f"Not measured on this page: these documents make {PAGE_MAX_PIECES + 1:,} pieces at "
                           "context 512") and line.endswith("A longer context makes fewer pieces.")
    assert over_page_budget([10**9], 512, "truncate") is None              # one piece when truncated


def test_one_document_of_a_billion_tokens_is_summarised_without_planning_its_two_million_pieces(monkeypatch):
    """19 bytes that split into 1,953,125 pieces: the sections that plan pieces name the budget instead of
    holding hundreds of MB in the cache (bfd rows to balance, a stream, the longest documents, a batch's order)."""
    from app_pages import _data, _your_data

    at = open_page("dataset_explorer")
    at.file_uploader(key="w_upload").set_value(("billion.csv", b"length\n1000000000\n", "text/csv")).run()
    planned = []     # the tickets were planned as usual until now; from the analysed upload on, nothing may plan
    for name in ("balance_of", "stream_of"):
        monkeypatch.setattr(_your_data, name, lambda *a, _n=name, **k: planned.append(_n))
    real_plan = _data.plan     # the first page still plans the lengths typed into it; none of 10^9 tokens
    monkeypatch.setattr(_data, "plan", lambda lengths, *a, **k: planned.append("plan") if max(lengths) >= 10**9
                        else real_plan(lengths, *a, **k))
    at.button[0].click().run()
    assert_clean(at)
    assert next(m.value for m in at.metric if m.label == "Documents") == "1"
    budget = [c.value for c in at.caption if c.value.startswith("Not measured on this page")]
    assert len(budget) == 3 and all("1,953,125 pieces at context 512" in c for c in budget), budget
    assert sum("`python -m packing_core balance FILE --ranks N` measures it" in c for c in budget) == 1
    assert planned == [], planned                        # nothing planned the pieces to show those sections
    assert "Their cost." not in shown(at)                # nor the longest documents' (planned on the page itself)
    at.switch_page("app_pages/padded_vs_packed.py").run()
    assert_clean(at)
    assert any(c.value.startswith("Not measured on this page: these documents make 3,906,250,000 pieces")
               for c in at.caption), [c.value for c in at.caption]


def test_lengths_typed_past_the_page_budget_are_one_error_before_anything_is_planned(monkeypatch):
    """Two documents of 10^9 tokens (typed, or carried by a link) are 3,906,250 pieces at context 512: under the
    library's own ceiling (4,000,000 extra), but two plans of them would hold over a GiB in the page's cache."""
    from app_pages import _data

    at = open_page("padded_vs_packed")
    planned = []
    real_plan = _data.plan
    monkeypatch.setattr(_data, "plan", lambda lengths, *a, **k: planned.append(len(lengths)) or real_plan(lengths, *a, **k))
    at.text_area(key="w_padded_vs_packed.lengths").set_value("1000000000, 1000000000").run()
    assert not at.exception and len(at.error) == 1, [e.value for e in at.error]
    assert "these lengths make 3,906,250 pieces at context 512, more than the 500,000 a page plans" in \
        at.error[0].value.replace("\\", "")
    assert planned == []
    at.radio(key="w_padded_vs_packed.overlong").set_value("truncate").run()     # the fix it names: planned
    assert_clean(at)
    assert planned, "the truncated lengths were not planned"
