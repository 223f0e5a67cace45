"""Watch it pack: next-fit, ffd, bfd and the LP's plan filling rows one document at a time, each move with its rule.

Streamlit has no animation loop: "Play" turns on a fragment timer (``st.fragment(run_every=...)``) that
shows one more placement per tick and reruns only the player, never the page; the timer exists only
while playing, so a paused or finished player costs the server nothing.
"""
import streamlit as st

from app_pages import _content
from app_pages._data import current_lengths, dataset_label, plan
from app_pages._layout import cached_figure, document_picker, figure, guard, lesson
from app_pages._links import fragment
from app_pages._state import SHARED, choice, number, page_settings
from app_pages._text import esc
from packing_core.analysis import sample_lengths
from packing_core.packing import TRACE_STRATEGIES, plan_trace
from packing_lab.viz import trace_figure

PLAY_SECONDS = 0.8      # one placement per tick: a class can read each rule as it comes
DRAW = 16               # documents in a random draw
EXAMPLE, DRAWN = "example", "draw"
ORDER = {"next-fit": "in the dataset's order", "ffd": "longest first", "bfd": "longest first",
         "optimal": "row by row, as the solver's plan lays them out"}
MAX_DRAW = 10**6        # draws a link may name: any seed a class could reach by pressing "Draw again"
# What a link may set: a packer of the trace, one of the two sets, a placement count (clamped to the trace's
# length below), a draw's seed. A plain default would let "?strategy=<script>" reach the radio.
S = page_settings("watch_it_pack", strategy=choice("bfd", TRACE_STRATEGIES), documents=choice(EXAMPLE, (EXAMPLE, DRAWN)),
                  shown=number(0, 0, 10_000), draw=number(1, 1, MAX_DRAW), doc=number(None, 0, 10_000))

st.title("Watch it pack")
lesson(__file__)


@st.cache_data(show_spinner=False, max_entries=32)
def traced(lengths: tuple, context: int, strategy: str):
    return plan_trace(lengths, context, strategy)


ss = st.session_state
shown_key, playing_key = S.key("shown"), S.key("playing")
timer = bool(ss.get(playing_key))


def _documents() -> tuple[tuple[int, ...], int, str]:
    """(lengths, context, where they come from) of the chosen documents."""
    if S.get("documents") == EXAMPLE:
        return _content.WATCH_LENGTHS, _content.WATCH_CONTEXT, \
            f"at context {_content.WATCH_CONTEXT} (this example's own)"
    context = SHARED.get("context")
    with guard("draw documents from the dataset"):
        drawn = tuple(sample_lengths(current_lengths()[1], DRAW, seed=S.get("draw")).tolist())
    return drawn, context, f"from {esc(dataset_label(SHARED.get('dataset')))} at context {context} (the sidebar's)"


@fragment("watch_it_pack", run_every=PLAY_SECONDS if timer else None)   # the URL follows each move
def player() -> None:
    """The packer, the controls, the rule of the last move and the rows: the only part a tick reruns."""
    lengths, context, where = _documents()
    # the packer is the lesson (compare them): it stays on the teacher's focused screen
    strategy = st.radio("Packer", TRACE_STRATEGIES, horizontal=True, **S.bind("strategy", lesson=True))
    with guard(f"step through {strategy}"):
        trace = traced(lengths, context, strategy)
    n = len(trace.steps)
    now = (lengths, context, strategy)
    if ss.get(S.key("traced")) != now:    # another packer or set: from the start, unless a link says where
        if S.key("traced") in ss and not S.from_link():
            ss[shown_key], ss[playing_key] = 0, False
        ss[S.key("traced")] = now
    ss[shown_key] = min(int(ss.get(shown_key, 0)), n)
    if ss.get(playing_key) and timer:               # a tick: one more placement
        ss[shown_key] = min(n, ss[shown_key] + 1)
        if ss[shown_key] >= n:
            ss[playing_key] = False
    if bool(ss.get(playing_key)) != timer:          # start or stop the timer: it is set when the page runs
        st.rerun()

    def move(to: int | None = None, by: int = 0) -> None:
        """Every control but Play pauses."""
        ss[playing_key] = False
        ss[shown_key] = max(0, min(n, to if to is not None else ss[shown_key] + by))

    def play() -> None:
        if ss.get(playing_key):
            ss[playing_key] = False
            return
        if ss[shown_key] >= n:      # from the start again
            ss[shown_key] = 0
        ss[playing_key] = True

    c = st.columns([1, 1, 1, 1, 4], vertical_alignment="center")
    c[0].button("Start", on_click=move, kwargs={"to": 0}, width="stretch")
    c[1].button("Back", on_click=move, kwargs={"by": -1}, width="stretch")
    c[2].button("Pause" if ss.get(playing_key) else "Play", on_click=play, type="primary", width="stretch")
    c[3].button("Step", on_click=move, kwargs={"by": 1}, width="stretch")
    shown = c[4].slider("Placements shown", 0, n, label_visibility="collapsed", **S.bind("shown"))
    if shown == 0:
        st.markdown(f"**{n} pieces wait** {where}. {esc(strategy)} takes them {ORDER[strategy]}: press Play, or "
                    "Step, and say where each one goes before it moves.")
    else:
        s = trace.steps[shown - 1]
        piece = f"document {s.doc}" + (f" (tokens {s.start}-{s.start + s.length})" if s.start else "")
        st.markdown(f"**Step {shown} of {n}: {piece}, {s.length} tokens, goes to row {s.row}.** "
                    f"{esc(s.rule[0].upper() + s.rule[1:])}.")
    opened = len(trace.steps[shown - 1].fill) if shown else 0
    picked = S.get("doc")   # a document clicked in the rows, or picked below: framed, and bold in the rows' line
    figure(cached_figure(trace_figure, trace, shown, title=f"{strategy}: {shown} of {n} placed, "
                                                           f"{opened} row{'' if opened == 1 else 's'}", highlight=picked),
           key=S.key("figure"), pick=(S, "doc"))
    document_picker(S, "doc", len(lengths), label="Pick out a document (or click it in the rows)")
    rows: dict[int, list[str]] = {}
    for s in trace.steps[:shown]:
        rows.setdefault(s.row, []).append(f"**{s.doc}**" if s.doc == picked else str(s.doc))
    listed = " · ".join(f"row {r}: {', '.join(rows[r])}" for r in sorted(rows))
    if shown < n:
        waiting = " · ".join(str(s.length) for s in trace.steps[shown:shown + 12])
        st.caption(f"Next, in {strategy}'s order: {waiting}{' ...' if n - shown > 12 else ''}. "
                   f"Rows so far (documents): {listed or 'none'}.")
        return
    st.caption(f"The plan (documents per row): {listed}.")
    with guard("plan every packer on these documents"):       # the end: every packer on the same documents
        ends = {s: plan(lengths, context, s) for s in TRACE_STRATEGIES}
    cert = ends["optimal"].certificate
    best = (f"optimal's {cert.rows} rows are proven optimal (they meet the lower bound)" if cert.gap_rows == 0 else
            f"optimal's {cert.rows} rows are {cert.gap_rows} above the proven lower bound ({cert.bound.rows})")
    st.markdown(f"**Done: {esc(strategy)} needs {trace.rows} rows.** On these documents: " + " · ".join(
        f"{s} {p.n_rows}" for s, p in ends.items()) + f"; {best}. Each greedy rule is a guess that is usually "
        "good; on a whole dataset ffd and bfd tend to end within a few rows of each other, and next-fit, which "
        "never looks back, well above both.")
    if strategy == "optimal" and trace.note:
        st.caption(esc(trace.note))


player()

documents = st.radio("Documents", (EXAMPLE, DRAWN), horizontal=True, **S.bind("documents"),
                     format_func=lambda d: f"{len(_content.WATCH_LENGTHS)} chosen to tell the packers apart"
                     if d == EXAMPLE else f"{DRAW} drawn from the dataset")
if documents == DRAWN:
    st.button("Draw again", on_click=lambda: ss.update({S.key("draw"): S.get("draw") % MAX_DRAW + 1}))
