"""One meaning per colour: each role one colour, documents in one figure never sharing one."""
import itertools

import numpy as np
import pytest

import packing_core as pc
from app_pages import _content
from packing_core import PackedBatch, make_plan
from packing_core.analysis import length_histogram
from packing_core.attention import block_causal_mask
from packing_core.attention.masks import allowed
from packing_core.data import synthetic_lengths
from packing_lab.demos import TrainResult
from packing_lab.viz import (
    layout_figure,
    length_histogram_figure,
    logit_diff_figure,
    loss_curves_figure,
    mask_figure,
    plan_strip,
    slot_use_figure,
    strategy_figure,
    style,
    targets_figure,
)
from packing_lab.viz.style import LEAK, PALETTE, ROLES, figure_codes
from packing_lab.zoo import naive_targets

ALLOWED = set(ROLES.values()) | set(PALETTE) | {style.TEXT_COLOUR}   # words are in the one text colour, never a role's


def _rgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])


def _trace_colours(fig) -> set[str]:
    """Every colour a figure draws with: trace markers and lines, heatmap cells, shapes, annotations."""
    found = set()
    for t in fig.data:
        for part in ("marker", "line"):
            c = getattr(getattr(t, part, None), "color", None) if hasattr(t, part) else None
            if isinstance(c, str):
                found.add(c)
            elif c is not None and not isinstance(c, (int, float)):
                found.update(x for x in c if isinstance(x, str))
        if t.type == "heatmap":
            z = np.asarray(t.z, dtype=float)
            codes = np.unique(z[np.isfinite(z)]).astype(int)
            found.update(style._CODE_COLOURS[c - style.EMPTY] for c in codes)
    for shape in fig.layout.shapes:
        if shape.line.color:
            found.add(shape.line.color)
    for a in fig.layout.annotations:
        if a.font.color:
            found.add(a.font.color)
    return found


def _row_batch(width=64, instruction=False):
    d = _content.row_documents(width, instruction)
    return PackedBatch.from_documents(d.documents, width, "next-fit", prompt_lengths=d.prompt_lengths)


def _train_result(mask: str):
    losses = tuple(np.linspace(3.0, 1.2, 60))
    return TrainResult(mask=mask, seed=0, steps=60, same_topic=0.9, losses=losses, train_loss=1.2,
                          packed_loss=1.2, alone_loss=1.3, visible_loss=1.1, drift_share=0.5, drift_cases=10,
                          seconds=1.0)


def _figures():
    """Every figure builder the pages call, on the inputs the lessons use."""
    worked = _content.WORKED_LENGTHS
    b = _row_batch(64)
    n = int(b.valid[0].sum())
    import torch
    masks = {"causal": block_causal_mask(torch.tensor([0, n]), total=64).numpy(), "block": allowed(b.piece_ids[0]).numpy()}
    lengths = synthetic_lengths("support-tickets")[:5000]
    rows = pc.strategy_table(lengths, 512)
    rep = pc.verify_model("tiny-rope", mask="off")
    return {
        "plan strip, worked example": plan_strip(make_plan(worked, 512, "concat-cut")),
        "plan strip, 40 drawn documents (bfd)": plan_strip(make_plan(lengths[:40], 512, "bfd")),
        "mask": mask_figure(masks, b.document_ids[0].numpy(), b.position_ids[0].numpy()),
        "layout": layout_figure(b, 0, continuous_positions=np.arange(64)),
        "targets": targets_figure(_row_batch(64, True), 0, naive_targets(_row_batch(64, True), 0)),
        "logit differences": logit_diff_figure(rep.token_diffs, rep.cu_seqlens, rep.tolerance),
        "length histogram": length_histogram_figure(length_histogram(lengths, 512)),
        "strategies": strategy_figure(rows),
        "slot use": slot_use_figure(rows),
        "loss curves": loss_curves_figure([_train_result("on"), _train_result("off")]),
    }


@pytest.fixture(scope="module")
def figures():
    return _figures()


def test_every_role_has_its_own_colour_and_no_document_wears_one():
    roles = list(ROLES.values())
    assert len(set(roles)) == len(roles)
    assert not set(PALETTE) & set(roles)
    assert len(set(PALETTE)) == len(PALETTE)


def test_colours_of_different_meaning_are_far_apart():
    """Distinct on a washed-out projector too: every pair of colours at least 60 apart (sum of RGB steps)."""
    named = {**{f"document {i}": c for i, c in enumerate(PALETTE)}, **ROLES}
    close = [(a, b) for (a, x), (b, y) in itertools.combinations(named.items(), 2)
             if np.abs(_rgb(x) - _rgb(y)).sum() < 60]
    assert close == []


def test_red_means_only_a_leak_and_green_only_the_correct_run():
    assert style.LEAK_COLOUR == ROLES["leak"] and style.FIXED_COLOUR == ROLES["fixed"]
    assert style.ALERT_COLOUR == ROLES["alert"] != style.LEAK_COLOUR
    assert style.DELTA_COLOURS["leak"] == "red" and style.DELTA_COLOURS["neutral"] == "gray"


def test_every_figure_draws_only_with_role_and_document_colours(figures):
    stray = {name: sorted(_trace_colours(fig) - ALLOWED) for name, fig in figures.items()}
    assert {k: v for k, v in stray.items() if v} == {}


def test_the_loss_curves_paint_the_broken_run_as_a_leak_and_the_correct_one_as_fixed(figures):
    lines = {t.name: t.line.color for t in figures["loss curves"].data if t.name}
    assert {c for n, c in lines.items() if "mask off" in n} == {ROLES["leak"]}
    assert {c for n, c in lines.items() if "mask on" in n} == {ROLES["fixed"]}


def test_documents_of_one_row_never_share_a_colour():
    for width in (64, 128):   # the widths the Masks and labels page draws with every token shown
        b = _row_batch(width)
        doc = b.document_ids[0].numpy()
        z = np.asarray(layout_figure(b, 0).data[0].z)[0]
        colour = {int(d): set(z[doc == d].tolist()) for d in np.unique(doc[doc >= 0])}
        assert all(len(c) == 1 for c in colour.values()), colour          # one colour per document
        assert len({c.pop() for c in colour.values()}) == len(colour)      # none shared


def test_a_plan_strip_gives_each_document_its_own_colour_when_ids_collide():
    # documents 3 and 17 would both be PALETTE[3]: the strip renumbers them
    plan = make_plan([5, 4, 6], 20, "next-fit")
    ids = np.array([[3, 3, 17, 17, -1]])
    assert figure_codes(ids).tolist() == [[0, 0, 1, 1, -1]]
    assert len(np.unique(np.asarray(plan_strip(plan).data[0].z))) >= 3


def test_with_more_documents_than_colours_neighbours_still_differ_and_the_hover_names_each(figures):
    fig = figures["plan strip, 40 drawn documents (bfd)"]
    z = np.asarray(fig.data[0].z)
    text = np.asarray(fig.data[0].text)
    docs = np.char.startswith(text.astype(str), "document ")
    assert docs.any()
    for row_z, row_docs, row_text in zip(z, docs, text):
        names = [t.split(",")[0] for t in row_text[row_docs]]
        codes = row_z[row_docs]
        for k in range(1, len(names)):
            if names[k] != names[k - 1]:
                assert codes[k] != codes[k - 1], (names[k - 1], names[k])
    assert not (z == LEAK).any()   # a plan has no leaks to show


def test_a_plan_strip_with_few_documents_keeps_their_colours_from_other_figures():
    assert figure_codes([[0, 1, 2, 13, -1, -2]]).tolist() == [[0, 1, 2, 13, -1, -2]]


def test_every_figure_is_dark_text_on_white_at_four_and_a_half_to_one_or_more_in_any_theme(figures):
    """A figure is a white card whatever the page's theme; its words (titles, ticks, axis titles, legend, labels on
    it) are at least 4.5:1 against it (WCAG AA). Streamlit's theme drew plotly ticks at 3.7:1."""
    low = {}
    for name, fig in figures.items():
        lay = fig.layout
        assert (lay.paper_bgcolor, lay.plot_bgcolor) == (style.PAPER_COLOUR, style.PAPER_COLOUR), name
        colours = {lay.font.color, lay.legend.font.color}
        if lay.title.text:
            colours.add(lay.title.font.color)
        for axis in [a for k in lay for a in [lay[k]] if k.startswith(("xaxis", "yaxis"))]:
            colours |= {axis.tickfont.color, axis.title.font.color}
        colours |= {a.font.color for a in lay.annotations}
        low[name] = sorted(c for c in colours if c is None or style.contrast_ratio(c) < 4.5)
    assert {k: v for k, v in low.items() if v} == {}
