"""What every page shares: the sidebar settings, cached calls into packing_core, safe text and errors,
and the view a link restores.

Settings are declared once with their defaults (``SHARED`` for the sidebar's, ``page_settings``
for a page's own) and live under plain ``st.session_state`` keys: the setting's name for a shared
one (``context``, ``dataset``), ``page.setting`` for a page's. A widget gets its own key
(``w_<key>``) and copies its value back on change, so a setting survives pages that do not draw
its widget (Streamlit clears widget keys there).

**A view is a link.** The page (the URL's path), its step and every declared setting that differs
from its default live in the URL's query parameters, written at the end of every run
(``end_view``) and read when a link opens (``open_view``, ``page_settings``); pages never touch
``st.query_params``. A declaration says what a link may set (``choice``, ``number``, ``text``), so a
bad link opens the default view with one line naming what was ignored::

    /masks_and_labels?step=4&break=row-cu-seqlens&attn=flash_attention_2
    /leakage_lab?step=3&train_seed=3&neighbours=independent&controls=hidden
"""
from __future__ import annotations

import functools
import logging
import math
import os
import re
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NoReturn
from urllib.parse import urlencode

import numpy as np
import pandas as pd
import streamlit as st

import packing_core as pc
from app_pages import _content
from packing_core import InputError, make_plan
from packing_core.analysis import (
    KEY_TITLES,
    cheatsheet_html,
    column_help,
    length_histogram,
    length_stats,
    profile_sample,
    strategy_frame,
)
from packing_core.data import list_sources
from packing_core.models import PRETRAINED
from packing_core.packing import STRATEGIES, piece_count

log = logging.getLogger("packing_lab")

CONTEXTS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
DEFAULT_CONTEXT = pc.DEFAULT_CONTEXT      # the lab's one default context, shared with the CLI
DEFAULT_DATASET = "support-tickets"
UPLOAD = "uploaded file"


# ---------------------------------------------------------------- state
def _copy(key: str) -> None:
    st.session_state[key] = st.session_state["w_" + key]


def bind(key: str, default):
    """Widget kwargs bound to the plain session key ``key``; the plain key wins at creation.

    ``st.slider("x", 0, 9, **bind("x", 3))``: no ``value=`` argument, the state holds it.
    """
    ss = st.session_state
    if key not in ss:
        ss[key] = default
    wkey = "w_" + key
    written = ss.setdefault("_bound", {})  # what bind last put into each widget
    if wkey in ss and key in written and ss[wkey] != written[key]:
        ss[key] = ss[wkey]      # the user moved the widget (even if no callback ran)
    elif wkey not in ss or ss[wkey] != ss[key]:
        ss[wkey] = ss[key]      # first visit, a page that cleared the widget, or a programmatic change
    written[key] = ss[key]
    return {"key": wkey, "on_change": _copy, "args": (key,)}


def setting(key: str, default):
    """The current value of a setting, initialising it if no page has set it yet."""
    return st.session_state.setdefault(key, default)


# ---------------------------------------------------------------- declared settings, and what a link may set
MAX_LINK_CHARS = 2_000      # one value of a link: a page's longest text (the Leakage lab's texts) fits
STEP, CONTROLS = "step", "controls"   # the view's own parameters beside the settings
HIDDEN = "hidden"           # controls=hidden: the teacher's focused screen (no sidebar, no widgets)


@dataclass(frozen=True)
class Setting:
    """One declared setting: its default, and what a link may set it to.

    A plain default declares its type (``width=64``: a whole number, ``skip=False``: on or off);
    ``choice`` names the allowed values, ``number`` a range, ``text`` a check; ``link=False``
    keeps a setting out of links (state a button sets, such as "show the continuation").

    >>> choice(64, (32, 64)).parse("32"), number(0, 0, 999).parse("7"), Setting(False).parse("1")
    (32, 7, True)
    >>> choice(64, (32, 64)).parse("65")
    Traceback (most recent call last):
    ...
    ValueError: not one of 32, 64
    """

    default: object
    options: tuple | Callable[[], tuple] | None = None   # the allowed values, or a function giving them now
    low: float | None = None            # a number's range, inclusive
    high: float | None = None
    check: Callable[[str], object] | None = None    # text: raises ValueError when the page could not use it
    link: bool = True

    def allowed(self) -> tuple | None:
        return self.options() if callable(self.options) else self.options

    def parse(self, raw: str):
        """The value a link's ``raw`` text means, or ``ValueError`` saying why the page cannot use it."""
        if len(raw) > MAX_LINK_CHARS:
            raise ValueError(f"longer than {MAX_LINK_CHARS:,} characters")
        if any(ord(c) < 32 and c not in "\n\t" for c in raw):
            raise ValueError("holds control characters")
        kind = type(self.default)
        if kind is bool:
            words = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}
            if raw.strip().lower() not in words:
                raise ValueError("not on or off (1 or 0)")
            value = words[raw.strip().lower()]
        elif kind is int:
            if not re.fullmatch(r"-?\d{1,12}", raw.strip()):
                raise ValueError("not a whole number")
            value = int(raw)
        elif kind is float:
            value = float(raw)   # ValueError on junk
            if not math.isfinite(value):
                raise ValueError("not a finite number")
        else:
            value = raw
        if self.low is not None and value < self.low or self.high is not None and value > self.high:
            raise ValueError(f"outside {self.low:g} to {self.high:g}")
        options = self.allowed()
        if options is not None and value not in options:
            shown = ", ".join(repr(o) if isinstance(o, str) else str(o) for o in options[:8]) + (
                ", ..." if len(options) > 8 else "")
            raise ValueError(f"not one of {shown}")
        if self.check is not None:
            try:
                self.check(value)
            except ValueError as e:   # a check may quote what it read: the note names the setting, never echoes it
                said = str(e)
                for quoted in (repr(raw), f"'{raw}'", f'"{raw}"'):
                    said = said.replace(quoted, "the link's text")
                raise ValueError(said) from None
        return value

    def text(self, value) -> str:
        """``value`` as a link writes it: ``Setting(False).text(True) == "1"``."""
        return ("1" if value else "0") if isinstance(value, bool) else str(value)


def choice(default, options) -> Setting:
    """A setting picked from ``options`` (a tuple, or a function that gives them on this server)."""
    return Setting(default, options=options if callable(options) else tuple(options))


def number(default, low, high) -> Setting:
    return Setting(default, low=low, high=high)


def text(default: str, check: Callable[[str], object]) -> Setting:
    """Free text, read by ``check`` (which raises ``ValueError``, e.g. ``InputError``, on text the page cannot use)."""
    return Setting(default, check=check)


def lines(low: int, high: int, chars: int) -> Callable[[str], None]:
    """A check for text of ``low`` to ``high`` non-empty lines of at most ``chars`` characters each."""
    def check(raw: str) -> None:
        kept = [line for line in raw.splitlines() if line.strip()]
        if not low <= len(kept) <= high or max(map(len, kept)) > chars:
            raise ValueError(f"{low} to {high} lines of at most {chars} characters are needed")
    return check


def _param(name: str) -> str:
    """A setting's name in a link: ``break_`` reads ``break``."""
    return name.rstrip("_")


@dataclass(frozen=True)
class PageSettings:
    """A page's settings, declared once with their defaults; session keys are ``page.setting``.

    ``S = page_settings("leakage_lab", mask=choice("on", ("on", "off")))`` then ``st.radio(..., **S.bind("mask"))``;
    the session key is ``"leakage_lab.mask"``, its widget's ``"w_leakage_lab.mask"``, its link parameter ``mask``.
    """

    page: str         # "" for the shared settings of the sidebar: their keys are the setting's name
    settings: dict = field(default_factory=dict)    # name -> Setting

    @property
    def defaults(self) -> dict:
        return {name: s.default for name, s in self.settings.items()}

    def key(self, name: str) -> str:
        return f"{self.page}.{name}" if self.page else name

    def bind(self, name: str) -> dict:
        return bind(self.key(name), self.settings[name].default)

    def get(self, name: str):
        return setting(self.key(name), self.settings[name].default)

    def keep_within(self, name: str, options, default) -> None:
        """Put a setting back on ``default`` when ``options`` no longer hold it (another model, a scenario)."""
        if st.session_state.get(self.key(name), default) not in options:
            st.session_state[self.key(name)] = default

    def from_link(self) -> bool:
        """Did a link set this page's view on this run? (A page whose settings depend on each other
        keeps the link's values instead of deriving them: the Leakage lab's scenario.)"""
        return st.session_state.get("_link_page") == self.page

    def apply_link(self) -> None:
        """Put the values of an opening link into the session (each checked against its declaration)."""
        link, used, notes = _link()
        for name, declared in self.settings.items():
            param = _param(name)
            if not declared.link or param not in link:
                continue
            used.add(param)
            try:
                st.session_state[self.key(name)] = declared.parse(link[param])
            except (ValueError, TypeError) as e:
                notes.append(f"{param} ({e})")
        if self.page:
            spec = _content.page(self.page)
            if STEP in link and spec.steps:
                used.add(STEP)
                try:
                    n = choice(1, range(1, len(spec.steps) + 1)).parse(link[STEP])
                    st.session_state[_step_key(self.page)] = step_label(n, spec.steps[n - 1])
                except ValueError as e:
                    notes.append(f"{STEP} ({e})")
            if link:
                st.session_state["_link_page"] = self.page

    def link_values(self) -> dict[str, str]:
        """The settings a link must carry to restore this view: those that differ from their defaults."""
        ss = st.session_state
        return {_param(name): s.text(ss[self.key(name)]) for name, s in self.settings.items()
                if s.link and self.key(name) in ss and ss[self.key(name)] != s.default}


_DECLARED: dict[str, PageSettings] = {}    # page -> its declaration (the same for every session)


def page_settings(page: str, **declared) -> PageSettings:
    """Declare a page's settings (plain defaults, or ``choice`` / ``number`` / ``text``), and put the values of a
    link that opens this page into the session: call it once, at the top of the page. A text or a number a link
    may set is declared with ``choice``, ``number`` or ``text`` (a plain ``"bfd"`` or ``64`` is refused here: a
    link could put any text, or any 12-digit number, into its widget)."""
    settings = PageSettings(page, {k: v if isinstance(v, Setting) else Setting(v) for k, v in declared.items()})
    unchecked = [n for n, s in settings.settings.items() if s.link and isinstance(s.default, str)
                 and s.options is None and s.check is None]
    if unchecked:   # a link would put any text into the session (and into a widget, or a line of the page)
        raise KeyError(f"{page}: declare {unchecked} with choice() or text(): a link may set them")
    unbounded = [n for n, s in settings.settings.items() if s.link and type(s.default) in (int, float)
                 and s.options is None and (s.low is None or s.high is None)]
    if unbounded:
        raise KeyError(f"{page}: declare {unbounded} with number() or choice(): a link may set them")
    clash = {_param(n) for n in settings.settings} & ({_param(n) for n in SHARED.settings} | {STEP, CONTROLS})
    if clash:
        raise KeyError(f"{page}: {sorted(clash)} are names of the shared view; give the page's setting another name")
    _DECLARED[page] = settings
    settings.apply_link()
    return settings


# the sidebar's settings, read by every page: SHARED.get("context")
SHARED = PageSettings("", {"context": choice(DEFAULT_CONTEXT, CONTEXTS),
                           "dataset": choice(DEFAULT_DATASET, lambda: tuple(dataset_names()))})


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


def _link() -> tuple[dict, set, list]:
    """(the link's parameters, the names read so far, notes on what was ignored) of this run."""
    ss = st.session_state
    return ss.setdefault("_link", {}), ss.setdefault("_link_used", set()), ss.setdefault("_link_notes", [])


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


def fragment(page: str):
    """``st.fragment`` for a part of ``page`` that reruns alone (the Leakage lab's switches): the URL still
    follows its settings, since ``end_view`` runs only after a whole page."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except PageStop:   # a guarded error ends the fragment, not the page around it
                return None
            finally:
                write_url(page)
        return st.fragment(run)
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


# ---------------------------------------------------------------- text and errors
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def esc(text) -> str:
    """Markdown-safe text: ``esc("a_b *c*") == r"a\\_b \\*c\\*"``; user text never renders as markup."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


class PageStop(Exception):
    """Raised by :func:`stop`: the page ends here, and the run still ends as every run does (the view written)."""


def stop() -> NoReturn:
    """End the page here. ``st.stop()`` would end the whole run at once: after it even reading the session
    raises, so the URL would keep the view of the run before."""
    raise PageStop


def release_memory() -> None:
    """Hand freed heap back to the system (glibc's ``malloc_trim``): the server runs each session's script in a
    thread of its own, whose malloc arena would otherwise keep the peak of a large analysis for good."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):    # not glibc: nothing to trim
        pass


@contextmanager
def guard(action: str):
    """Turn a failure inside the block into one ``st.error`` line and stop the page.

    ``ValueError`` from packing_core already says what is wrong and how to fix it; anything
    else is a bug: a short message on the page, the traceback in the server log.
    """
    try:
        yield
    except InputError as e:
        st.error(f"Could not {esc(action)}: {esc(e)}")
        stop()
    except Exception as e:  # noqa: BLE001  (no traceback may reach the page)
        log.exception("unexpected error while trying to %s", action)
        st.error(f"Could not {esc(action)}: an unexpected {type(e).__name__} occurred. "
                 "Try other settings; the details are in the server log.")
        stop()


FAULT_ENV = "PACKING_LAB_TEST_FAULT"   # test-only: a page title whose run raises, to check the error contract
UNEXPECTED = ("Something went wrong on this page ({kind}); it was logged on the server. "
              "Try other settings, or another page.")


def run_safely(page, *steps) -> None:
    """Run the sidebar and the page; an unexpected exception becomes one line, its traceback goes to the log.

    ``stop()`` ends the page quietly; reruns are not exceptions (Streamlit raises them as ``BaseException``) and
    pass. Pages end early with ``stop()``, never ``st.stop()``.
    No message text is shown: it may hold a server path. ``page`` is the ``st.Page`` being run.
    """
    # Outside a Streamlit run (a spawned scan worker re-imports the main script that AppTest left in
    # sys.modules) a Page has no title yet: that must not stop the import.
    try:
        title = page.title
    except AttributeError:
        title = "the page"
    try:
        if os.environ.get(FAULT_ENV) == title:
            raise RuntimeError(f"planted fault for the error-contract test ({FAULT_ENV}={title})")
        for step in steps:
            step()
    except PageStop:
        pass
    except Exception as e:  # noqa: BLE001  (the last line of defence: no traceback may reach the page)
        log.exception("unexpected error on the page %r", title)
        st.error(UNEXPECTED.format(kind=type(e).__name__))
    finally:   # also after st.stop(): the URL follows the view whatever the page did
        try:
            name = _content.page(title).name
        except KeyError:
            name = ""
        try:
            end_view(name)
        except Exception:  # noqa: BLE001  (a view that cannot be written must not hide the page)
            log.exception("could not write the view of %r into the URL", title)
        release_memory()     # what a large analysis freed goes back to the system, not to this run's thread


def lesson(page: str, **values) -> None:
    """The teacher's lines at the top of a page: its place in the 60-minute lesson (and how many
    steps it has), one sentence to read out, and one question to ask the class (from its ``_content.PageSpec``).

    ``page`` is the page's ``__file__`` (or its title): ``lesson(__file__)``. ``values`` fill the
    ``{name}`` fields of those texts with the page's live numbers. The box is open on a page's first
    visit and folds once read (the class moved on to a later step); a click opens it again. Under it,
    one line says what an opening link held that the page could not use.
    """
    spec = _content.page(page)
    order = _content.PAGES.index(spec)
    say, ask = (text.format(**values) if values else text for text in (spec.say, spec.ask))
    parts = f", in {len(spec.steps)} steps" if spec.steps else ""
    key = f"{spec.name}.lesson_open"
    ss = st.session_state
    if ss.get("_controls_hidden"):
        ss[key] = False
    ss.setdefault(key, True)
    with st.expander(f"Lesson, page {order + 1} of {len(_content.PAGES)}: {spec.title}, about {spec.minutes} minutes",
                     key=key, on_change="rerun", icon=":material/school:"):
        st.markdown(f"**Lesson, page {order + 1} of {len(_content.PAGES)} (about {spec.minutes} minutes{parts}).** "
                    f"{say}\n\n"
                    f"**Ask the class:** {ask}")
    ss["_note_slot"] = st.empty()


def _step_key(page: str) -> str:
    return f"{page}.step"


def step_number(spec, label: str | None) -> int:
    """The step a tab label names, 1 for none: ``step_number(spec, "2 · Positions") == 2``."""
    labels = [step_label(i, name) for i, name in enumerate(spec.steps, 1)]
    return labels.index(label) + 1 if label in labels else 1


def _read(page: str) -> None:
    """The class moved past the lesson box: fold it."""
    st.session_state[f"{page}.lesson_open"] = False


def _go_to_step(page: str, label: str) -> None:
    """The "next step" button: open that step, fold the lesson box, and bring the tabs into view."""
    ss = st.session_state
    ss[_step_key(page)] = label
    _read(page)
    ss["_scroll_to_tabs"] = ss.get("_scroll_to_tabs", 0) + 1


def steps(page: str) -> list:
    """The page's steps as tabs, numbered, in the order its ``PageSpec.steps`` names them:
    ``mask, positions = steps(__file__)``. One idea per tab, each about two projector screens
    (tests/e2e/test_projector.py measures them). Every tab runs on each rerun, so the tests see every
    step, and expensive work stays cached or behind a button. The open step is the view's ``step``
    (a link opens it); each step ends with a button to the next one, and the last with a link to
    the next page.
    """
    spec = _content.page(page)
    if not spec.steps:
        raise KeyError(f"{spec.title} has no steps: name them in its PageSpec in _content.PAGES")
    labels = [step_label(i, name) for i, name in enumerate(spec.steps, 1)]
    key = _step_key(spec.name)
    if st.session_state.get(key) not in labels:
        st.session_state[key] = labels[0]
    request = st.session_state.get("_scroll_to_tabs", 0)
    if request:
        scroll_here("tabs", request, block="start")
    tabs = st.tabs(labels, key=key, on_change=_read, args=(spec.name,))
    bodies = []
    order = _content.PAGES.index(spec)
    for i, tab in enumerate(tabs):
        body, foot = tab.container(), tab.container()
        bodies.append(body)
        if i + 1 < len(labels):
            foot.button(f"Next: step {labels[i + 1]}", key=f"{spec.name}.next_{i + 1}", icon=":material/arrow_forward:",
                        on_click=_go_to_step, args=(spec.name, labels[i + 1]))
        elif order + 1 < len(_content.PAGES):
            following = _content.PAGES[order + 1]
            foot.page_link(following.path, label=f"Next page: {following.title}", icon=":material/arrow_forward:")
    return bodies


def step_label(number: int, name: str) -> str:
    """A tab's label: ``step_label(2, "Positions") == "2 · Positions"`` (what the teacher says: "step 2")."""
    return f"{number} · {name}"


# ---------------------------------------------------------------- where the eye is
def scroll_here(name: str, token, block: str = "nearest") -> None:
    """Bring this spot of the page into view when ``token`` changes (a new answer, a run starting).

    A script in the page (``st.html``; literal text only, never data) runs each time its element
    mounts: two literal twins alternate, so a changed ``token`` always mounts a new one, and an
    unchanged one stays put and scrolls nothing. ``block``: "nearest" (scroll as little as needed:
    an answer just above the fold), "start" (the tabs) or "center" (a progress bar).
    """
    ss = st.session_state
    seen = ss.setdefault("_scrolls", {})
    last, count = seen.get(name, (None, 0))
    if token != last:
        count += 1
        seen[name] = (token, count)
    twin = count % 2
    # the twins differ only in a class name; app.py's style takes their element out of the page's flow
    if block == "nearest" and twin:
        st.html('<div class="pl-anchor pl-a"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "nearest", behavior: "smooth"}), 250); })();</script>',
                unsafe_allow_javascript=True)
    elif block == "nearest":
        st.html('<div class="pl-anchor pl-b"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "nearest", behavior: "smooth"}), 250); })();</script>',
                unsafe_allow_javascript=True)
    elif block == "start" and twin:
        st.html('<div class="pl-anchor pl-a"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "start", behavior: "smooth"}), 250); })();</script>',
                unsafe_allow_javascript=True)
    elif block == "start":
        st.html('<div class="pl-anchor pl-b"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "start", behavior: "smooth"}), 250); })();</script>',
                unsafe_allow_javascript=True)
    elif twin:
        st.html('<div class="pl-anchor pl-a"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "center", behavior: "smooth"}), 50); })();</script>',
                unsafe_allow_javascript=True)
    else:
        st.html('<div class="pl-anchor pl-b"></div><script>(() => { const a = document.currentScript.previousElementSibling;'
                ' setTimeout(() => a.scrollIntoView({block: "center", behavior: "smooth"}), 50); })();</script>',
                unsafe_allow_javascript=True)


@contextmanager
def progress(where, estimate=None):
    """A progress bar at ``where`` (the top of its step), scrolled into view, saying what runs, how long it has
    run and about how long is left: from the work done so far once there is some, before that from ``estimate``
    (a ``packing_core.experiments.Estimate``). Yields ``update(share, text)``; the bar goes when the block ends.
    """
    # A placeholder, not a container: a container's .empty() adds an empty element inside it and the finished bar
    # stayed, greyed but readable ("Training the tiny model...") through the next click's run.
    box = where.empty()
    with box.container():
        scroll_here("progress", time.monotonic(), block="center")
        bar = st.progress(0.0, text="Starting" + (f": {estimate.about()} in all" if estimate is not None else ""))
    start = time.monotonic()

    def update(share: float, what: str) -> None:
        share = min(max(float(share), 0.0), 1.0)
        spent = time.monotonic() - start
        if share >= 0.05:
            left = spent / share * (1 - share)
        elif estimate is not None:
            left = max(estimate.seconds - spent, 1.0)
        else:
            left = None
        rest = f", about {left:.0f} s left" if left is not None else ""
        bar.progress(share, text=f"{what} ({spent:.0f} s so far{rest})")

    try:
        yield update
    finally:
        box.empty()


def terms_help(*words: str) -> str:
    """The plain-language meaning of ``words`` (``_content.GLOSSARY``), for the ``help=`` tooltip of the
    paragraph that first uses them: ``st.markdown(text, help=terms_help("bfd"))``.

    A tooltip, not inline HTML: raw HTML on a page may come only from string literals.
    """
    return "\n\n".join(f"**{word}**: {_content.GLOSSARY[word]}" for word in words)


def glossary() -> None:
    """Every term the lab uses, in plain words: an expander in the shared sidebar, so on every page."""
    with st.expander("Glossary: the words in plain language"):
        st.markdown("\n".join(f"- **{esc(word)}**: {esc(meaning)}" for word, meaning in _content.GLOSSARY.items()))


@st.cache_resource(show_spinner=False)
def _cheatsheet() -> str:
    return cheatsheet_html()


def cheatsheet_download() -> None:
    """The invariants on one printable page (``analysis.cheatsheet``), from the shared sidebar: a download, no rerun."""
    st.download_button("Cheatsheet: the invariants on one page", _cheatsheet(), file_name="packing-lab-cheatsheet.html",
                       mime="text/html", on_click="ignore", icon=":material/download:",
                       help="An HTML page that prints on one A4 or Letter page: the mask rule, cu_seqlens, positions, "
                            "targets, what a check finds with its fix, and the TRL settings. Made from the lab's own "
                            "findings table and worked examples.")


def figure(fig, key: str | None = None) -> None:
    st.plotly_chart(fig, width="stretch", key=key, config={"displaylogo": False})


def cached_figure(builder, *args, **kwargs):
    """``builder(*args, **kwargs)`` from ``packing_core.viz``, built once per distinct arguments for the server.

    A rerun otherwise rebuilds every figure of the page, and plotly's figure objects are slow
    to build (a logit-diff figure about 15 ms, most of a warm click's own work once Streamlit's
    post-run garbage collection is off). Arguments are hashed by content (arrays, dataclasses),
    so equal settings share one figure; the figure is shared, never changed after it is built
    (``st.plotly_chart`` reads it through ``to_dict``), so no copy is made.
    ``figure(cached_figure(logit_diff_figure, diffs, cu, tol, title="..."), key=...)``.
    """
    return _built_figure(f"{builder.__module__}.{builder.__qualname__}", builder, args, kwargs)


@st.cache_resource(show_spinner=False, max_entries=256)
def _built_figure(name: str, _builder, args: tuple, kwargs: dict):
    return _builder(*args, **kwargs)


# ---------------------------------------------------------------- datasets
@st.cache_resource(show_spinner=False)
def sources() -> dict:
    """name -> SourceInfo for every built-in source (available or not)."""
    return {s.name: s for s in list_sources()}


@st.cache_data(show_spinner="Reading the dataset...", max_entries=8)
def source_lengths(name: str) -> np.ndarray:
    return pc.load_lengths(name, tokenizer=pc.load_tokenizer("auto"))


@st.cache_resource(show_spinner=False)
def model_status(name: str) -> tuple[bool, str]:
    """(available, message) for a registered model; the pretrained one imports transformers on first use."""
    try:
        return pc.model_spec(name).available()
    except ImportError as e:
        return False, f"transformers is not importable ({e}): pip install -r requirements.txt"


def pretrained_status() -> tuple[bool, str]:
    """(available, message) for SmolLM2 and its tokenizer."""
    return model_status(PRETRAINED)


def dataset_names() -> list[str]:
    names = [n for n, s in sources().items() if s.available]
    if "upload" in st.session_state:
        names.append(UPLOAD)
    return names


def dataset_label(name: str) -> str:
    if name == UPLOAD:
        return f"uploaded: {st.session_state['upload']['name']}"
    return name


def dataset_purpose(name: str) -> str:
    """'instruction' or 'pretraining' (``packing_core.data.PURPOSES``): how over-long documents should be handled."""
    if name == UPLOAD:
        return st.session_state["upload"]["purpose"]
    return sources()[name].purpose


def current_lengths() -> tuple[str, np.ndarray]:
    """(name, lengths) of the dataset chosen in the sidebar."""
    name = SHARED.get("dataset")
    if name == UPLOAD:   # counts, not documents: other pages draw from a seeded sample of them
        return name, _upload_sample(st.session_state["upload"]["digest"], st.session_state["upload"]["profile"])
    return name, source_lengths(name)


@st.cache_data(show_spinner=False, max_entries=4)
def _upload_sample(digest: str, _profile) -> np.ndarray:
    return profile_sample(_profile)


def sidebar() -> None:
    """The shared settings, drawn on every page."""
    SHARED.apply_link()
    with st.sidebar:
        st.subheader("Shared settings")
        st.select_slider("Context length (tokens per row)", options=CONTEXTS, **SHARED.bind("context"),
                         help="The longest row: packers fill rows of this length; padding strategies pad to it "
                              "(pad) or to each batch's longest sample (pad-longest, bucket).")
        names = dataset_names()
        if SHARED.get("dataset") not in names:
            st.session_state[SHARED.key("dataset")] = DEFAULT_DATASET
        # The options are fixed names and there is no format_func: a label that changes between runs
        # (a second upload) made Streamlit look up a value it no longer had (KeyError 'uploaded: ...').
        st.selectbox("Dataset", names, **SHARED.bind("dataset"),
                     help="Used by the explorer, the random draw and the benchmark.")
        name = st.session_state["dataset"]
        if name == UPLOAD:
            st.caption(f"Your data: {esc(st.session_state['upload']['caption'])}")
        else:
            st.caption(esc(sources()[name].description))
        missing = [s for s in sources().values() if not s.available]
        for s in missing:
            st.caption(f"Not available: {esc(s.name)}: {esc(s.reason)}")
        link_box()
        glossary()
        cheatsheet_download()


# ---------------------------------------------------------------- cached core calls
@st.cache_data(show_spinner=False, max_entries=64)
def plan(lengths: tuple, context: int, strategy: str, **kwargs):
    return make_plan(np.asarray(lengths, dtype=np.int64), context, strategy, **kwargs)


# optimal's budget on a page (the command line's default is 5 s): a page answers in about a second or
# two on first use, then from the cache; optimal stops sooner once its plan is proven optimal.
PAGE_TIME_LIMIT = 2.0

# Pieces a page plans for one section (bfd rows to balance, a stream to pack, the longest documents, a batch's
# order): about a second and 100 MB on the 2-core VM. The library's own ceiling (MAX_SPLIT_PIECES, 4,000,000)
# fits one user on their own machine; a server that serves a class cannot give every upload that much, and a
# 19-byte file of one 10^9-token document splits into 1,953,125 pieces at context 512.
PAGE_MAX_PIECES = 500_000


def over_page_budget(lengths, context: int, overlong: str = "split", command: str = "") -> str | None:
    """Why a page does not plan ``lengths`` (one line to show), or None when they fit ``PAGE_MAX_PIECES``;
    ``command`` names the command line that measures the same thing without the page's budget."""
    pieces = piece_count(lengths, context, overlong)
    if pieces <= PAGE_MAX_PIECES:
        return None
    elsewhere = f"; `{command}` measures it on your own machine" if command else ""
    return (f"Not measured on this page: these documents make {pieces:,} pieces at context {context}, more than "
            f"the {PAGE_MAX_PIECES:,} a page plans for one section. A longer context makes fewer pieces{elsewhere}.")


def within_page_budget(lengths, context: int, overlong: str = "split") -> None:
    """Refuse lengths a person typed (or a link carried) that make more than ``PAGE_MAX_PIECES`` pieces."""
    pieces = piece_count(lengths, context, overlong)
    if pieces > PAGE_MAX_PIECES:
        raise InputError(f"these lengths make {pieces:,} pieces at context {context}, more than the "
                         f"{PAGE_MAX_PIECES:,} a page plans: type shorter or fewer documents, raise the context, "
                         "or choose overlong 'truncate'")


def strategy_table(lengths: np.ndarray, context: int, **kwargs) -> list:
    """Every registered strategy on ``lengths`` (cached). The names are part of the cache key, so a
    strategy registered after a first call is never missing from a cached table. ``optimal`` gets
    ``PAGE_TIME_LIMIT`` unless the page passes its own ``time_limit``."""
    kwargs.setdefault("strategies", tuple(STRATEGIES))
    kwargs.setdefault("time_limit", PAGE_TIME_LIMIT)
    return _strategy_table(lengths, context, **kwargs)


@st.cache_data(show_spinner="Comparing every strategy...", max_entries=32)
def _strategy_table(lengths: np.ndarray, context: int, **kwargs) -> list:
    return pc.strategy_table(lengths, context, **kwargs)


@st.cache_data(show_spinner=False, max_entries=32)
def recommendation(stats, rows: list, purpose: str, lengths) -> str:
    """``pc.recommend`` (about 20 ms on 200,000 lengths), once per dataset, context and purpose."""
    return pc.recommend(stats, rows, purpose, lengths=lengths)


@st.cache_data(show_spinner=False, max_entries=16)
def length_summary(lengths: np.ndarray, context: int):
    return length_stats(lengths, context), length_histogram(lengths, context)


def strategy_dataframe(rows, plans=None) -> None:
    """The side-by-side table of every strategy (``analysis.strategy_frame``: the columns the CLI's table has);
    with a profile's ``plans``, also their basis and trained tokens per slot."""
    df = pd.DataFrame(strategy_frame(rows, plans))
    # A projector shows about 560 px of table beside the sidebar: the columns a class compares come
    # first, in a table that fits; every column waits in the expander below it.
    key = [*KEY_TITLES, "trained tokens per slot" if plans is not None else "pads"]
    config = {title: st.column_config.NumberColumn(format=fmt, help=help or None) if fmt
              else st.column_config.Column(help=help) for title, (fmt, help) in column_help(plans).items()}
    st.dataframe(df[key], hide_index=True, width="stretch", column_config=config)
    with st.expander("Every column: slots, pads, costs and FLOP ratios"):
        st.dataframe(df, hide_index=True, width="stretch", column_config=config)
