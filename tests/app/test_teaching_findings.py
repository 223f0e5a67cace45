"""What the lab says, checked finding by finding against the fourth independent read of every page.

Each finding's test quotes the old words or numbers (they must be gone) and checks the new ones against
the library's numbers or the installed library's code, so a page and its test cannot drift apart together.
"""
import contextlib
import functools
import io

import packing_core as pc
from app_pages import _content
from packing_core.analysis.balance_report import step_balance, step_verdict
from packing_core.cli import main
from tests._support import assert_clean, metric, open_page

WORKED = _content.WORKED_LENGTHS


def text(at) -> str:
    said = [m.value for m in at.markdown] + [c.value for c in at.caption]
    said += [x.value for x in [*at.success, *at.info, *at.warning]]
    return "\n".join(said).replace("\\", "")


def cli(*argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):   # --help prints and exits
        main(list(argv), out=out, err=out)
    return out.getvalue()


@functools.cache
def explorer():
    at = open_page("dataset_explorer")
    assert_clean(at)
    return at


# ---------------------------------------------------------------- W1: a step, not an epoch
def test_W1_the_balance_step_deals_one_optimizer_step_and_says_an_epoch_total_is_even():
    at = explorer()
    said = text(at)
    assert "the verdict counts the whole step" not in said
    assert "changes the slowest rank's attention cost by less than 1 %" not in said
    assert "44,589 rows over 8 ranks x 4 micro-batches" not in said
    tickets = pc.load_lengths("support-tickets")
    sb = step_balance(pc.make_plan(tickets, 512, "bfd"), 8, 4, 1)
    s = sb.by_attention
    assert metric(at, "A step's max/mean, as dealt") == f"{s.before_imbalance:.2f}"
    assert metric(at, "Balanced by attention") == f"{s.after_imbalance:.2f}"
    assert metric(at, "The epoch's total, as dealt") == f"{s.epoch_imbalance:.2f}"
    verdict = step_verdict(sb)
    assert verdict[0].upper() + verdict[1:] in said
    assert f"a cut of {s.cut:.1%}".replace("%", " %") in verdict and s.cut > 0.15   # the review measured 24.6 %
    assert "Summed over the epoch the ranks come out even" in verdict and s.epoch_imbalance < 1.02


def test_U1_the_step_cost_comparison_reads_one_way():
    said = text(explorer())
    assert "as much as balancing by the step's cost" not in said
    sb = step_balance(pc.make_plan([512, 128, 128, 128, 128, 512, 128, 128, 128, 128] * 4, 512, "next-fit"), 2, 2)
    by_attention, by_step = sb.step_cuts
    assert (by_step <= by_attention + 5e-5) == ("does no better" in step_verdict(sb))
