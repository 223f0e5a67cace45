"""The Context parallel page: it asks before it answers, then cuts a row, runs the ring and balances the ranks."""
from tests._support import assert_clean, open_page


def page_text(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption])


def answered(**state):
    at = open_page("context_parallel", **state)
    at.radio(key="v_context_parallel.guess").set_value("The last rank").run()
    assert_clean(at)
    return at


def test_it_asks_which_rank_works_most_before_it_answers():
    at = open_page("context_parallel")
    assert "Make a prediction" in at.info[0].value and not at.get("plotly_chart")
    at = answered()
    assert at.success[0].value.startswith("Right: the last rank computes 228 (query, key) pairs, rank 0 36, 6.3x")
    assert "every rank computes 132" in at.success[0].value


def test_a_wrong_guess_is_told_so_with_the_numbers():
    at = open_page("context_parallel")
    at.radio(key="v_context_parallel.guess").set_value("All the same").run()
    assert at.info[0].value.startswith("Not this time: the last rank computes 228")


def test_the_steps_draw_the_cut_the_ring_and_the_balance_with_each_ranks_offsets():
    at = answered()
    assert len(at.get("plotly_chart")) == 3 and len(at.dataframe) == 1
    text = page_text(at)
    assert "The cut adds **4 pads** here" in text                  # 6, 7, 23 padded to 8, 8, 24
    assert "rank 0: padded `[0, 4, 8, 20]`, real `[0, 2, 5, 16]`" in text   # chunks 0 and 3: the documents' ends


def test_cp_four_and_a_row_scheme_recut_the_row():
    at = answered()
    at.radio(key="w_context_parallel.cp").set_value(4).run()
    at.radio(key="w_context_parallel.scheme").set_value("contiguous").run()
    assert_clean(at)
    assert "CP 4, contiguous" in page_text(at) and "The cut adds **0 pads** here" in page_text(at)   # 36 slots


def test_the_balance_table_is_the_sidebar_datasets_at_three_sizes():
    at = answered()
    table = at.dataframe[0].value
    assert len(table) == 9 and set(table["CP"]) == {2, 4, 8}
    assert (table[table["scheme"] == "contiguous"]["pads added"] == "0 (0.0%)").all()


def test_the_bug_zoo_reproduces_a_context_parallel_entry_with_its_figure_and_check():
    import json

    at = open_page("bug_zoo")
    at.button(key="bug_zoo.run_cp-pad-between-seqs-false").click().run()
    assert_clean(at)
    (fig,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert fig["layout"]["title"]["text"].startswith("Logits against each document alone")
    assert "catches it: cp_unpadded_offsets (error)" in at.success[0].value.replace("\\", "")
    assert at.success[1].value == "On the fixed setup the check is silent."
