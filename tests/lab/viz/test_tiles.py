"""The tile figure: one panel per kernel, its title quoting the cells the bound counts."""
import numpy as np
import pytest
import torch

from packing_core import make_plan
from packing_core.attention.masks import block_causal_mask
from packing_core.packing.plan import cu_seqlens_from_lengths
from packing_lab.advice.footprints import NEEDED, SKIPPED, WASTED, kernel_footprints
from packing_lab.viz.tiles import tile_figure

LENGTHS = [114, 60, 200, 90, 114, 30]     # ticket-sized documents
CONTEXT = 256


def touched_tiles(cu, tile):
    """Counted independently: tiles of the materialised mask holding an allowed cell."""
    mask = block_causal_mask(torch.as_tensor(cu)).numpy()
    n = -(-len(mask) // tile)
    grid = np.zeros((n * tile, n * tile), bool)
    grid[:len(mask), :len(mask)] = mask
    return int(grid.reshape(n, tile, n, tile).any(axis=(1, 3)).sum())


@pytest.fixture(scope="module")
def figure():
    return tile_figure(kernel_footprints(LENGTHS, CONTEXT, tiles=(128, 64)), title="tiles")


KERNELS = ["padded SDPA", "segments", "flex, 128-token tiles", "flex, 64-token tiles", "dense mask"]


def panel(annotation) -> tuple[str, str]:
    """``(kernel, "N cells: ...")`` of a panel title, however the figure wrapped its lines."""
    text = annotation.text.replace("<br>", " ")
    kernel = next(k for k in KERNELS if text.startswith(k + " "))
    return kernel, text[len(kernel) + 1:]


def test_one_panel_per_kernel_in_order(figure):
    assert [panel(a)[0] for a in figure.layout.annotations] == KERNELS
    assert sum(t.type == "heatmap" for t in figure.data) == 5


def test_titles_quote_cells_counted_from_the_mask_itself(figure):
    bfd = make_plan(LENGTHS, CONTEXT, "bfd")
    cu = cu_seqlens_from_lengths(bfd.piece_len)
    padded = len(LENGTHS) * CONTEXT**2
    expected = {
        "padded SDPA": padded,
        "segments": int((bfd.piece_len.astype(np.int64) ** 2).sum()),
        "flex, 128-token tiles": touched_tiles(cu, 128) * 128**2,
        "flex, 64-token tiles": touched_tiles(cu, 64) * 64**2,
        "dense mask": bfd.n_rows * CONTEXT**2,
    }
    for a in figure.layout.annotations:
        kernel, numbers = panel(a)
        cells = expected[kernel]
        fewer = "the baseline" if cells == padded else f"{padded / cells:.1f}x fewer"
        assert numbers == f"{cells:,} cells: {fewer}", kernel


def test_computed_tiles_are_shaded_and_skipped_ones_blank(figure):
    panels = {panel(a)[0]: t for a, t in zip(figure.layout.annotations,
                                                          [t for t in figure.data if t.type == "heatmap"])}
    flex64, flex128 = (np.asarray(panels[f"flex, {t}-token tiles"].z) for t in (64, 128))
    segments, dense = np.asarray(panels["segments"].z), np.asarray(panels["dense mask"].z)
    # smaller tiles skip more; every kernel computes all the mask allows
    assert (flex64 == SKIPPED).sum() > (flex128 == SKIPPED).sum()
    for z in (flex64, flex128, segments, dense):
        assert np.array_equal(z == NEEDED, segments == NEEDED)
    assert (flex128 == WASTED).sum() > (flex64 == WASTED).sum() > 0


def test_an_empty_list_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="kernel_footprints"):
        tile_figure([])


def test_every_panel_is_drawn_at_one_scale_and_the_padded_one_says_how_much_more_it_computes():
    """The class once read the padded panel (32,768 tokens squeezed into one panel) as the least work."""
    from packing_lab.advice import kernel_footprints
    from packing_lab.viz import tile_figure

    prints = kernel_footprints([114, 60, 200, 90, 300, 40], 512, tiles=(128,))
    fig = tile_figure(prints, title="What each kernel computes, at one scale")
    span = min(p.tokens for p in prints)
    xs = [fig.layout[f"xaxis{'' if c == 1 else c}"] for c in range(1, len(prints) + 1)]
    assert [tuple(x.range) for x in xs] == [(0, span)] * len(prints)
    padded = next(x for x, p in zip(xs, prints) if p.kernel == "padded SDPA")
    assert padded.title.text == f"its first {span:,}<br>of {prints[0].tokens:,} tokens" and prints[0].tokens > span
    ys = [fig.layout[f"yaxis{'' if c == 1 else c}"] for c in range(1, len(prints) + 1)]
    assert all(y.scaleanchor for y in ys)                                   # square cells: one scale both ways


def test_the_title_sits_above_the_panel_titles_never_over_them():
    from packing_lab.advice import kernel_footprints
    from packing_lab.viz import tile_figure

    fig = tile_figure(kernel_footprints([114, 60, 200, 90], 256, tiles=(128, 64)),
                      title="What each kernel computes for the first 16 documents, every panel at one scale")
    title_lines = fig.layout.title.text.count("<br>") + 1
    panel_lines = max(a.text.count("<br>") + 1 for a in fig.layout.annotations)
    assert fig.layout.title.yref == "container" and fig.layout.title.yanchor == "top"
    assert fig.layout.margin.t >= 20 + 20 * title_lines + 17 * panel_lines   # a band for each, stacked
