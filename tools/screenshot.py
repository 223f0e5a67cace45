"""Take the README's picture of the running app: ``python -m tools.screenshot``.

Starts ``streamlit run app.py`` headless on a free port (``benchmarks/_server.py``), opens one view in
Debian's Chromium through Playwright, waits until the app says its script has finished (``stApp``'s
``data-test-script-state``, as the browser tests do), and saves a PNG. The view is a link, so the
picture is any page, step and settings (``--view "masks_and_labels?step=1"``), after pressing
buttons by their label (``--press Step --press Step``). The default is the view the README shows,
Watch it pack with bfd part-way through, at a width that reads on GitHub, saved in a palette of
256 colours when Pillow is installed, so the file stays small.

    python -m tools.screenshot                                   # docs/images/watch-it-pack.png
    python -m tools.screenshot --view "masks_and_labels?step=1" --press "" --out docs/images/masks.png
"""
from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path

from benchmarks._server import chromium_path, start_streamlit

ROOT = Path(__file__).resolve().parents[1]
VIEW = "watch_it_pack?strategy=bfd"
PRESS = ("Step",) * 9       # bfd has placed 9 of its 13 documents: rows filling, the rule on screen
OUT = ROOT / "docs" / "images" / "watch-it-pack.png"
RUN_MS = 180_000       # a cold 2-core server imports torch and the lab on the first visit


def wait_for_run(page, timeout_ms: int = RUN_MS) -> None:
    """Until the app is connected, its script has finished and no skeleton is left (tests/_support.py waits so too)."""
    page.wait_for_timeout(250)
    page.locator("[data-testid='stApp'][data-test-connection-state='CONNECTED']").wait_for(
        state="attached", timeout=timeout_ms)
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(
        state="attached", timeout=timeout_ms)
    page.locator("[data-testid='stSkeleton']").first.wait_for(state="detached", timeout=timeout_ms)


def shrink(png: bytes) -> bytes:
    """The same picture in at most 256 colours (Pillow's median cut), or as taken without Pillow."""
    try:
        from PIL import Image
    except ImportError:
        return png
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def take(view: str, press: tuple[str, ...], out: Path, width: int, height: int, settle_ms: int) -> int:
    """Save ``view`` of a fresh server, after pressing the buttons ``press`` names, as ``out``; returns its bytes."""
    from playwright.sync_api import sync_playwright

    browser_path = chromium_path()
    if browser_path is None:
        raise SystemExit("error: no Chromium found: apt-get install -y chromium (or set PACKING_LAB_CHROMIUM)")
    with tempfile.TemporaryDirectory() as tmp:
        server = start_streamlit(Path(tmp) / "streamlit.log")
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=browser_path, headless=True, args=["--no-sandbox"])
                page = browser.new_context(viewport={"width": width, "height": height}).new_page()
                page.goto(f"{server.url}/{view.lstrip('/')}", wait_until="domcontentloaded")
                wait_for_run(page)
                for label in filter(None, press):
                    page.get_by_role("button", name=label, exact=True).click()
                    wait_for_run(page)
                page.wait_for_timeout(settle_ms)        # the figures' last layout pass
                png = shrink(page.screenshot())
                browser.close()
        finally:
            server.stop()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)
    return len(png)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--view", default=VIEW, help=f"page and settings, as in a link (default {VIEW!r})")
    parser.add_argument("--press", action="append", metavar="LABEL",
                        help=f"a button to press before the picture, in order (default {len(PRESS)} x {PRESS[0]!r}; "
                             "--press '' presses none)")
    parser.add_argument("--out", type=Path, default=OUT, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=860)
    parser.add_argument("--settle-ms", type=int, default=1500, help="wait after the run, for the figures to draw")
    args = parser.parse_args(argv)
    press = PRESS if args.press is None else tuple(args.press)
    size = take(args.view, press, args.out, args.width, args.height, args.settle_ms)
    print(f"{args.out}: {size / 1024:.0f} KB, {args.width} x {args.height}, view {args.view!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
