"""The invariants on one printable page, generated from the library's own facts.

Every line of the cheatsheet is a :class:`Fact`: its words come from the object that states them in the
library (the findings table of ``check.rules``, the mask rule of ``attention.masks``, a docstring's
worked example computed again), ``source`` names that object, and ``quote`` is the part carried over
verbatim, so a test finds each quote in its source and nothing is typed twice. :func:`cheatsheet_markdown`
and :func:`cheatsheet_html` lay the same facts out; the HTML prints on one A4 or Letter page.

>>> facts = cheatsheet_facts()
>>> next(f for f in facts if f.source.endswith("cu_seqlens_from_lengths")).quote
'[0, 120, 210, 510]'
"""
from __future__ import annotations

import html
from dataclasses import asdict, dataclass

import numpy as np

from packing_core.analysis.costs import COST_FORMULA
from packing_core.analysis.trainer_advice import trainer_settings
from packing_core.attention.masks import allowed
from packing_core.batch.packed import IGNORE_INDEX, segment_layout
from packing_core.check.rules import RULES
from packing_core.packing.plan import cu_seqlens_from_lengths
from packing_core.packing.strategies import make_plan
from packing_core.parallel import split as cp_split

__all__ = ["CHEATSHEET_FINDINGS", "Fact", "cheatsheet_facts", "cheatsheet_html", "cheatsheet_markdown"]

TITLE = "Packing Lab: the invariants on one page"
EXAMPLE = (120, 90, 300, 40, 55, 30, 210, 65)      # the lab's worked example (packing/plan.py's docstring)
# The findings whose fix the sheet prints in full (the other errors by title): what a packed batch most often gets wrong.
# padding-free (which bfd turns on) is for FlashAttention: on sdpa or eager its one row's mask is (batch tokens)²
TRL_SETTINGS = "Settings (TRL, rows of 2,048; padding-free needs FlashAttention 2/3)"
# the findings set out with their whole fix; every other error is named by its title (the page holds no more)
CHEATSHEET_FINDINGS = ("documents_share_attention", "label_crosses_boundary", "pad_in_loss", "mask_reads_future",
                       "positions_do_not_restart")


@dataclass(frozen=True)
class Fact:
    """One line of the sheet: ``text`` under ``section``, carrying ``quote`` from the library object ``source``
    (``"module:name"``; ``"packing_core.check.rules:RULES[name]"`` for a finding)."""

    section: str
    text: str
    source: str
    quote: str
    picture: tuple[str, ...] = ()     # lines drawn under the text in a fixed-width font

    def to_dict(self) -> dict:
        return asdict(self)


def _mask_rows() -> list[str]:
    grid = allowed(np.array([0, 0, 0, 1, 1]))
    return [" ".join("1" if v else "." for v in row) for row in grid.tolist()]


def cheatsheet_facts() -> tuple[Fact, ...]:
    """Every fact of the sheet, in order (see the module docstring)."""
    pad, cut = (make_plan(EXAMPLE, 512, s).metrics() for s in ("pad", "concat-cut"))
    cu = cu_seqlens_from_lengths([120, 90, 300]).tolist()
    positions = segment_layout([3, 2]).position_ids.tolist()
    rows = _mask_rows()
    causal_row = " ".join("1" if v else "." for v in allowed(np.zeros(5, int))[3].tolist())   # one document: plain causal
    rule = "j <= i and segment[i] == segment[j]"
    facts = [
        Fact("Waste", f"Utilisation = `real_tokens / slots`. The {len(EXAMPLE)} samples of {sum(EXAMPLE)} tokens at "
                      f"context 512: padded {pad.slots:,} slots ({pad.utilisation:.1%}), cut into full rows "
                      f"{cut.slots:,} ({cut.utilisation:.1%}).", "packing_core.packing.plan:PlanMetrics",
             "real_tokens / slots"),
        Fact("Waste", f"Costs: `{COST_FORMULA}`.", "packing_core.analysis.costs:COST_FORMULA", COST_FORMULA),
        Fact("The mask", f"Token i may read key j only if `{rule}`: one causal block per document. Lengths "
                         "[3, 2], query i by key j:", "packing_core.attention.masks", rows[3],
             tuple(f"i={i}  {r}" for i, r in enumerate(rows))),
        Fact("The mask", f"The plain causal triangle alone would give row 3 `{causal_row}`: document 1 reads "
                         "document 0, with no error.", "packing_core.attention.masks", causal_row),
        Fact("Boundaries", f"cu_seqlens: a 0, then the running total of the lengths: [120, 90, 300] -> `{cu}`.",
             "packing_core.packing.plan:cu_seqlens_from_lengths", str(cu)),
        Fact("Boundaries", f"Positions restart at every document: [3, 2] -> `{positions}`.",
             "packing_core.batch.packed:segment_layout", str(positions)),
        Fact("Boundaries", f"Targets: `{IGNORE_INDEX}` where nothing is trained (pads, prompts, each document's "
                           "last token); the loss mask is a separate tensor from the attention mask.",
             "packing_core.batch.packed:IGNORE_INDEX", str(IGNORE_INDEX)),
        _cp_fact(),
    ]
    for name in CHEATSHEET_FINDINGS:
        r = RULES[name]
        facts.append(Fact("What a check finds, and the fix", f"**{r.title}** ({r.severity}): {r.fix}",
                          f"packing_core.check.rules:RULES[{name}]", r.fix))
    others = [r for r in RULES.values() if r.severity == "error" and r.name not in CHEATSHEET_FINDINGS]
    facts.append(Fact("What a check finds, and the fix", "Also errors: " + "; ".join(r.title for r in others) + ".",
                      "packing_core.check.rules:RULES", others[0].title))
    for purpose in ("instruction", "pretraining"):
        trl = trainer_settings(2048, purpose)[0]
        since = trl.since.replace(" ", " ≥ ")          # "TRL ≥ 0.20.0": the first release with every setting
        facts.append(Fact(TRL_SETTINGS, f"{purpose.capitalize()}: `{trl.call}` ({since}).",
                          "packing_core.analysis.trainer_advice", trl.call))
    facts.append(Fact("Verify", "Run each document alone and packed and compare its logits. A correct setup agrees "
                                "within a tolerance fitted to the dtype.",
                      "packing_core.verify.equivalence", "A correct setup agrees within a tolerance fitted to the dtype"))
    return tuple(facts)


def _cp_fact() -> Fact:
    """Context parallelism: the zigzag cut per document, its pads and offsets (the picture of ``parallel.split``)."""
    picture = tuple(line.strip() for line in (cp_split.__doc__ or "").splitlines()
                    if line.strip().startswith(("stream ", "rank 0 ", "rank 1 ")))
    return Fact("Context parallelism", "Cut every document into 2·CP chunks, rank r taking chunks r and 2·CP-1-r: "
                                       "the causal work is even. Pad each document to a multiple of 2·CP (with "
                                       "sequence parallelism, of lcm(2·CP, TP·CP)) and give every rank the padded "
                                       "and the real offsets. Documents of 7 and 5 at CP 2:",
                "packing_core.parallel.split", picture[1], picture)


def _sections(facts) -> list[tuple[str, list[Fact]]]:
    out: list[tuple[str, list[Fact]]] = []
    for f in facts:
        if not out or out[-1][0] != f.section:
            out.append((f.section, []))
        out[-1][1].append(f)
    return out


def cheatsheet_markdown(facts=None) -> str:
    """The sheet as Markdown: a title, then each section's facts as bullets."""
    facts = cheatsheet_facts() if facts is None else facts
    lines = [f"# {TITLE}", ""]
    for section, items in _sections(facts):
        lines.append(f"## {section}")
        for f in items:
            lines.append(f"- {f.text}")
            lines += [f"      {row}" for row in f.picture]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _inline(text: str) -> str:
    """The two marks the facts use, `code` and **bold**, as HTML; everything else escaped."""
    out, parts = [], html.escape(text, quote=False).split("`")
    for k, part in enumerate(parts):
        if k % 2:
            out.append(f"<code>{part}</code>")
        else:
            bold = part.split("**")
            out.append("".join(f"<b>{b}</b>" if j % 2 else b for j, b in enumerate(bold)))
    return "".join(out)


# A4 and Letter alike: 10 mm margins, two columns; a fact never breaks across columns.
_CSS = ("@page { margin: 10mm; } body { font: 9.2pt/1.32 'Segoe UI', Arial, sans-serif; color: #111; margin: 0; } "
        "h1 { font-size: 14pt; margin: 0 0 4pt; } h2 { font-size: 10pt; margin: 7pt 0 2pt; break-after: avoid; "
        "border-bottom: 1px solid #999; } ul { margin: 0; padding-left: 12pt; } li { margin: 0 0 3pt; "
        "break-inside: avoid; } code, pre { font: 8.4pt Consolas, 'DejaVu Sans Mono', monospace; } code { "
        "background: #f0f0f0; } pre { margin: 2pt 0; line-height: 1.15; } .cols { column-count: 2; "
        "column-gap: 14pt; } footer { margin-top: 6pt; font-size: 7.5pt; color: #444; }")


def cheatsheet_html(facts=None) -> str:
    """The sheet as one self-contained HTML page that prints on one A4 (or Letter) page, in two columns."""
    facts = cheatsheet_facts() if facts is None else facts
    def item(f: Fact) -> str:
        picture = f"<pre>{html.escape(chr(10).join(f.picture))}</pre>" if f.picture else ""
        return f"<li>{_inline(f.text)}{picture}</li>"

    body = "".join(f"<section><h2>{html.escape(s)}</h2><ul>{''.join(item(f) for f in items)}</ul></section>"
                   for s, items in _sections(facts))
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(TITLE)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{html.escape(TITLE)}</h1><div class='cols'>{body}</div>"
            "<footer>Generated by packing_lab.advice.cheatsheet from the library's findings table, mask rule and "
            "worked examples.</footer></body></html>")
