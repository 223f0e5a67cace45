"""Causal work per context-parallel rank: contiguous is uneven, zigzag even; the pads each scheme adds."""
from pathlib import Path

import numpy as np
import pytest

from packing_core.packing.strategies import make_plan
from packing_core.parallel.balance import cp_balance, cp_balance_counts, format_cp_balance
from packing_core.parallel.split import split_batch

ROOT = Path(__file__).resolve().parents[2]


def tri(n):
    return n * (n + 1) // 2


def test_one_document_contiguous_gives_the_last_rank_the_most_work_and_zigzag_evens_it():
    contiguous, row, document = cp_balance(make_plan([16], 16, "bfd"), 4)
    assert contiguous.work.tolist() == [tri(4), tri(8) - tri(4), tri(12) - tri(8), tri(16) - tri(12)]
    assert row.work.tolist() == document.work.tolist() == [34.0] * 4
    assert contiguous.slowest == pytest.approx(58 / 34) and document.slowest == 1.0


def test_the_work_is_every_real_query_key_pair_and_matches_the_split_rank_by_rank():
    from packing_core.batch.packed import PackedBatch

    lengths = [7, 5, 12, 3, 9, 20]
    plan = make_plan(lengths, 32, "bfd")
    docs = [[1] * n for n in lengths]
    batch = PackedBatch.from_documents(docs, 32, "bfd")
    for b in cp_balance(plan, 4):
        assert b.work.sum() == sum(tri(n) for n in lengths)
        s = split_batch(batch, 4, b.scheme)
        held = [float((rb.position_ids + 1)[rb.piece_ids >= 0].sum()) for rb in s.ranks]
        assert b.work.tolist() == held, b.scheme


def test_zigzag_per_document_adds_each_documents_pads_to_2cp_and_the_row_schemes_none_at_context_512():
    lengths = np.array([7, 5, 12, 3, 9, 20, 500, 100])
    contiguous, row, document = cp_balance(make_plan(lengths, 512, "bfd"), 4)
    assert document.pads_added == int((-lengths % 8).sum()) and contiguous.pads_added == row.pads_added == 0
    assert document.pad_share == pytest.approx(document.pads_added / lengths.sum())


def test_from_counts_it_balances_the_same_bfd_rows_as_the_plan():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 700, 3000)
    by_plan = cp_balance(make_plan(lengths, 512, "bfd"), 4)
    by_counts = cp_balance_counts(dict(zip(*np.unique(lengths, return_counts=True))), 512, 4)
    for a, b in zip(by_plan, by_counts):
        assert a.work.tolist() == pytest.approx(b.work.tolist()) and a.slowest == pytest.approx(b.slowest)
        assert (a.pads_added, a.real_tokens, a.rows) == (b.pads_added, b.real_tokens, b.rows)


def test_sequence_parallel_pads_more_than_zigzag_alone():
    plan = make_plan([7, 5, 12, 3], 32, "bfd")
    plain = cp_balance(plan, 2, "zigzag-document")[0]
    sp = cp_balance(plan, 2, "zigzag-document", tp=4, sequence_parallel=True)[0]
    assert (plain.pads_added, sp.pads_added) == (1 + 3 + 0 + 1, 1 + 3 + 4 + 5)      # to 4, and to lcm(4, 8) = 8


def test_the_table_has_one_line_per_scheme_and_size():
    text = format_cp_balance(cp_balance(make_plan([16, 9], 32, "bfd"), 2), "two documents")
    assert text.splitlines()[0] == "two documents" and len(text.splitlines()) == 5 and "zigzag-document" in text


def docs_table(section: str) -> dict:
    """The balance table of ``docs/context-parallel.md`` under ``section``: (scheme, CP) -> (slowest, pads)."""
    text = (ROOT / "docs" / "context-parallel.md").read_text(encoding="utf-8")
    block = text.split(section, 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in block.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[(cells[0], int(cells[1]))] = (float(cells[2]), int(cells[5].replace(",", "")))
    return rows


def test_the_docs_wikipedia_table_is_what_the_histogram_gives():
    counts = [int(x) for x in (ROOT / "benchmarks" / "data" / "wikipedia_512_hist.txt").read_text()
              .replace("\n", " ").split(",") if x.strip()]
    hist = {k: n for k, n in enumerate(counts, start=1) if n}
    rows = docs_table("### Wikipedia (packedBERT histogram)")
    assert len(rows) == 9
    for cp in (2, 4, 8):
        for b in cp_balance_counts(hist, 512, cp):
            assert rows[(b.scheme, cp)] == (round(b.slowest, 3), b.pads_added)


def test_the_docs_support_tickets_table_is_what_the_dataset_gives():
    from packing_core.data.builtin import load_lengths

    plan = make_plan(load_lengths("support-tickets"), 512, "bfd")
    rows = docs_table("### Support tickets")
    for cp in (2, 4, 8):
        for b in cp_balance(plan, cp):
            assert rows[(b.scheme, cp)] == (round(b.slowest, 3), b.pads_added)
