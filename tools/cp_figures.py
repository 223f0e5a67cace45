"""The figures of docs/context-parallel.md: each context-parallel zoo entry and the balance per scheme, as PNG.

Each figure is the lab's own (``packing_lab.viz``), built from a fresh run, laid out by plotly.js in a headless
Chromium (``/usr/bin/chromium``, through Playwright) and saved whole::

    python -m tools.cp_figures docs/figures
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"


def figures() -> dict:
    """``{file stem: plotly figure}``: one per part each zoo entry draws, then the balance of the cut rows."""
    from packing_core.batch.packed import PackedBatch
    from packing_core.parallel import split_batch
    from packing_lab.demos import cp_lesson
    from packing_lab.viz import cp_balance_figure, cp_cut_figure, ring_steps_figure, zoo_figures
    from packing_lab.zoo import ZOO, reproduce_bug
    from packing_lab.zoo.context_parallel import BUGS

    out = {}
    for bug in BUGS:
        assert bug in ZOO
        for part, fig in zoo_figures(reproduce_bug(bug.name)).items():
            out[f"zoo-{bug.name}-{part}"] = fig
    row = cp_lesson((6, 7, 23), 4, "zigzag-document")
    out["cut-zigzag-document-cp4"] = cp_cut_figure(row.split)
    out["ring-zigzag-document-cp4"] = ring_steps_figure(row.steps, 4)
    out["balance-row-cp4"] = cp_balance_figure(row.balances, title="Causal work per rank, one row of 6, 7 and 23 "
                                                                   "tokens at CP 4")
    one = split_batch(PackedBatch.from_documents([list(range(1, 33))], 32, "next-fit"), 4, "contiguous")
    out["cut-contiguous-one-document-cp4"] = cp_cut_figure(one)
    return out


def render(figs: dict, folder: Path, width: int = 900) -> list[Path]:
    from playwright.sync_api import sync_playwright

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": 600}, device_scale_factor=1)
        for name, fig in figs.items():
            page.set_content(fig.to_html(include_plotlyjs=True, full_html=True, config={"staticPlot": True}))
            page.wait_for_selector(".main-svg")
            path = folder / f"{name}.png"
            page.locator(".js-plotly-plot").screenshot(path=str(path))
            paths.append(path)
        browser.close()
    return paths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path)
    args = p.parse_args(argv)
    for path in render(figures(), args.folder):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
