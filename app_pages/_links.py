"""A view is a link: the page (the URL's path), its step and every declared setting that differs
from its default live in the URL's query parameters, written at the end of every run (``end_view``)
and read when a link opens (``open_view``, ``page_settings``); pages never touch ``st.query_params``::

    /masks_and_labels?step=4&break=row-cu-seqlens&attn=flash_attention_2
    /leakage_lab?step=3&train_seed=3&neighbours=independent&controls=hidden
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from urllib.parse import urlencode

import streamlit as st

from app_pages import _content
from app_pages._state import _DECLARED, CONTROLS, HIDDEN, SHARED, STEP, _link, _step_key, step_number
from app_pages._text import PageStop, esc


# ---------------------------------------------------------------- the view: a link that restores it
@dataclass(frozen=True)
class View:
    """What the link of this run asks of the whole app (read once, before the page runs)."""

    hide_controls: bool


def _canonical(params: dict) -> str:
    return urlencode(sorted(params.items()))


def open_view() -> View:
    """Start a run: is the URL a link to open (a new visit, or one this session did not write)?

    Its parameters wait in the session for the declarations that read them (``SHARED`` in the sidebar,
    ``page_settings`` in the page); what no declaration reads is named on the page by ``end_view``.
    Call it first, in ``app.py``.
    """
    ss = st.session_state
    incoming = st.query_params.to_dict()
    canonical = _canonical(incoming)
    fresh = canonical not in ss.get("_url_written", ()) and canonical != ss.get("_url_handled")
    ss["_link"], ss["_link_used"], ss["_link_notes"] = (dict(incoming) if fresh else {}), set(), []
    ss["_url_incoming"] = canonical
    ss.pop("_link_page", None)
    if fresh and incoming:
        ss["_controls_hidden"] = False
        if CONTROLS in incoming:
            ss["_link_used"].add(CONTROLS)
            if incoming[CONTROLS] == HIDDEN:
                ss["_controls_hidden"] = True
            elif incoming[CONTROLS] != "shown":
                ss["_link_notes"].append(f"{CONTROLS} (only {HIDDEN} or shown)")
    return View(hide_controls=bool(ss.get("_controls_hidden")))




def unknown_page(name: str | None) -> None:
    """A link to a page that does not exist: the first page opens, and the page says so in one line."""
    _, _, notes = _link()
    shown = (name or "").strip("/")[:40]
    if shown in {p.name for p in _content.PAGES}:
        return   # the first page by its own name: Streamlit knows it only as the root, and runs it
    notes.insert(0, f"the page {shown!r} (there is no such page; this is the first page)" if shown
                 else "the page (there is no such page; this is the first page)")


def quiet_page_not_found() -> None:
    """Streamlit answers an unknown page in a link with a modal error box and runs the first page; the lab
    runs the first page too, and says so in its one line about the link instead (``unknown_page``).

    ``st.navigation`` calls ``streamlit.commands.navigation.send_page_not_found(ctx)`` when no page matches
    the URL (streamlit 1.67, ``commands/navigation.py``); this replaces that module function, once per process.
    """
    import streamlit.commands.navigation as nav

    if getattr(nav.send_page_not_found, "_packing_lab", False):
        return

    def noted(ctx) -> None:
        unknown_page(getattr(ctx.pages_manager, "intended_page_name", None))

    noted._packing_lab = True
    nav.send_page_not_found = noted


def view_values(page: str) -> dict[str, str]:
    """The link parameters of the view now: the shared settings, the page's, its step, the controls flag."""
    ss = st.session_state
    values = SHARED.link_values()
    declared = _DECLARED.get(page)
    if declared is not None:
        values.update(declared.link_values())
    spec = _page_spec(page)
    if spec is not None and spec.steps:
        n = step_number(spec, ss.get(_step_key(spec.name)))
        if n > 1:
            values[STEP] = str(n)
    if ss.get("_controls_hidden"):
        values[CONTROLS] = HIDDEN
    return values


def _page_spec(page: str):
    try:
        return _content.page(page)
    except KeyError:
        return None


def write_url(page: str) -> None:
    """Put the view of ``page`` into the URL (only when it changed: each write is a message to the browser)."""
    ss = st.session_state
    values = view_values(page)
    canonical = _canonical(values)
    if canonical != _canonical(st.query_params.to_dict()):
        st.query_params.from_dict(values)
    written = ss.setdefault("_url_written", [])
    if canonical not in written:
        written[:] = [*written[-48:], canonical]


_CONTROLS = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\u202a-\u202e]")   # a link's name is shown on one line, as it reads


def end_view(page: str) -> None:
    """End a run: name what the link held that nothing could use, and write the view into the URL."""
    ss = st.session_state
    link, used, notes = _link()
    notes += [f"{_CONTROLS.sub('?', name[:40])} (no such setting on this page)" for name in link if name not in used]
    slot = ss.pop("_note_slot", None)
    if notes and slot is not None:
        slot.info("Part of this link was ignored, so those settings are at their defaults: "
                  + "; ".join(esc(n[:160]) for n in notes) + ".", icon=":material/link_off:")
    write_url(page)
    ss["_url_handled"] = ss.get("_url_incoming")
    ss["_link"] = {}
    ss.pop("_link_page", None)   # a fragment's later runs are the class's own clicks, not the link's


def fragment(page: str, **options):
    """``st.fragment`` for a part of ``page`` that reruns alone (the Leakage lab's switches, Watch it pack's
    player; ``options`` go to ``st.fragment``, e.g. ``run_every``): the URL still follows its settings and step,
    since ``end_view`` runs only after a whole page."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except PageStop:   # a guarded error ends the fragment, not the page around it
                return None
            finally:
                write_url(page)
        return st.fragment(run, **options)
    return wrap


def link_box() -> None:
    """"Copy link to this view": the browser's own URL, which ``write_url`` keeps equal to the page, its step and
    settings (a script in the page copies it: literal text only; an address that is not https or localhost has no
    clipboard API, so it falls back to the older copy command)."""
    st.html("""<button class="pl-copy" type="button">Copy link to this view</button>
<span class="pl-copied" aria-live="polite"></span>
<script>(() => {
  const button = document.currentScript.parentElement.querySelector(".pl-copy");
  const said = document.currentScript.parentElement.querySelector(".pl-copied");
  button.addEventListener("click", async () => {
    const url = window.location.href;
    try { await navigator.clipboard.writeText(url); }
    catch (e) {
      const box = document.createElement("textarea");
      box.value = url; document.body.appendChild(box); box.select(); document.execCommand("copy"); box.remove();
    }
    said.textContent = " copied";
    setTimeout(() => { said.textContent = ""; }, 2500);
  });
})();</script>""", unsafe_allow_javascript=True)
    st.caption(f"The link opens this page, step and settings. Add `&{CONTROLS}={HIDDEN}` to it for a focused "
               "screen: no sidebar, no settings, only the lesson.")


